"""ProfileService: real worker processes running real (tiny, CPU) profiles.

Worker start-up costs several seconds here (torch import + warm-up profile), so the tests
that need a warm service share one two-worker pool, and the ``service`` fixture hands it over
only once both workers are warm and idle with nothing queued: a test starts from that state
whatever ran before it (a killed or timed-out worker is replaced in the background). The
tests pass in any order (``-p randomly``, or the node ids reversed); the queue test uses the
pool while it is still cold, or a fresh service of its own.

Both backends run this suite: here the local one (worker processes of this interpreter);
``tests/test_service_ray.py`` collects the same tests with the ``backend`` fixture set to a
real two-node Ray cluster. Every service a test makes takes its settings from ``backend``.
"""

from __future__ import annotations

import gzip
import json
import os
import signal
import sys
import threading
import time
import types

import pytest

from lab.core.config import ConfigError, RunConfig
from lab.core.settings import HostSettings
from lab.run.service import (
    ProfileService,
    RunFailed,
    ServiceBusy,
    default_devices,
    visible_gpu_ids,
    worker_pinning,
)

pytestmark = [pytest.mark.pool]

# Seconds a test waits for a result: generous, as other jobs share this machine's 2 cores and
# a crashed or timed-out worker is warmed up again before the next run.
RESULT_WAIT_S = 180


def tiny(label: str = "matmul_add", size: int = 16, **changes) -> RunConfig:
    """A CPU run that profiles one step of a small matmul + add."""
    fields = dict(m=size, k=size + 1, n=size + 2, device="cpu", step_label=label,
                  wait=0, warmup=1, active=1, warmup_iters=0)
    fields.update(changes)
    return RunConfig(**fields)


# A run far over the 3 s limit on any CPU: 41 profiled steps of 2·4096³ ≈ 137 GFLOP each
# (~5.6 TFLOP: ~1.5 min on this 2-core box, several seconds on a 16-core server), so it is
# still running when the fault tests kill it or when the limit stops it.
BIG = RunConfig(m=4096, k=4096, n=4096, device="cpu", step_label="big", wait=0, warmup=1, active=40,
                warmup_iters=0)


def annotations_in_trace(trace_gz: bytes) -> set[str]:
    events = json.loads(gzip.decompress(trace_gz))["traceEvents"]
    return {e["name"] for e in events if e.get("cat") == "user_annotation"
            and not e["name"].startswith("ProfilerStep")}


def mm_input_dims(trace_gz: bytes) -> list:
    events = json.loads(gzip.decompress(trace_gz))["traceEvents"]
    return [e["args"]["Input Dims"] for e in events if e.get("name") == "aten::mm"]


# Every test run here takes well under a second, so a 3 s limit only stops BIG.
RUN_TIMEOUT_S = 3.0
# Room for 8 concurrent users even while both workers are busy.
QUEUE_MAX = 8


# A page script that leaves a mark if anything executes it.
PAGE_SCRIPT = 'import pathlib\npathlib.Path(__file__).with_suffix(".ran").write_text("executed")\n'


@pytest.fixture(scope="module")
def page_as_main(tmp_path_factory):
    """Make ``__main__`` a page script, as ``streamlit run`` does while a page runs.

    multiprocessing's spawn re-runs ``__main__`` in every child; under Streamlit that re-ran
    the page, which started another service, whose workers re-ran the page… Workers must
    never execute it. Yields the path of the mark the script would leave.
    """
    script = tmp_path_factory.mktemp("page") / "page.py"
    script.write_text(PAGE_SCRIPT)
    page = types.ModuleType("__main__")
    page.__file__ = str(script)
    page.__spec__ = None
    saved = sys.modules["__main__"]
    sys.modules["__main__"] = page
    yield script.with_suffix(".ran")
    sys.modules["__main__"] = saved


@pytest.fixture(scope="module")
def backend() -> HostSettings:
    """The settings that pick the backend (``backend``, ``ray_address``); the Ray module overrides it."""
    return HostSettings()


def on(backend: HostSettings, **limits) -> HostSettings:
    """``limits`` on the module's backend."""
    return backend.replace(**limits)


@pytest.fixture(scope="module")
def shared(page_as_main, backend):
    """The file's pool, not started: the first test that needs it warm starts it.
    Every worker it starts (and restarts) does so with a page script as ``__main__``."""
    svc = ProfileService(
        # No run-time estimate limit: BIG must start, so the time-limit and kill tests can stop it.
        # No spares: the fault tests below check the fresh start that replaces a worker without one.
        settings=on(backend, run_timeout_s=RUN_TIMEOUT_S, queue_max=QUEUE_MAX, reuse_window_s=600.0,
                    max_run_estimate_s=0.0, standby=0),
        devices=["cpu", "cpu"])
    yield svc
    svc.shutdown()


@pytest.fixture()
def unstarted(shared):
    """A service whose workers have not started: the shared one if still cold (the usual
    order), else a fresh one (when tests are selected or reordered)."""
    if not shared.started:
        yield shared
        return
    svc = ProfileService(settings=shared.settings, devices=["cpu"])
    yield svc
    svc.shutdown()


@pytest.fixture()
def service(shared):
    """The pool, warm: every worker alive and idle, nothing queued."""
    shared.start(wait=True)
    return settled(shared)


def settled(svc, deadline_s: float = RESULT_WAIT_S):
    deadline = time.monotonic() + deadline_s
    while True:
        health = svc.health()
        if health.queue_length == 0 and all(w.alive and w.state == "idle" for w in health.workers):
            return svc
        assert time.monotonic() < deadline, health
        time.sleep(0.05)


# ---------------------------------------------------------------- device discovery (no processes)


def test_visible_gpu_ids_follow_cuda_visible_devices():
    assert visible_gpu_ids({"CUDA_VISIBLE_DEVICES": "2,3"}) == ["2", "3"]
    assert visible_gpu_ids({"CUDA_VISIBLE_DEVICES": ""}) == []
    assert visible_gpu_ids({"CUDA_VISIBLE_DEVICES": "-1"}) == []
    # CUDA ignores everything after an invalid entry.
    assert visible_gpu_ids({"CUDA_VISIBLE_DEVICES": "1,-1,0"}) == ["1"]


def test_default_devices_one_per_gpu_or_cpu_and_workers_override():
    assert default_devices(HostSettings(), ["0", "1"]) == ["cuda:0", "cuda:1"]
    assert default_devices(HostSettings(workers=3), ["0", "1"]) == ["cuda:0", "cuda:1", "cuda:0"]
    assert default_devices(HostSettings(), []) == ["cpu"]
    assert default_devices(HostSettings(workers=2), []) == ["cpu", "cpu"]


def test_worker_pinning_reports_the_physical_gpu():
    assert worker_pinning("cuda:1", ["2", "3"]) == ("3", 3)
    assert worker_pinning("cuda:0", ["GPU-abc"]) == ("GPU-abc", 0)
    assert worker_pinning("cpu", ["0"]) == ("", -1)
    with pytest.raises(ValueError, match="not visible"):
        worker_pinning("cuda:2", ["0"])


# ---------------------------------------------------------------- queue: positions, limit, cancel


def test_queue_positions_busy_and_cancel(unstarted):
    svc = unstarted
    # Not started yet: tickets stay queued in order, so positions are exact.
    tickets = [svc.submit(tiny(label=f"q{i}")) for i in range(QUEUE_MAX)]
    assert [t.poll().queue_position for t in tickets] == list(range(1, QUEUE_MAX + 1))
    assert all(t.poll().state == "queued" for t in tickets)
    with pytest.raises(ServiceBusy, match="runs are queued; try again in a moment"):
        svc.submit(tiny(label="one_too_many"))
    assert svc.health().queue_length == QUEUE_MAX

    assert tickets[1].cancel()
    assert tickets[1].poll().state == "cancelled"
    assert [t.poll().queue_position for t in tickets[2:]] == list(range(2, QUEUE_MAX))
    with pytest.raises(RunFailed, match="cancelled") as caught:
        tickets[1].result(timeout=0)
    assert caught.value.kind == "cancelled"
    # Room again after the cancel.
    tickets.append(svc.submit(tiny(label="last")))

    svc.start()
    kept = [t for i, t in enumerate(tickets) if i != 1]
    labels = [t.result(timeout=RESULT_WAIT_S).config.step_label for t in kept]
    assert labels == [t.config.step_label for t in kept]
    assert svc.health().runs_served == len(kept)  # the cancelled run never ran
    assert tickets[1].poll().state == "cancelled"
    assert not tickets[1].cancel()  # already settled
    # Estimates exist once runs have finished.
    estimated = svc.submit(tiny(label="estimated"))
    assert estimated.poll().estimate_s is not None
    estimated.result(timeout=RESULT_WAIT_S)  # leave the queue empty for the next test


def test_one_submission_per_session_and_sessions_take_turns(backend):
    svc = ProfileService(settings=on(backend, queue_max=QUEUE_MAX), devices=["cpu"])  # never started
    try:
        first = svc.submit(tiny(label="a_first"), session="a")
        second = svc.submit(tiny(label="a_second"), session="a")
        # A second click replaces the waiting run, says so, and keeps its place.
        assert first.poll().state == "cancelled"
        assert "replaced by a newer one" in first.poll().message
        assert second.poll().replaced == 1 and second.poll().queue_position == 1
        assert svc.health().queue_length == 1
        b1, b2 = svc.submit_all([tiny(label="b1"), tiny(label="b2")], session="b")
        c1 = svc.submit(tiny(label="c1"), session="c")
        anonymous = svc.submit(tiny(label="anonymous"))
        # Round robin: b's second run waits until every other session had its turn.
        order = [second, b1, c1, anonymous, b2]
        assert [t.poll().queue_position for t in order] == [1, 2, 3, 4, 5]
        # b clicks again: both b runs are replaced by one, in b1's place.
        b_again = svc.submit(tiny(label="b_again"), session="b")
        assert b1.poll().state == b2.poll().state == "cancelled" and b_again.poll().replaced == 2
        assert [t.poll().queue_position for t in (second, b_again, c1, anonymous)] == [1, 2, 3, 4]
        assert svc.health().queue_length == 4
    finally:
        svc.shutdown()


def test_wait_estimate_adds_the_run_estimates_ahead(backend):
    from lab.core.devices import DeviceInfo, DeviceRates

    svc = ProfileService(settings=backend, devices=["cpu"])  # never started
    try:
        # As a warm worker would report: 50 GFLOP/s (the queue estimates from its DeviceInfo).
        rates = DeviceRates(kind="cpu", matmul_gflops=(("float32", 50.0),), copy_gbs=10.0, fill_gbs=1.0,
                            run_overhead_s=0.2)
        svc._queue.workers[0].info = DeviceInfo(kind="cpu", name="test CPU", rates=(rates,))
        first = svc.submit(tiny(label="first", size=1024), session="a").poll()
        second = svc.submit(tiny(label="second", size=512), session="b").poll()
        assert first.run_estimate_s > second.run_estimate_s > 0
        assert first.estimate_s == pytest.approx(first.run_estimate_s)
        assert second.estimate_s == pytest.approx(first.run_estimate_s + second.run_estimate_s)
    finally:
        svc.shutdown()


def test_unpolled_queued_ticket_is_dropped(backend):
    svc = ProfileService(settings=backend, devices=["cpu"], abandon_after_s=0.05)
    try:
        gone = svc.submit(tiny(label="tab_closed"))
        time.sleep(0.2)  # nobody polls it
        kept = svc.submit(tiny(label="still_here"))
        status = gone.poll()
        assert status.state == "cancelled" and "nobody checked on it" in status.message
        assert kept.poll().queue_position == 1
    finally:
        svc.shutdown()


def test_result_wait_timeout_leaves_the_run_queued(backend):
    svc = ProfileService(settings=backend, devices=["cpu"])
    try:
        ticket = svc.submit(tiny())
        with pytest.raises(TimeoutError):
            ticket.result(timeout=0.05)
        assert ticket.poll().state == "queued"
    finally:
        svc.shutdown()
    assert ticket.poll().state == "cancelled"


def test_device_kinds_count_models_and_nodes_and_runs_go_to_the_kind_asked_for(backend):
    from lab.core.devices import DeviceInfo, describe_kinds, device_kinds
    from lab.run.queue import WorkerRecord

    # A cluster as the Ray backend would see it: 8 H200s over 2 nodes, 4 L4s on a third.
    placed = [("NVIDIA H200", f"box{i % 2}") for i in range(8)] + [("NVIDIA L4", "box2")] * 4
    kinds = device_kinds([(DeviceInfo(kind="cuda", name=name), node) for name, node in placed])
    expected = {}
    for name, node in placed:  # brute force: count and nodes per model
        expected.setdefault(name, set()).add(node)
    assert [(k.name, k.count, k.nodes) for k in kinds] == [
        (name, sum(n == name for n, _ in placed), len(nodes)) for name, nodes in expected.items()]
    assert describe_kinds(kinds) == "NVIDIA H200 ×8 on 2 nodes, NVIDIA L4 ×4"

    svc = ProfileService(settings=backend, devices=["cpu", "cpu"])  # never started
    try:
        workers = svc._queue.workers
        for worker, name in zip(workers, ("NVIDIA H200", "NVIDIA L4")):
            worker.info = DeviceInfo(kind="cuda", name=name)
        ticket = svc.submit(tiny(label="wants_l4"), device_name="NVIDIA L4")
        assert ticket.poll().device_name == "NVIDIA L4"
        assert [w.serves(ticket, workers) for w in workers] == [False, True]
        anyone = svc.submit(tiny(label="any"))
        assert all(w.serves(anyone, workers) for w in workers)
        with pytest.raises(ConfigError, match="no worker here has a NVIDIA A100; choose one of: NVIDIA H200, "
                                              "NVIDIA L4, or any"):
            svc.submit(tiny(label="wants_a100"), device_name="NVIDIA A100")
        assert isinstance(workers[0], WorkerRecord)
    finally:
        svc.shutdown()


def test_health_text_names_nodes_and_string_settings():
    from lab.run.protocol import ServiceHealth, WorkerHealth
    from ui.controls import health_text

    workers = tuple(WorkerHealth(index=i, device="cuda", state="idle", pid=None, alive=True, runs_served=i,
                                 restarts=0, device_info=None, node=f"box{i // 2}") for i in range(3))
    health = ServiceHealth(workers_alive=3, workers_total=3, workers=workers, queue_length=0, runs_served=3,
                           runs_failed=0, last_error=None, uptime_s=60.0, backend="ray")
    text = health_text(health, HostSettings(backend="ray", ray_address="head:6379"))
    assert "  worker 2 on cuda @ box1: idle, 2 runs, 0 restarts" in text
    assert "Ray actors per node and device:\n  box0: cuda ×2\n  box1: cuda ×1" in text
    assert "PROFILER_LAB_BACKEND=ray" in text and "PROFILER_LAB_RAY_ADDRESS=head:6379" in text
    assert "PROFILER_LAB_MAX_DIM=16384" in text


# ---------------------------------------------------------------- a warm two-worker service


def test_warm_service_reports_device_and_health(service):
    info = service.device_info()
    assert info is not None and info.kind == "cpu"
    health = service.health()
    assert (health.workers_alive, health.workers_total) == (2, 2)
    assert {w.state for w in health.workers} <= {"idle", "busy"}
    assert len({w.pid for w in health.workers}) == 2 and os.getpid() not in {w.pid for w in health.workers}


def test_eight_threads_get_their_own_results(service):
    configs = [tiny(label=f"step_{i}", size=8 + 4 * i) for i in range(8)]
    results: dict[int, object] = {}
    errors: list[BaseException] = []
    barrier = threading.Barrier(len(configs))

    def user(i: int) -> None:
        try:
            barrier.wait()
            results[i] = service.submit(configs[i]).result(timeout=RESULT_WAIT_S)
        except BaseException as error:  # noqa: BLE001 - reported below
            errors.append(error)

    threads = [threading.Thread(target=user, args=(i,)) for i in range(len(configs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors, errors
    for i, config in enumerate(configs):
        result = results[i]
        assert result.config == config
        # The trace holds this run's label and shapes only: no events leaked between runs.
        assert annotations_in_trace(result.trace_gz) == {config.step_label}
        assert mm_input_dims(result.trace_gz) == [[[config.m, config.k], [config.k, config.n]]]
        table = result.key_averages
        labels = set(table.loc[table["is_user_annotation"], "name"]) - {"ProfilerStep*"}
        assert labels == {config.step_label}
    # Both workers took part.
    assert all(w.runs_served > 0 for w in service.health().workers)


def test_config_error_comes_back_and_worker_keeps_serving(service):
    before = service.health().workers
    ticket = service.submit(tiny(dtype="float16"))
    with pytest.raises(RunFailed, match="float16 matmul on CPU runs a slow reference path") as caught:
        ticket.result(timeout=RESULT_WAIT_S)
    assert caught.value.kind == "config" and caught.value.error_type == "ConfigError"
    status = ticket.poll()
    assert status.state == "failed" and "choose bfloat16 or float32" in status.message
    # The worker that refused it is the same process, and it serves the next run.
    after = service.health().workers[status.worker]
    assert (after.pid, after.restarts) == (before[status.worker].pid, before[status.worker].restarts)
    assert service.submit(tiny(label="after_error")).result(timeout=RESULT_WAIT_S).config.step_label == "after_error"


def test_reuse_window_and_force_fresh(service):
    config = tiny(label="reuse_me", size=20)
    first_ticket = service.submit(config)
    first = first_ticket.result(timeout=RESULT_WAIT_S)
    assert not first_ticket.reused
    served = service.health().runs_served

    again = service.submit(config)
    assert again.reused and again.poll().state == "done"
    assert again.result(timeout=0) is first
    assert service.health().runs_served == served  # nothing ran

    fresh = service.submit(config, force_fresh=True)
    assert not fresh.reused
    fresh_result = fresh.result(timeout=RESULT_WAIT_S)
    assert fresh_result is not first and fresh_result.trace_gz != first.trace_gz
    assert service.health().runs_served == served + 1


def test_poll_reports_progress_until_done(service):
    ticket = service.submit(tiny(label="watched", size=64))
    states = set()
    while not ticket.done():
        states.add(ticket.poll().state)
        time.sleep(0.005)
    status = ticket.poll()
    assert status.state == "done" and status.device == "cpu" and status.worker in (0, 1)
    assert states <= {"queued", "running"}
    assert status.elapsed_s > 0 and status.estimate_s is None and status.queue_position is None


# ---------------------------------------------------------------- faults: crash and timeout


def wait_for_stage(ticket, stages: set[str]) -> None:
    deadline = time.monotonic() + RESULT_WAIT_S
    while ticket.poll().stage not in stages:
        assert not ticket.done(), ticket.poll()
        assert time.monotonic() < deadline, ticket.poll()
        time.sleep(0.01)


def wait_for_new_worker(service, old, deadline_s: float = RESULT_WAIT_S):
    deadline = time.monotonic() + deadline_s
    while True:
        now = service.health().workers[old.index]
        if now.pid not in (None, old.pid) and now.state in ("idle", "busy"):
            return now
        assert time.monotonic() < deadline, now
        time.sleep(0.05)


def test_killed_worker_fails_the_run_and_is_replaced(service):
    ticket = service.submit(BIG)
    wait_for_stage(ticket, {"allocating", "warming up", "profiling"})
    workers = service.health().workers
    busy = workers[ticket.poll().worker]
    idle = workers[1 - busy.index]
    assert idle.state == "idle"
    os.kill(busy.pid, signal.SIGKILL)
    with pytest.raises(RunFailed) as caught:
        ticket.result(timeout=RESULT_WAIT_S)
    assert caught.value.kind == "crash"
    message = str(caught.value)
    crashed = {"local": "the profiling worker crashed (exit code -9, SIGKILL)",
               "ray": f"the profiling worker crashed (its Ray actor on {busy.node} died)"}[service.settings.backend]
    assert crashed in message
    assert "4096x4096x4096" in message and "run again" in message
    # A worker that dies while idle is replaced too, without waiting for a run to find out.
    os.kill(idle.pid, signal.SIGKILL)

    for old in (busy, idle):
        assert wait_for_new_worker(service, old).restarts == old.restarts + 1
    after = service.submit(tiny(label="after_crash")).result(timeout=RESULT_WAIT_S)
    assert after.config.step_label == "after_crash"
    assert service.health().runs_failed >= 1


def test_run_over_the_time_limit_fails_and_the_next_succeeds(service):
    ticket = service.submit(BIG)
    wait_for_stage(ticket, {"allocating", "warming up", "profiling"})
    pid = service.health().workers[ticket.poll().worker].pid
    with pytest.raises(RunFailed, match="exceeded the host's limit of 3 s; the worker was restarted") as caught:
        ticket.result(timeout=RESULT_WAIT_S)
    assert caught.value.kind == "timeout"
    after = service.submit(tiny(label="after_timeout")).result(timeout=RESULT_WAIT_S)
    assert after.config.step_label == "after_timeout"
    # The worker that overran was killed and replaced.
    assert pid not in {w.pid for w in service.health().workers}


def test_workers_never_run_the_main_script(service, page_as_main):
    # Every worker of the pool, restarts included, started with the page as __main__. The fault
    # tests restart workers; if they have not run yet, idle workers are killed (and replaced) here.
    for old in service.health().workers:
        if sum(w.restarts for w in service.health().workers) >= 2:
            break
        os.kill(old.pid, signal.SIGKILL)
        wait_for_new_worker(service, old)
    if service.health().runs_served == 0:
        service.submit(tiny(label="before_the_check")).result(timeout=RESULT_WAIT_S)
    assert service.health().runs_served > 0
    assert sum(w.restarts for w in service.health().workers) >= 2
    assert not page_as_main.exists()


# ---------------------------------------------------------------- GPU: one worker per GPU, pinned


@pytest.mark.gpu
def test_one_worker_per_gpu_each_pinned_to_its_own():
    gpus = visible_gpu_ids()
    if not gpus:
        pytest.skip("no CUDA GPU visible")
    svc = ProfileService(settings=HostSettings())
    try:
        svc.start(wait=True)
        health = svc.health()
        assert health.workers_total == len(gpus) == health.workers_alive
        expected = [worker_pinning(f"cuda:{i}", gpus)[1] for i in range(len(gpus))]
        assert [w.device_info.index for w in health.workers] == expected
        assert all(w.device_info.kind == "cuda" for w in health.workers)

        configs = [RunConfig(m=2048, k=2048, n=2048, dtype="bfloat16", device="cuda", step_label=f"gpu_step_{i}")
                   for i in range(2 * len(gpus))]
        tickets = [svc.submit(c) for c in configs]
        results = [t.result(timeout=RESULT_WAIT_S) for t in tickets]
        for config, result, ticket in zip(configs, results, tickets):
            assert result.device.kind == "cuda"
            assert result.device.index == expected[ticket.poll().worker]
            events = json.loads(gzip.decompress(result.trace_gz))["traceEvents"]
            assert any(e.get("cat") == "kernel" for e in events)
            gpu_labels = {e["name"] for e in events if e.get("cat") == "gpu_user_annotation"
                          and not e["name"].startswith("ProfilerStep")}
            assert gpu_labels == {config.step_label}
        assert {t.poll().worker for t in tickets} == set(range(len(gpus)))
    finally:
        svc.shutdown()


def test_cpu_worker_leaves_one_core_to_the_server():
    from lab.run.service import cpu_worker_threads

    assert [cpu_worker_threads(n) for n in (None, 1, 2, 16)] == [1, 1, 1, 15]


# ---------------------------------------------------------------- the protocol, as data


def test_protocol_messages_are_frozen_dataclasses_and_states_read_as_strings():
    import dataclasses
    import pickle

    from lab.pool import Failure
    from lab.run.protocol import TICKET_STATES, FailureKind, TicketState, WorkerState
    from lab.run.worker import WORKER_CODE, _worker_entry

    message = Failure(ticket_id=1, kind=FailureKind.CONFIG, error_type="ConfigError", message="m", fatal=False)
    assert pickle.loads(pickle.dumps(message)) == message  # what crosses the pipe
    with pytest.raises(dataclasses.FrozenInstanceError):
        message.ticket_id = 2  # type: ignore[misc]
    assert TICKET_STATES == ("queued", "running", "done", "failed", "cancelled")
    assert TicketState.QUEUED == "queued" and f"{TicketState.DONE}" == "done"
    assert str(WorkerState.NOT_STARTED) == "not started" and {WorkerState.IDLE} <= {"idle", "busy"}
    assert RunFailed("x", kind="crash").kind is FailureKind.CRASH
    # Workers start as ``python -c WORKER_CODE``: its entry point must stay importable there.
    assert "from lab.run.worker import _worker_entry" in WORKER_CODE and callable(_worker_entry)


# ---------------------------------------------------------------- cancel: waiting and running

def wait_for_spare(svc, index: int = 0, deadline_s: float = RESULT_WAIT_S):
    """The worker's health once its warm spare is ready (started after the worker's own warm-up)."""
    deadline = time.monotonic() + deadline_s
    while (health := svc.health().workers[index]).standby != "ready":
        assert time.monotonic() < deadline, health
        time.sleep(0.05)
    return health


def test_cancel_a_running_run_hands_the_device_to_the_warm_spare():
    """Cancel on a one-worker pool: the waiting run leaves the queue; the running one's worker is
    killed and its spare, warmed up before the cancel, serves the next run: no new start-up."""
    svc = ProfileService(settings=HostSettings(run_timeout_s=RESULT_WAIT_S, max_run_estimate_s=0.0),
                         devices=["cpu"])
    try:
        svc.start(wait=True)
        before = wait_for_spare(svc)
        assert before.standby_pid not in (None, before.pid) and before.standby_rss_bytes > 0
        running = svc.submit(BIG, session="a")
        waiting = svc.submit(tiny(label="never_runs"), session="b")
        wait_for_stage(running, {"allocating", "warming up", "profiling"})
        assert waiting.poll().state == "queued"
        assert waiting.cancel()
        assert waiting.poll().state == "cancelled" and svc.health().queue_length == 0

        spare_pid = svc.health().workers[0].standby_pid  # warm (its Ready came) before the cancel
        assert running.cancel()
        with pytest.raises(RunFailed, match="cancelled") as caught:
            running.result(timeout=0)
        assert caught.value.kind == "cancelled"
        following = svc.submit(tiny(label="next"), session="c")
        deadline = time.monotonic() + RESULT_WAIT_S
        while following.poll().state == "queued":
            assert time.monotonic() < deadline, (following.poll(), svc.health())
            time.sleep(0.01)
        serving = svc.health().workers[0]
        # Served by the spare: the process that warmed up before the cancel, no fresh start.
        assert (following.poll().worker, serving.pid, serving.promotions) == (0, spare_pid, 1)
        assert serving.pid != before.pid and serving.restarts == before.restarts + 1
        assert following.result(timeout=RESULT_WAIT_S).config.step_label == "next"
        health = svc.health()
        assert health.runs_served == 1 and health.runs_failed == 0  # "never_runs" never ran
        # And a new spare is warmed up behind it.
        assert wait_for_spare(svc).standby_pid not in (before.pid, spare_pid)
    finally:
        svc.shutdown()


def test_no_spare_while_memory_is_short(monkeypatch):
    from lab.pool import standby as standby_module

    short = standby_module.STANDBY_MIN_AVAILABLE_BYTES - 1
    monkeypatch.setattr(standby_module, "available_memory_bytes", lambda: short)
    svc = ProfileService(settings=HostSettings(), devices=["cpu"])  # its worker never starts
    stop = threading.Event()
    worker = svc._queue.workers[0]
    worker.ever_ready = True  # as after the worker's first warm-up: a spare is wanted now
    thread = threading.Thread(target=standby_module.Standby(svc._queue, worker, stop).run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + 10
        while svc.health().workers[0].standby != "skipped: low memory":
            assert time.monotonic() < deadline, svc.health().workers[0]
            time.sleep(0.01)
        assert svc.health().workers[0].standby_pid is None  # nothing was started
        assert ProfileService(settings=HostSettings(standby=0), devices=["cpu"]).health().workers[0].standby == "off"
    finally:
        svc.shutdown()
        stop.set()
        thread.join(timeout=5)
    assert not thread.is_alive()


def test_withdraw_takes_a_waiting_run_out_and_leaves_a_running_one_alone(backend):
    """What the page does when its script is interrupted (a tab clicked mid-run): the waiting
    run leaves the queue, the running one keeps its worker (no restart) and still finishes."""
    svc = ProfileService(settings=on(backend, run_timeout_s=RESULT_WAIT_S, max_run_estimate_s=0.0, standby=0),
                         devices=["cpu"])
    try:
        svc.start(wait=True)
        # 1024³ × 3 steps: ~1 s of one CPU core, long enough to be caught running.
        running = svc.submit(tiny(label="keeps_running", size=1024, active=3), session="a")
        waiting = svc.submit(tiny(label="withdrawn"), session="b")
        wait_for_stage(running, {"allocating", "warming up", "profiling", "exporting", "timing", "summarizing"})
        pid = svc.health().workers[0].pid
        assert waiting.withdraw() and waiting.poll().state == "cancelled"
        assert not running.withdraw()  # running: withdraw does nothing
        assert running.result(timeout=RESULT_WAIT_S).config.step_label == "keeps_running"
        health = svc.health()
        assert health.workers[0].pid == pid and health.runs_served == 1
    finally:
        svc.shutdown()
