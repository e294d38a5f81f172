"""profile_memory's records: allocations over time per device, the peak, out-of-memory events
(``analyze``). The findings over them (growth, fragmentation, churn, the peak's owner, a refused
allocation) are the judge's: ``lab.judge.memory_rules``.
"""

from lab.analysis.memory.analyze import MemoryAnalysis, memory_analysis, memory_series, out_of_memory_events

__all__ = ["MemoryAnalysis", "memory_analysis", "memory_series", "out_of_memory_events"]
