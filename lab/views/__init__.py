"""Stage 4 of the pipeline: what the page and the CLI show, as plain data (and Altair specs):
the summary cards, the key_averages tables, the timeline, the memory chart, the JSON/text report,
and the TensorBoard plugin's step-time, kernel and module views (``tensorboard``). What the page
asks the reader that keeps a trace, so its frames stay there, is ``queries``.

Nothing here imports streamlit; ``ui/`` lays these out.
"""

from lab.trace.facts import category_counts
from lab.units import fmt_us
from lab.views.explained import (
    attribution_chart,
    attribution_frame,
    default_table_sort,
    explanation_dict,
    explanation_text,
    roof_table,
    saving_words,
)
from lab.views.memory import (
    NO_MEMORY,
    build_memory_view,
    device_table,
    memory_chart,
    memory_findings,
    memory_ops,
    memory_rows,
    step_table,
)
from lab.views.perfetto import PERFETTO_HEIGHT_PX, PERFETTO_INLINE_MAX_BYTES, perfetto_button_html
from lab.views.queries import ReplayOption, memory_window, ranks_window, replay_beside, replay_options, timeline_window
from lab.views.ranks import build_ranks_timeline, ranks_span_us
from lab.views.ranks_heatmap import MAX_STACKED_RANKS, default_picks, heatmap_chart, heatmap_frame, picked
from lab.views.ranks_tables import collective_table, job_summary, rank_causes_table, rank_table
from lab.views.replay import (
    VARIANTS,
    ReplayChoice,
    is_replay,
    replay_choices,
    replay_comparison,
    replay_config,
    replay_title,
    variant_config,
    variant_of,
)
from lab.views.roofline import (
    REVEAL_WIDTH_PX,
    answers_chart,
    answers_frame,
    reveal_chart,
    reveal_timeline,
    roofline_chart,
    title_lines,
)
from lab.views.summary import comparison_totals, summarize
from lab.views.tables import (
    format_key_averages,
    kernel_table,
    key_averages_view,
    limit_text_table,
    to_csv_bytes,
    trace_table,
)
from lab.views.tensorboard import (
    kernel_by_name_table,
    kernel_by_op_table,
    kernel_note,
    module_table,
    step_time_chart,
    step_time_note,
    step_time_table,
)
from lab.views.timeline import DEFAULT_PYTHON_LEVELS, PROFILER_LANE_NOTE, build_timeline, timeline_chart
from lab.views.timeline_rows import profiler_lanes
from lab.views.torch_table import TORCH_SORT_COLUMNS, profiled_device, torch_sorted, torch_table_text
from lab.vocab import SORT_KEYS, TORCH_SORT_KEYS, is_device_sort

__all__ = [
    "VARIANTS", "ReplayChoice", "is_replay", "replay_choices", "replay_comparison", "replay_config", "replay_title",
    "variant_config", "variant_of",
    "NO_MEMORY", "build_memory_view", "device_table", "memory_chart", "memory_findings", "memory_ops", "memory_rows",
    "step_table",
    "PERFETTO_HEIGHT_PX", "PERFETTO_INLINE_MAX_BYTES", "perfetto_button_html",
    "DEFAULT_PYTHON_LEVELS", "PROFILER_LANE_NOTE", "profiler_lanes",
    "REVEAL_WIDTH_PX", "answers_chart", "answers_frame", "reveal_chart", "reveal_timeline", "roofline_chart",
    "title_lines",
    "ReplayOption", "memory_window", "ranks_window", "replay_beside", "replay_options", "timeline_window",
    "SORT_KEYS", "TORCH_SORT_COLUMNS", "TORCH_SORT_KEYS", "build_timeline", "category_counts", "comparison_totals",
    "fmt_us", "format_key_averages", "is_device_sort", "kernel_table", "key_averages_view", "limit_text_table",
    "profiled_device", "trace_table", "summarize", "timeline_chart", "to_csv_bytes", "torch_sorted", "torch_table_text",
    "rank_causes_table", "build_ranks_timeline", "collective_table", "job_summary", "rank_table", "ranks_span_us",
    "MAX_STACKED_RANKS", "default_picks", "heatmap_chart", "heatmap_frame", "picked",
    "kernel_by_name_table", "kernel_by_op_table", "kernel_note", "module_table", "step_time_chart", "step_time_note",
    "step_time_table",
    "attribution_chart", "attribution_frame", "default_table_sort", "explanation_dict", "explanation_text",
    "roof_table", "saving_words",
]  # fmt: skip
