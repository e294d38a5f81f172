"""Each lesson preset runs on CPU (or says plainly why not) and its signal shows in the trace.

The runs go through the real engine (``run_profile``) and the real trace pipeline; the
signals are read from the exported traces, as the page does. GPU traces of the same lessons
(recorded on an H200, bundled in ``lab/samples/``) are checked in ``test_samples.py``.
"""

from __future__ import annotations

import statistics

import pytest
from lessonruns import cpu_lesson_param

from lab.analysis.figures import label_first_gaps_us, work_per_step
from lab.core.config import ConfigError
from lab.lessons import LESSONS, lesson_configs, lesson_signals

CPU_LESSONS = [k for k, lesson in LESSONS.items() if lesson.cpu_refusal is None]


@pytest.fixture(scope="module")
def lesson_runs(cpu_lesson_runs):
    """The lessons' CPU runs (conftest's ``cpu_lesson_runs``: each made once a session, with the
    intra-op threads the page's CPU worker uses), as ``Run``s."""
    return lambda key: cpu_lesson_runs(key)[0]


@pytest.mark.parametrize("key", [cpu_lesson_param(k) for k in CPU_LESSONS])
def test_every_cpu_lesson_shows_its_signal(key, lesson_runs):
    signals = lesson_signals(key, lesson_runs(key))
    assert signals, f"no detector for {key}"
    missing = [f"{s.title}: {s.evidence}" for s in signals if s.expected and not s.present]
    assert not missing, f"{key}: signals absent on CPU: {missing}"


def test_tf32_lesson_refuses_on_cpu_with_the_reason():
    with pytest.raises(ConfigError, match="tensor-core"):
        lesson_configs(LESSONS["fp32_vs_tf32"], "cpu")


def test_cold_vs_warm_on_cpu_is_measured_and_marked_as_a_gpu_lesson(lesson_runs):
    # The first-step costs are GPU costs; on the H200 recording the cold run's first step is
    # checked to start later (test_samples.py). On a CPU the gaps are measured and reported,
    # and the signal says plainly that little difference is expected there.
    cold, warm = lesson_runs("cold_vs_warm")
    cold_gaps, warm_gaps = label_first_gaps_us(cold.trace), label_first_gaps_us(warm.trace)
    assert len(cold_gaps) == len(warm_gaps) == 5  # active=5 recorded steps each
    assert all(gap > 0 for gap in cold_gaps + warm_gaps)
    (signal,) = lesson_signals("cold_vs_warm", [cold, warm])
    assert not signal.expected and "H200 recording" in signal.evidence
    # The signal compares each run's first step with its later steps (steps' CPU time, not the
    # label gaps): computed here from the steps by hand.
    def ratio(run):
        cpu = list(run.analysis.steps["cpu_us"])
        return cpu[0] / statistics.median(cpu[1:])

    assert signal.present == (ratio(cold) > ratio(warm))


def test_compiled_matmul_add_has_addmm_and_no_add(lesson_runs):
    eager, compiled = lesson_runs("eager_vs_compile")
    eager_ops = set(eager.trace.events["name"].astype(str))
    compiled_ops = set(compiled.trace.events["name"].astype(str))
    assert {"aten::mm", "aten::add"} <= eager_ops
    assert "aten::addmm" in compiled_ops and "aten::add" not in compiled_ops


def test_linear_shows_transpose_without_compute(lesson_runs):
    (run,) = lesson_runs("linear")
    ops = run.analysis.operators
    t = ops[ops["name"].astype(str) == "aten::t"]
    assert len(t) == 1 and int(t["count"].iloc[0]) == 3  # one per active step
    mm = ops[ops["name"].astype(str) == "aten::addmm"]
    # The transpose is a view: its self time is a small fraction of the GEMM's.
    assert float(t["total_us"].iloc[0]) < 0.5 * float(mm["total_us"].iloc[0])


def test_attention_sdpa_runs_fewer_ops_than_written_out(lesson_runs):
    naive, sdpa = lesson_runs("attention")
    assert work_per_step(sdpa)[0] < work_per_step(naive)[0]
    assert "aten::scaled_dot_product_attention" in set(sdpa.trace.events["name"].astype(str))
    assert "aten::softmax" in set(naive.trace.events["name"].astype(str))
