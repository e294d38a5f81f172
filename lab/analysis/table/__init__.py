"""torch's ``key_averages()`` table, derived from a Chrome trace with torch's own rules.

``key_averages`` builds the rows (``trace_key_averages``; columns ``lab.core.KEY_AVERAGES_COLUMNS``),
``flops`` gives an operator's FLOPs as torch's ``with_flops`` counts them, ``memory`` its
allocations as ``profile_memory`` attributes them, ``shares`` the table's CPU % columns, ``tree``
each thread's parent events as torch's ``EventList`` finds them.
"""

from lab.analysis.table.flops import op_flops_of
from lab.analysis.table.key_averages import trace_key_averages
from lab.analysis.table.memory import MEMORY_COLUMNS, EventMemory, event_memory
from lab.analysis.table.shares import cpu_shares_pct, share_pct

__all__ = ["MEMORY_COLUMNS", "EventMemory", "cpu_shares_pct", "event_memory", "op_flops_of", "share_pct",
           "trace_key_averages"]
