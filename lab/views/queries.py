"""What the page's views ask the reader that keeps a trace: each a function of the traces it
keeps (``lab.read.JobKind.VIEW``: ``code(traces, analyses, explanations, **args)``), answered
there, so the event-level frames never reach the server — only the window's marks.

The page holds a trace's ``lab.read.Outline`` (its facts, tables, explanation and verdict) and
draws everything else from these: the Timeline's window (``timeline_window``; compare's two
timelines and a lesson's reveal are windows too), the Memory chart's (``memory_window``), the
Table's replayable ops with the run each would start (``replay_options``), a replay beside the
row it replays (``replay_beside``), and the ranks' stacked timeline (``ranks_window``). Their
arguments are plain hashable values: the page keeps each answer by the job that asked.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pandas as pd

from lab.analysis import Analysis
from lab.core.config import ConfigError, RunConfig
from lab.explain import Explanation
from lab.trace import Trace
from lab.views.memory import MemoryView, build_memory_view
from lab.views.ranks import stacked_timeline
from lab.views.replay import ReplayChoice, replay_choices, replay_comparison, replay_config
from lab.views.timeline import DEFAULT_MAX_MARKS, DEFAULT_PYTHON_LEVELS, DEFAULT_WIDTH_PX, TimelineData, build_timeline

__all__ = ["ReplayOption", "memory_window", "ranks_window", "replay_beside", "replay_options", "timeline_window"]


@dataclass(frozen=True)
class ReplayOption:
    """One replayable op of a trace and the run that replays it, or why it cannot be built."""

    choice: ReplayChoice
    config: RunConfig | None
    refusal: str | None = None


def _one(traces: Sequence[Trace]) -> Trace:
    (trace,) = traces
    return trace


def timeline_window(traces: Sequence[Trace], analyses: Sequence[Analysis], explanations: Sequence[Explanation | None],
                    *, start_us: float, end_us: float, max_marks: int = DEFAULT_MAX_MARKS,
                    width_px: int = DEFAULT_WIDTH_PX, all_python: bool = False,
                    profiler_lanes: bool = False) -> TimelineData:
    """The Timeline's marks of the one trace in ``start_us``..``end_us`` (``build_timeline``)."""
    return build_timeline(_one(traces), start_us=start_us, end_us=end_us, max_marks=max_marks, width_px=width_px,
                          python_levels=None if all_python else DEFAULT_PYTHON_LEVELS,
                          show_profiler_lanes=profiler_lanes)


def memory_window(traces: Sequence[Trace], analyses: Sequence[Analysis], explanations: Sequence[Explanation | None],
                  *, start_us: float, end_us: float) -> MemoryView | None:
    """The Memory chart's data of the one trace in ``start_us``..``end_us`` (``build_memory_view``)."""
    (analysis,) = analyses
    return build_memory_view(_one(traces), analysis.memory, start_us=start_us, end_us=end_us)


def replay_options(traces: Sequence[Trace], analyses: Sequence[Analysis], explanations: Sequence[Explanation | None],
                   *, source: str) -> tuple[ReplayOption, ...]:
    """The one trace's replayable ops by total time, each with the run "Replay here" starts."""
    trace, (explanation,) = _one(traces), explanations
    out = []
    for choice in replay_choices(trace):
        try:
            config = replay_config(trace, choice.hot, explanation, source=source, device="auto")
            out.append(ReplayOption(choice, config))
        except (ConfigError, ValueError) as exc:  # a row the lab cannot rebuild after all: said on the page
            out.append(ReplayOption(choice, None, str(exc)))
    return tuple(out)


def replay_beside(traces: Sequence[Trace], analyses: Sequence[Analysis], explanations: Sequence[Explanation | None],
                  *, config: RunConfig, device_name: str) -> tuple[str, pd.DataFrame, tuple[str, ...]]:
    """A replay run's figures beside the row it replays (``replay_comparison`` of its own trace)."""
    (explanation,) = explanations
    title, frame, notes = replay_comparison(config, _one(traces), explanation, device_name=device_name)
    return title, frame, tuple(notes)


def ranks_window(traces: Sequence[Trace], analyses: Sequence[Analysis], explanations: Sequence[Explanation | None],
                 *, rank_ids: tuple[int, ...], offsets_us: tuple[float, ...], start_us: float,
                 end_us: float) -> TimelineData:
    """The ranks' stacked timeline (one trace per rank, on the job's clock) in the window."""
    return stacked_timeline(traces, rank_ids, offsets_us, start_us=start_us, end_us=end_us)
