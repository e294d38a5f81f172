"""The service test suite (tests/test_service.py) against the Ray backend, on a real cluster.

A head and a second node, each started here with ``ray start --block`` as a process of its own
(``bench/ray_cluster.py``: CPU only, 2 logical CPUs, a 200 MB object store, no dashboard), make
one local cluster for the module; every test of ``test_service`` runs again with ``backend`` set to it: submit, queue
positions, stages, cancel, the time limit, a killed actor, queue-full, 8 threads at once. The
nodes are stopped after by their own processes (SIGTERM, then their process groups are killed),
never ``ray stop``, which would end every Ray process on the machine.

Why a second module and not a parametrised fixture: pytest-randomly shuffles the tests, and a
module-scoped parametrised pool would be torn down and warmed up again at every switch.
"""

from __future__ import annotations

import importlib.util
import os
import sys
import time
from pathlib import Path

import pytest
from test_service import *  # noqa: F403 - the suite, collected again here on Ray
from test_service import BIG, RESULT_WAIT_S, ProfileService, RunFailed, tiny, wait_for_stage

from lab.core.settings import HostSettings

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "bench"))
from ray_cluster import local_cluster  # noqa: E402

pytestmark = [pytest.mark.pool, pytest.mark.ray]

if importlib.util.find_spec("ray") is None:
    if os.environ.get("CI"):
        raise RuntimeError("CI must run the Ray half: .ci/run installs requirements-ray.txt")
    pytest.skip("ray is not installed (pip install -r requirements-ray.txt); the Ray half of the "
                "service tests is skipped outside CI", allow_module_level=True)

# The local backend's own tests, not the service contract: GPU pinning by CUDA_VISIBLE_DEVICES;
# and workers never re-running the page as __main__ (multiprocessing spawn's trap): an actor is a
# process of its node's raylet, never started from this interpreter (and the test costs ~20 s of
# actor kills and warm-ups here).
del test_one_worker_per_gpu_each_pinned_to_its_own  # noqa: F821
del test_workers_never_run_the_main_script  # noqa: F821
# The local backend's warm spare (lab.pool.standby): an actor has none; the Ray cancel test is below.
del test_cancel_a_running_run_hands_the_device_to_the_warm_spare  # noqa: F821
del test_no_spare_while_memory_is_short  # noqa: F821


@pytest.fixture(scope="module")
def ray_cluster():
    """A head and a second node, each ``ray start --block`` in its own process, 2 logical CPUs
    each (the shared pool's two actors, one test's own one-actor service, and room while a
    killed actor's CPU is handed back); yields the head's address; stops both after.

    Module-scoped, not session-scoped: only this module uses it, and pytest-randomly keeps a
    module's tests together, so the cluster (~1 GB of Ray processes) is gone for the rest of CI."""
    with local_cluster(nodes=2, cpus_per_node=2) as address:
        yield address


@pytest.fixture(scope="module")
def backend(ray_cluster) -> HostSettings:
    return HostSettings(backend="ray", ray_address=ray_cluster)


# ---------------------------------------------------------------- Ray only: nodes and kinds


def test_actors_spread_over_both_nodes_and_each_run_names_its_node(service):
    health = service.health()
    assert health.backend == "ray"
    nodes = {w.node for w in health.workers}
    assert len(nodes) == 2 and None not in nodes, health  # SPREAD: one actor per node
    configs = [tiny(label=f"where_{i}", size=24 + i) for i in range(4)]
    tickets = [service.submit(c) for c in configs]
    for ticket in tickets:
        result = ticket.result(timeout=RESULT_WAIT_S)
        status = ticket.poll()
        # The result says where it ran: the node of the actor that the ticket ran on.
        assert result.device.node == status.node == health.workers[status.worker].node
        assert result.device.node in result.device.label
    kinds = service.device_kinds()
    assert len(kinds) == 1 and kinds[0].count == 2 and kinds[0].nodes == 2 and kinds[0].kind == "cpu"
    assert kinds[0].text == f"{kinds[0].name} ×2 on 2 nodes"


def test_a_run_asks_for_a_device_kind(service):
    name = service.device_kinds()[0].name
    ticket = service.submit(tiny(label="this_kind"), device_name=name)
    assert ticket.result(timeout=RESULT_WAIT_S).device.name == name
    assert ticket.poll().device_name == name
    from lab.core.config import ConfigError

    with pytest.raises(ConfigError, match="no worker here has a NVIDIA L4; choose one of: .*, or any"):
        service.submit(tiny(label="no_such_kind"), device_name="NVIDIA L4")


def test_cancel_a_waiting_run_and_a_running_one_frees_the_only_actor(backend):
    """Cancel on a one-actor pool: the waiting run leaves the queue; the running one's actor is
    killed (within a tick) and a fresh one, warmed up, serves the next run."""
    svc = ProfileService(settings=backend.replace(run_timeout_s=RESULT_WAIT_S, max_run_estimate_s=0.0),
                         devices=["cpu"])
    try:
        svc.start(wait=True)
        running = svc.submit(BIG, session="a")
        waiting = svc.submit(tiny(label="never_runs"), session="b")
        wait_for_stage(running, {"allocating", "warming up", "profiling"})
        assert waiting.poll().state == "queued"
        assert waiting.cancel()
        assert waiting.poll().state == "cancelled" and svc.health().queue_length == 0

        old = svc.health().workers[0]
        cancelled_at = time.monotonic()
        assert running.cancel()
        with pytest.raises(RunFailed, match="cancelled") as caught:
            running.result(timeout=0)
        assert caught.value.kind == "cancelled"
        following = svc.submit(tiny(label="next"), session="c")
        while svc.health().workers[0].pid == old.pid:  # killed at the supervisor's next tick
            assert time.monotonic() - cancelled_at < 2.0, svc.health().workers[0]
            time.sleep(0.01)
        assert following.result(timeout=RESULT_WAIT_S).config.step_label == "next"
        health = svc.health()
        assert health.workers[0].restarts == old.restarts + 1 and health.workers[0].pid != old.pid
        assert health.runs_served == 1 and health.runs_failed == 0  # "never_runs" never ran
    finally:
        svc.shutdown()
