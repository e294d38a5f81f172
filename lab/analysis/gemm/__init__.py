"""GEMMs against the device's peak: what a GEMM is (``kinds``: the ops that run one, the kernels
that are one, the dtype a kernel's name states), their FLOPs, achieved TFLOP/s (TOPS for int8)
and efficiency (``analyze``). The findings about GEMMs are the judge's (``lab.judge.gemm_rules``).

Only the kinds are re-exported here: the trace-derived table (``lab.analysis.table.flops``)
reads torch's FLOP operands from them, and ``analyze`` imports the table's layer
(``lab.analysis.operators``), so a facade that imported ``analyze`` would close a circle. Take
``gemm_figures`` and the rest from ``lab.analysis`` or ``lab.analysis.gemm.analyze``.
"""

from lab.analysis.gemm.kinds import (
           GEMM_LEAF_OPS,
           GEMM_OP_KINDS,
           GEMM_OPS,
           gemm_kernel_dtype,
           gemm_kernel_library,
           gemm_shape,
           is_gemm_kernel,
)

__all__ = ["GEMM_LEAF_OPS", "GEMM_OPS", "GEMM_OP_KINDS", "gemm_kernel_dtype", "gemm_kernel_library", "gemm_shape",
           "is_gemm_kernel"]
