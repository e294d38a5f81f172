"""What a page holds of a trace its reader keeps (``lab.read.Outline``), in this process.

The outline is the ``Parsed`` without its event-level frames: ``TraceFacts`` instead of the
``Trace``, ``AnalysisTables`` instead of the ``Analysis``. Everything the page draws from it
must be what it drew from the whole ``Parsed``: the Summary's cards and verdict, the Trace tab's
categories, the Timeline's toggles; and each view query (``lab.views.queries``) run on the kept
trace gives what the view computed from the frames before.
"""

from __future__ import annotations

import dataclasses
import pickle
from pathlib import Path

import pandas as pd

import lab.views as lv
from lab.analysis import Analysis, AnalysisTables
from lab.core import HostSettings
from lab.read import Outline
from lab.read.here import outline, parse
from lab.trace import TraceFacts

DATA = Path(__file__).parent / "data"
TRANSFORMER = Path(__file__).parents[1] / "bench" / "data" / "transformer_step_h200.json.gz"


def test_an_outline_holds_no_event_frames_and_is_a_fraction_of_the_parsed_trace():
    parsed = parse(str(TRANSFORMER), settings=HostSettings())
    out = outline(parsed, "key:")
    assert isinstance(out, Outline) and out.key == "key:"
    assert type(out.trace) is TraceFacts and type(out.analysis) is AnalysisTables
    assert not hasattr(out.trace, "events") and not hasattr(out.analysis, "links")
    assert not hasattr(out.analysis, "trace")
    events = len(parsed.trace.events)
    for f in dataclasses.fields(out.analysis):  # no table with a row per event
        value = getattr(out.analysis, f.name)
        if isinstance(value, pd.DataFrame):
            assert len(value) < events, f.name
    whole, slim = len(pickle.dumps(parsed)), len(pickle.dumps(out))
    assert slim * 8 < whole, (slim, whole)  # 0.7 MB against 9.4 MB for this 51,787-event trace


def test_the_outline_says_what_the_trace_says():
    for path in (TRANSFORMER, DATA / "matmul_add_1024_fp32.json.gz"):
        parsed = parse(str(path), settings=HostSettings())
        facts, trace = outline(parsed, "k").trace, parsed.trace
        assert facts.event_count == len(trace.events) and facts.meta == trace.meta
        assert (facts.has_gpu, facts.has_memory) == (trace.has_gpu, trace.has_memory)
        assert facts.has_python == bool((trace.events["cat"] == "python_function").any())
        assert facts.profiler_lanes == tuple(str(x) for x in lv.profiler_lanes(trace.events))
        pd.testing.assert_frame_equal(facts.categories, lv.category_counts(trace))


def test_the_summary_drawn_from_the_outline_is_the_one_drawn_from_the_whole_trace():
    parsed = parse(str(TRANSFORMER), settings=HostSettings())
    out = outline(parsed, "k")
    whole = lv.summarize(parsed.trace, parsed.analysis, explanation=parsed.explanation, judgement=parsed.judgement)
    slim = lv.summarize(out.trace, out.analysis, explanation=out.explanation, judgement=out.judgement)
    assert slim == whole and any(m.label == "Events" and m.value == "51,787" for m in slim.metrics)


def test_the_tables_are_the_analysis_without_links_or_trace():
    parsed = parse(str(DATA / "matmul_add_1024_fp32.json.gz"), settings=HostSettings())
    analysis: Analysis = parsed.analysis
    tables = analysis.tables()
    assert {f.name for f in dataclasses.fields(analysis)} - {f.name for f in dataclasses.fields(tables)} == {
        "links", "trace"}
    for f in dataclasses.fields(tables):
        assert getattr(tables, f.name) is getattr(analysis, f.name), f.name


def test_a_timeline_query_is_the_timeline_the_view_drew_from_the_frames():
    parsed = parse(str(TRANSFORMER), settings=HostSettings())
    span = parsed.trace.meta.span_us
    asked = lv.timeline_window((parsed.trace,), (parsed.analysis,), (parsed.explanation,), start_us=span / 4,
                               end_us=span / 2, all_python=True)
    drawn = lv.build_timeline(parsed.trace, start_us=span / 4, end_us=span / 2, python_levels=None)
    pd.testing.assert_frame_equal(asked.marks, drawn.marks)
    assert (asked.shown_events, asked.total_events) == (drawn.shown_events, drawn.total_events)
