"""Each figure a lesson quotes is the figure of the view it names (``Where.view``), computed by that
view's own code: the Summary cards' per-iteration time and speed-up, the Table's Self CPU %, the room
roofline's region (``lab.analysis.gemm.bound``, the one classifier), and a CPU run's explanation says
which of its figures are the H200 recording's. Both sides are computed here, none pinned."""

from __future__ import annotations

import pytest
from lessonruns import h200_runs

from lab import views as lv
from lab.analysis import figures as fig
from lab.core.devices import lookup_peak
from lab.lessons import GPU, LESSONS, RECORDING_LEAD, explanation_for
from lab.samples import lesson_samples
from lab.teach.roofline import Roofline, RunSummary, classify, peak_roofline, roofline_data, run_summary
from lab.units import fmt_us

RECORDED = [k for k, lesson in LESSONS.items() if not lesson.host_only and lesson_samples(lesson.runs)]
CPU_LESSONS = [k for k, lesson in LESSONS.items() if not lesson.needs_gpu]


def _card(run, timing: dict | None, title: str) -> str:
    summary = lv.summarize(run.trace, run.analysis, timing=timing)
    return next(m.value for m in summary.metrics if m.label == title)


def _timings(key: str) -> list[dict | None]:
    return [s.timing for s in lesson_samples(LESSONS[key].runs)]


@pytest.mark.parametrize("key", RECORDED)
def test_a_lessons_step_time_is_the_summary_card(key):
    """"Per iteration, profiled": the card of each recording is the figure the lesson quotes."""
    for run, timing in zip(h200_runs(key), _timings(key), strict=True):
        assert _card(run, timing, "Per iteration, profiled") == fmt_us(fig.profiled_step_us(run)), run.name


@pytest.mark.parametrize("key", RECORDED)
def test_a_speedup_the_reveal_quotes_is_the_cards(key):
    """A question answered in the Summary view states both cards' times and their ratio."""
    runs, timings = h200_runs(key), _timings(key)
    asked = [q for q in LESSONS[key].questions if GPU in q.devices]
    for q in asked:
        answer = q.answer(runs)
        if answer.where.view != "Summary":
            continue
        cards = [_card(r, t, "Per iteration, profiled") for r, t in zip(runs, timings, strict=True)]
        assert all(c in answer.measured_text for c in cards), (q.key, cards, answer.measured_text)
        per_iter = [float(t["profiled_median_us"]) if t else fig.step_us(r) for r, t in zip(runs, timings, strict=True)]
        assert answer.measured == pytest.approx(per_iter[0] / per_iter[1]), q.key


def test_the_cuda_graphs_speedup_is_the_cards_whatever_the_trace_steps_say():
    """The trace's own steps (838 vs 271 µs) and the cards' CUDA-event medians differ: the lesson
    reads the cards', which the page shows."""
    q = next(q for q in LESSONS["cuda_graphs"].questions if q.key == "cuda_graphs.speedup")
    eager, graphed = h200_runs("cuda_graphs")
    cards = eager.timing[0] / graphed.timing[0]
    assert q.answer((eager, graphed)).measured == pytest.approx(cards)
    assert abs(fig.step_us(eager) / fig.step_us(graphed) - cards) > 0.5  # why it matters


@pytest.mark.parametrize("key", RECORDED)
def test_a_table_row_a_reveal_names_is_in_the_table(key):
    runs = h200_runs(key)
    for q in (q for q in LESSONS[key].questions if GPU in q.devices):
        where = q.answer(runs).where
        if where.row and not where.view:
            run = runs[where.run]
            table = lv.trace_table(run.analysis.key_averages, profile_memory=run.trace.has_memory)
            assert where.row in set(table["name"].astype(str)), (q.key, where.row)


@pytest.mark.subprocess
def test_the_tiny_cpu_runs_gemm_share_is_the_tables_self_cpu_pct(cpu_lesson_runs):
    """The reveal's aten::mm share and the lesson check read the Table's Self CPU % of that row."""
    runs = cpu_lesson_runs("tiny_vs_large")[0]
    tiny = runs[0]
    table = lv.key_averages_view(lv.trace_table(tiny.analysis.key_averages, profile_memory=False),
                                 sort_by="Self CPU", row_limit=-1, show_annotations=True)
    shown = float(table.loc[table["name"] == "aten::mm", "self_cpu_pct"].sum())
    q = next(q for q in LESSONS["tiny_vs_large"].questions if q.key == "tiny_vs_large.gemm_share")
    answer = q.answer(runs)
    assert answer.measured == pytest.approx(shown)
    assert answer.where.row == "aten::mm"
    signal = next(s for s in LESSONS["tiny_vs_large"].check(list(runs)) if s.title.startswith("tiny"))
    assert f"{shown:.1f}" in signal.evidence or f"{shown:.0f}" in signal.evidence


H200 = lookup_peak("NVIDIA H200")


@pytest.mark.parametrize("key", RECORDED)
def test_the_room_colours_a_recorded_run_as_the_gemm_table_bounds_it(key):
    for lesson_run, run in zip(LESSONS[key].runs, h200_runs(key), strict=True):
        typical = run.analysis.gemm_typical
        if typical is None or lesson_run.gpu.workload != "matmul_add":
            continue
        point = run_summary(lesson_run.gpu, run.analysis, "H200")
        roof = peak_roofline(H200, lesson_run.gpu.dtype)
        assert point is not None and roof is not None
        region = roofline_data(roof, [point])["points"]["region"].iloc[0]
        assert region == typical["bound"], (key, run.name, region, typical["bound"])


def test_a_points_region_is_its_own_whoever_else_ran():
    """A roof measured under a run (a busy host's warm-up) is raised to be drawn; a run's region is
    still classified against the device's roof, alone or in a crowd."""
    measured = Roofline(device="cpu", dtype="float32", peak_tflops=0.02, bandwidth_gbs=19.0, source="measured")
    small = RunSummary(workload="matmul_add", m=64, k=64, n=64, dtype="float32", device="cpu", tflops=0.05,
                       intensity_flops_per_byte=0.5)
    big = RunSummary(workload="matmul_add", m=1024, k=1024, n=1024, dtype="float32", device="cpu", tflops=1.0,
                     intensity_flops_per_byte=100.0)
    alone = roofline_data(measured, [small])["points"]["region"].iloc[0]
    crowd = roofline_data(measured, [small, big])["points"]["region"].iloc[0]
    assert alone == crowd == classify(small, measured)


@pytest.mark.parametrize("key", CPU_LESSONS)
def test_a_cpu_runs_explanation_says_its_h200_figures_are_the_recordings(key):
    lesson = LESSONS[key]
    quotes = [c.says for c in lesson.claims if c.device == GPU and c.says in lesson.explain]
    shown = explanation_for(key, recorded=False)
    if quotes and not lesson.host_only:
        assert shown.startswith(RECORDING_LEAD), key
    assert explanation_for(key, recorded=True) == lesson.explain


# A per-iteration figure of an explanation, and the Summary card that shows it on a timed run.
STEP_CARDS = {"profiled_step_us": "Per iteration, profiled", "unprofiled_step_us": "Per iteration, no profiler",
              "step_us": "Per iteration, profiled"}


def _step_claims():
    """(lesson key, claim) of each H200 claim that quotes a time per iteration, or a ratio of two."""
    for key in RECORDED:
        for claim in LESSONS[key].claims:
            if claim.figure in STEP_CARDS and claim.device == GPU:
                yield key, claim


@pytest.mark.parametrize("item", list(_step_claims()), ids=lambda item: f"{item[0]}:{item[1].says[:30]}")
def test_a_step_time_an_explanation_quotes_is_a_summary_card(item):
    """Each run a step-time claim reads (both runs of a ratio) shows that figure on its Summary card:
    a timed recording's card is its CUDA-event median, so an explanation that read the trace's steps
    (``step_us``: the loop lesson's "about 40 times as long", 54.8× on its cards) fails here."""
    key, claim = item
    by_name = {}
    for ref in filter(None, (claim.run, claim.over)):
        other, _, name = ref.rpartition(":")
        lesson_key = other or key
        runs, timings = h200_runs(lesson_key), _timings(lesson_key)
        by_name[ref] = next((r, t) for r, t in zip(runs, timings, strict=True) if r.name == name)
    for ref, (run, timing) in by_name.items():
        value = fig.FIGURES[claim.figure](run, *claim.args)
        assert _card(run, timing, STEP_CARDS[claim.figure]) == fmt_us(value), (key, claim.says, ref)
