"""lab.pool's queue without processes: lanes and their slots, per-session fair turns, cancel,
stop and abandoned tickets, as both clients use them (their own tests run real children)."""

from __future__ import annotations

import time

import pytest

from lab.pool import ChildRecord, ChildState, LaneRule, PoolClient, PoolFailed, PoolQueue, Ticket, TicketState
from lab.pool.protocol import Name


class Kind(Name):
    CANCELLED = "cancelled"
    SHUTDOWN = "shutdown"
    CRASH = "crash"
    TIMEOUT = "timeout"


class Failed(PoolFailed):
    kinds = Kind


class Client(PoolClient):
    noun = "job"
    failed = Failed
    cancelled_text = "the job was cancelled"
    shutdown_text = "stopping"
    fail_waiting_on_start_failure = True


class Alive:
    """A child process that is up (``Popen.poll`` → None)."""

    returncode = None

    def poll(self):
        return None


class Queue(PoolQueue):
    def describe_status(self, ticket, now, position):
        return ticket.state, position


def queue_of(children: int, lanes=None, *, abandon_after_s: float = 120.0) -> Queue:
    records = [ChildRecord(i) for i in range(children)]
    for r in records:
        r.process = Alive()
    return Queue(Client(), records, lanes=lanes, abandon_after_s=abandon_after_s)


def put(queue: Queue, job, *, session=None, lane="default") -> Ticket:
    with queue.lock:
        ticket = Ticket(queue, queue.next_id(), job, session=session, lane=lane)
        queue.enqueue(ticket)
    return ticket


def test_sessions_take_turns_and_anonymous_tickets_keep_arrival_order():
    queue = queue_of(1)
    for i in range(3):
        put(queue, f"alice{i}", session="alice")
    put(queue, "bob0", session="bob")
    put(queue, "anon0")
    put(queue, "carol0", session="carol")
    with queue.lock:
        order = [t.job for t in queue.serve_order()]
    # Round 1: each session's first (and the anonymous one), in arrival order; then alice's rest.
    assert order == ["alice0", "bob0", "anon0", "carol0", "alice1", "alice2"]
    child = queue.children[0]
    served = []
    for _ in range(len(order)):
        ticket = queue.next_ticket(child)
        served.append(ticket.job)
        queue.record_done(child, ticket, ticket.job.upper(), 0.0)
    assert served == order
    assert queue.served == 6 and child.served == 6 and child.state == ChildState.BUSY


def test_a_lane_with_slots_leaves_children_for_the_other_lane_and_goes_second():
    queue = queue_of(2, {"small": LaneRule(priority=0), "large": LaneRule(priority=1, slots=1)})
    big1, big2 = put(queue, "big1", lane="large"), put(queue, "big2", lane="large")
    small = put(queue, "small", lane="small")
    first = queue.next_ticket(queue.children[0])
    assert first is small  # the small lane goes first, though it came last
    assert queue.status(big2) == (TicketState.QUEUED, 2)  # positions count within a lane
    assert queue.next_ticket(queue.children[1]) is big1
    queue.record_done(queue.children[0], small, None, 0.0)
    with queue.lock:  # one large slot, held by big1: child 0 may not take big2
        assert queue._pick(queue.children[0]) is None
    queue.record_done(queue.children[1], big1, None, 0.0)
    assert queue.next_ticket(queue.children[1]) is big2  # its child, free again, takes the next large one


def test_cancel_stop_and_abandoned_tickets_settle_with_the_clients_words():
    queue = queue_of(1, abandon_after_s=0.01)
    waiting, running = put(queue, "w"), put(queue, "r")
    assert waiting.cancel() and not waiting.cancel()
    with pytest.raises(Failed, match="the job was cancelled") as caught:
        waiting.result(timeout=0)
    assert caught.value.kind == Kind.CANCELLED and waiting.state == TicketState.CANCELLED
    child = queue.children[0]
    assert queue.next_ticket(child) is running
    assert running.cancel() and running.done()  # a running one settles now; its supervisor kills the child
    queue.record_done(child, running, "late", 0.0)  # a late result changes nothing
    with pytest.raises(Failed):
        running.result(timeout=0)
    old = put(queue, "old")
    time.sleep(0.05)
    with queue.lock:
        queue._drop_abandoned(time.monotonic())
    with pytest.raises(Failed, match=r"the job was dropped from the queue: nobody checked on it for 0.01 s"):
        old.result(timeout=0)
    left = put(queue, "left")
    assert queue.stop() and not queue.stop()
    with pytest.raises(Failed, match="stopping") as caught:
        left.result(timeout=0)
    assert caught.value.kind == Kind.SHUTDOWN
    with pytest.raises(RuntimeError, match="was shut down"):
        queue.check_open()


def test_a_failed_start_fails_the_waiting_tickets_only_when_no_child_is_up():
    queue = queue_of(2)
    ticket = put(queue, "waits")
    queue.children[1].state = ChildState.IDLE
    queue.start_failed(queue.children[0], "child 0 did not start")
    assert not ticket.done() and queue.last_error == "child 0 did not start"  # child 1 will take it
    queue.children[1].state = ChildState.RESTARTING
    queue.start_failed(queue.children[0], "child 0 did not start")
    with pytest.raises(Failed, match="no child process could start") as caught:
        ticket.result(timeout=0)
    assert caught.value.kind == Kind.CRASH and queue.failed == 1
