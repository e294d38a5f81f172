"""GEMMs against the device's peak: which kernels are GEMMs, their FLOPs, achieved TFLOP/s and
efficiency (``analyze``).
"""

from lab.analysis.gemm.analyze import GEMM_COLUMNS, GemmFigures, device_name, gemm_efficiency, gemm_figures, peak_for

__all__ = ["GEMM_COLUMNS", "GemmFigures", "device_name", "gemm_efficiency", "gemm_figures", "peak_for"]
