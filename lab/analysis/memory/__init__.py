"""profile_memory's records: allocations over time per device, the peak, out-of-memory events
(``analyze``), and the rules over them (``insights``: growth, fragmentation, churn, the peak's owner).
"""

from lab.analysis.memory.analyze import MemoryAnalysis, memory_analysis, memory_series, out_of_memory_events
from lab.analysis.memory.insights import MEMORY_RULES

__all__ = ["MEMORY_RULES", "MemoryAnalysis", "memory_analysis", "memory_series", "out_of_memory_events"]
