"""One process pool for the lab's children: profile workers (``lab.run``) and trace readers
(``lab.read``) are its two clients.

A child is a fresh interpreter with its limits (``spawn``: not multiprocessing, which re-runs
the Streamlit page in the child); ``supervisor`` keeps one alive per record (start, ready,
serve, time out, kill on cancel, replace, back off); ``standby`` keeps a warm spare beside it
for the clients that want one; ``queue`` holds the tickets (lanes, per-session fair turns,
cancel, abandoned tickets) and the counters; ``protocol`` the states and the one set of
message records; ``frames`` large objects as pickle-5 frames; ``child`` the child's end of the
pipe; ``pool`` the lifecycle. A client (``client.PoolClient``) says what its children run, their
limits and its words. Nothing here imports another package of the lab, torch or pandas.

Why by hand: pebble's ``ProcessPool`` (5.2) and loky were looked at first. Both start children
through multiprocessing contexts (spawn re-imports ``__main__``, the Streamlit page: each worker
started its own service; fork copies a threaded server), and neither sets a child's environment
before its interpreter starts (``CUDA_VISIBLE_DEVICES`` for GPU pinning), sends messages while a
task runs (a run's stages, a read's progress), passes results as pickle-5 frames (a 509 MB-JSON
trace's result is 236 MB: one pickle would add a copy on each side), keeps a queue that is not
FIFO (per-session fair turns, lanes so a small read never waits behind a large one), or keeps
warm spares (torch's import and CUPTI's start-up are 10–30 s). One restart back-off cap, 30 s:
each retry costs an interpreter start, ~2 s of a core.
"""

from lab.pool.child import ChildPipe, child_entry
from lab.pool.client import PoolClient
from lab.pool.frames import pack, receive_object
from lab.pool.pool import ChildPool
from lab.pool.protocol import (
    ChildState,
    Done,
    Failure,
    Name,
    PoolFailed,
    Progress,
    Ready,
    StandbyState,
    Stop,
    Task,
    TicketState,
)
from lab.pool.queue import ABANDONED_TICKET_S, DEFAULT_LANE, ChildRecord, LaneRule, PoolQueue, Ticket
from lab.pool.spawn import REAP_S, SHUTDOWN_GRACE_S, exit_text, kill_child, start_child, stop_child
from lab.pool.standby import Standby, available_memory_bytes, resident_bytes
from lab.pool.supervisor import TICK_S, Supervisor, await_ready

__all__ = [
    "ABANDONED_TICKET_S", "DEFAULT_LANE", "REAP_S", "SHUTDOWN_GRACE_S", "TICK_S", "ChildPipe", "ChildPool",
    "ChildRecord", "ChildState", "Done", "Failure", "LaneRule", "Name", "PoolClient", "PoolFailed", "PoolQueue",
    "Progress", "Ready", "StandbyState", "Standby", "Stop", "Supervisor", "Task", "Ticket", "TicketState",
    "available_memory_bytes", "await_ready", "child_entry", "exit_text", "kill_child", "pack", "receive_object",
    "resident_bytes", "start_child", "stop_child",
]  # fmt: skip
