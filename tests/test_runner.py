"""Real CPU profile runs: artifacts, options, timing, refusals, failures. Small sizes only."""

from __future__ import annotations

import gzip
import json

import pytest
import torch
from conftest import read_trace

from lab.core import workloads
from lab.core.config import ConfigError, RunConfig
from lab.core.devices import PEAKS, detect_device, lookup_peak
from lab.core.result import KEY_AVERAGES_COLUMNS, RunError
from lab.core.settings import HostSettings
from lab.run.runner import (
    STAGES,
    TABLE_SORT_KEYS,
    UNPROFILED_BUDGET_S,
    UNPROFILED_MAX_ITERS,
    run_profile,
    unprofiled_iterations,
)

CPU_STAGES = ["checking", "allocating", "warming up", "profiling", "exporting", "timing", "summarizing"]
CPU_TABLE_KEYS = {"cpu_time_total", "self_cpu_time_total", "count", "cpu_memory_usage",
                  "self_cpu_memory_usage", "flops"}


def _events(trace: dict, *, cat: str | None = None, name: str | None = None) -> list[dict]:
    return [e for e in trace["traceEvents"]
            if (cat is None or e.get("cat") == cat) and (name is None or e.get("name") == name)]


def _row(frame, name: str):
    rows = frame[frame["name"] == name]
    assert len(rows) == 1, f"expected one {name!r} row, got {len(rows)}: {list(frame['name'])}"
    return rows.iloc[0]


def _run(config: RunConfig, stages: list[str] | None = None):
    return run_profile(config, settings=HostSettings(), on_stage=None if stages is None else stages.append)


def _register(monkeypatch, name: str, build) -> None:
    """A real extra workload in the registry, for this test only (RunConfig checks the name)."""
    workload = workloads.Workload(name=name, title=name, formula="test", build=build,
                                  estimate_bytes=lambda c: 0, flops=lambda c: 0)
    monkeypatch.setitem(workloads.WORKLOADS._builtin, name, workload)  # the built-in table, for this test


def _profiler_enabled() -> bool:
    return bool(torch._C._autograd._profiler_enabled())


# --- The seed run (labels, shapes, memory, FLOPs on) ---------------------------------------

def test_trace_holds_each_label_once_per_active_step(small_cpu_result):
    trace = read_trace(small_cpu_result.trace_gz)
    active = small_cpu_result.config.active
    for label in ("step", "mm_part", "add_part"):
        assert len(_events(trace, cat="user_annotation", name=label)) == active
    # schedule(wait=1, warmup=1, active=3): steps 0 and 1 are skipped/dropped, 2–4 recorded.
    steps = {e["name"] for e in trace["traceEvents"] if e.get("name", "").startswith("ProfilerStep#")}
    assert steps == {"ProfilerStep#2", "ProfilerStep#3", "ProfilerStep#4"}
    assert len(_events(trace, cat="cpu_op", name="aten::mm")) == active
    assert len(_events(trace, cat="cpu_op", name="aten::add")) == active


def test_key_averages_rows_and_counts(small_cpu_result):
    frame = small_cpu_result.key_averages
    active = small_cpu_result.config.active
    assert tuple(frame.columns) == KEY_AVERAGES_COLUMNS
    for name in ("step", "mm_part", "add_part"):
        row = _row(frame, name)
        assert row["count"] == active and bool(row["is_user_annotation"])
    for name in ("aten::mm", "aten::add"):
        row = _row(frame, name)
        assert row["count"] == active and not bool(row["is_user_annotation"])
        assert row["self_cpu_us"] > 0 and row["cpu_total_us"] >= row["self_cpu_us"]
    # The step label encloses the matmul and the add, so its total covers both.
    assert _row(frame, "step")["cpu_total_us"] >= (_row(frame, "aten::mm")["cpu_total_us"]
                                                   + _row(frame, "aten::add")["cpu_total_us"])
    assert set(frame["device_type"]) == {"cpu"}
    assert (frame["device_total_us"] == 0).all() and (frame["self_device_us"] == 0).all()


def test_with_flops_counts_two_mkn_per_matmul_and_mn_per_add(small_cpu_result):
    c = small_cpu_result.config
    frame = small_cpu_result.key_averages
    assert _row(frame, "aten::mm")["flops"] == 2 * c.m * c.k * c.n * c.active
    assert _row(frame, "aten::add")["flops"] == c.m * c.n * c.active


def test_profile_memory_records_each_matmul_output(small_cpu_result):
    c = small_cpu_result.config
    # aten::mm allocates its M×N float32 output once per step.
    assert _row(small_cpu_result.key_averages, "aten::mm")["cpu_memory_bytes"] == c.m * c.n * 4 * c.active
    trace = read_trace(small_cpu_result.trace_gz)
    assert _events(trace, name="[memory]")


def test_record_shapes_gives_input_shapes(small_cpu_result):
    c = small_cpu_result.config  # 128×96 @ 96×64 + 64
    by_shape = small_cpu_result.key_averages_by_shape
    assert tuple(by_shape.columns) == KEY_AVERAGES_COLUMNS
    assert _row(by_shape, "aten::mm")["input_shapes"] == f"[[{c.m}, {c.k}], [{c.k}, {c.n}]]"
    assert _row(by_shape, "aten::add")["input_shapes"] == f"[[{c.m}, {c.n}], [{c.n}], []]"
    assert (small_cpu_result.key_averages["input_shapes"] == "").all()  # grouped by name only
    mm = _events(read_trace(small_cpu_result.trace_gz), cat="cpu_op", name="aten::mm")[0]
    assert mm["args"]["Input Dims"] == [[c.m, c.k], [c.k, c.n]]


def test_tables_cover_the_cpu_sort_keys_and_name_the_label(small_cpu_result):
    tables = small_cpu_result.tables
    assert set(tables) == CPU_TABLE_KEYS
    assert set(tables) <= set(TABLE_SORT_KEYS)
    for text in tables.values():
        assert "step" in text and "aten::mm" in text and "Self CPU time total" in text
    assert "FLOPs" in tables["flops"].splitlines()[1]  # with_flops adds a FLOPs column to the header


def test_timing_has_one_sample_per_active_step(small_cpu_result):
    t = small_cpu_result.timing
    assert t.method == "wall clock"
    assert len(t.profiled_us) == small_cpu_result.config.active
    assert len(t.unprofiled_us) == unprofiled_iterations(t.profiled_median_us)
    assert all(v > 0 for v in t.profiled_us + t.unprofiled_us)
    assert t.compile_s is None


def test_one_median_for_timings_the_runner_and_the_report():
    import math

    from lab.core.result import Timing
    from lab.stats import median

    assert median([3.0, 1.0, 2.0]) == 2.0 and median([4.0, 1.0, 3.0, 2.0]) == 2.5
    assert median([1.0, float("nan"), 3.0, float("inf")]) == 2.0  # only finite values count
    assert math.isnan(median([])) and math.isnan(median([float("nan")]))
    timing = Timing(method="wall clock", profiled_us=(5.0, 1.0, 3.0), unprofiled_us=())
    assert timing.profiled_median_us == 3.0 and math.isnan(timing.unprofiled_median_us)


def test_run_profile_never_reads_the_environment(monkeypatch, warm_cpu):
    # The host's limits come from the caller (read once, at start); None means the defaults.
    monkeypatch.setenv("PROFILER_LAB_MAX_DIM", "32")
    result = run_profile(RunConfig(device="cpu", m=64, k=64, n=64, wait=0, warmup=1, active=1, warmup_iters=0))
    assert result.config.m == 64
    with pytest.raises(ConfigError, match="above this host's limit of 32"):
        run_profile(RunConfig(device="cpu", m=64, k=64, n=64), settings=HostSettings(max_dim=32))


def test_unprofiled_iterations_fit_the_budget():
    assert UNPROFILED_BUDGET_S == 1.0 and UNPROFILED_MAX_ITERS == 10
    assert unprofiled_iterations(100.0) == 10  # 0.1 ms: ten fit many times over
    assert unprofiled_iterations(250_000.0) == 4  # 0.25 s: four fit in one second
    assert unprofiled_iterations(5_000_000.0) == 1  # 5 s: still one sample
    assert unprofiled_iterations(float("nan")) == 10 and unprofiled_iterations(0.0) == 10


def test_trace_is_the_gzipped_torch_export(small_cpu_result):
    raw = gzip.decompress(small_cpu_result.trace_gz)
    assert isinstance(json.loads(raw)["traceEvents"], list)
    assert small_cpu_result.trace_stem == "matmul_add_128x96x64_float32_cpu"


# --- Options, one run each ------------------------------------------------------------------

def test_stages_are_reported_in_order_and_timed(warm_cpu):
    stages: list[str] = []
    result = _run(RunConfig(device="cpu", m=64, k=64, n=64), stages)
    assert stages == CPU_STAGES
    assert [s for s in STAGES if s != "compiling"] == CPU_STAGES
    assert list(result.stage_s) == CPU_STAGES and all(v >= 0 for v in result.stage_s.values())


def test_options_off_leave_no_shapes_memory_flops_or_stack(warm_cpu):
    config = RunConfig(device="cpu", m=64, k=48, n=32, record_shapes=False, profile_memory=False,
                       with_flops=False, with_stack=False)
    result = _run(config)
    assert (result.key_averages_by_shape["input_shapes"] == "").all()
    assert _row(result.key_averages, "aten::mm")["cpu_memory_bytes"] == 0
    assert _row(result.key_averages, "aten::mm")["flops"] == 0
    trace = read_trace(result.trace_gz)
    assert not any("Input Dims" in e.get("args", {}) for e in _events(trace, cat="cpu_op"))
    assert not _events(trace, cat="python_function") and not _events(trace, name="[memory]")
    # Without the optional labels only the step label annotates the step.
    annotations = {e["name"] for e in _events(trace, cat="user_annotation")}
    assert {n for n in annotations if not n.startswith("ProfilerStep#")} == {"matmul_add"}


def test_with_stack_records_the_python_callers(warm_cpu):
    result = _run(RunConfig(device="cpu", m=64, k=64, n=64, with_stack=True))
    names = [e["name"] for e in _events(read_trace(result.trace_gz), cat="python_function")]
    assert any("test_runner.py" in n and "test_with_stack_records_the_python_callers" in n for n in names)
    assert any("workloads/gemm.py" in n for n in names)  # the step itself (lab/core/workloads/gemm.py)


def test_cold_run_without_warmup_iterations(warm_cpu):
    config = RunConfig(device="cpu", m=64, k=64, n=64, warmup_iters=0, wait=0, warmup=1, active=2)
    result = _run(config)
    assert _row(result.key_averages, "matmul_add")["count"] == 2
    assert len(result.timing.profiled_us) == 2


def test_repeat_keeps_the_last_cycle_and_times_all_active_steps(warm_cpu):
    config = RunConfig(device="cpu", m=64, k=64, n=64, wait=1, warmup=1, active=2, repeat=2)
    result = _run(config)
    assert _row(result.key_averages, "matmul_add")["count"] == 2
    assert len(_events(read_trace(result.trace_gz), cat="user_annotation", name="matmul_add")) == 2
    assert len(result.timing.profiled_us) == 4
    assert any("repeat=2" in w for w in result.warnings)


def test_compile_is_timed_apart_and_the_label_stays_outside(warm_cpu):
    # torch.compile on CPU (inductor + the C++ compiler): ~5–15 s for the two runs here.
    stages: list[str] = []
    result = _run(RunConfig(device="cpu", m=64, k=64, n=64, compile=True, step_label="compiled_step"), stages)
    assert stages == CPU_STAGES[:2] + ["compiling"] + CPU_STAGES[2:]
    assert result.timing.compile_s is not None and result.timing.compile_s > 0
    frame = result.key_averages
    assert _row(frame, "compiled_step")["count"] == 3
    assert any(name.startswith("Torch-Compiled Region") for name in frame["name"])
    trace = read_trace(result.trace_gz)
    assert len(_events(trace, cat="user_annotation", name="compiled_step")) == 3
    assert result.trace_stem.startswith("matmul_add_compiled_")
    # Each compiled run starts from a clean compiler: another shape compiles its own graph
    # (frame 0, compile 0) instead of recompiling the previous run's into a dynamic one.
    again = _run(RunConfig(device="cpu", m=48, k=48, n=48, compile=True))
    for frame_ in (frame, again.key_averages):
        assert "Torch-Compiled Region: 0/0" in set(frame_["name"])


# --- Refusals happen before anything is allocated ------------------------------------------

def test_memory_refusal_comes_before_allocating(warm_cpu):
    stages: list[str] = []
    config = RunConfig(device="cpu", m=200_000, k=200_000, n=200_000)  # ~600 GB of float32
    with pytest.raises(ConfigError, match="this machine's RAM has .* free.*choose smaller M, K or N"):
        run_profile(config, settings=HostSettings(max_dim=300_000), on_stage=stages.append)
    assert stages == ["checking"]


def test_host_limit_and_device_refusals_come_before_allocating(warm_cpu):
    stages: list[str] = []
    with pytest.raises(ConfigError, match="above this host's limit of 32"):
        run_profile(RunConfig(device="cpu", m=64, k=16, n=16), settings=HostSettings(max_dim=32),
                    on_stage=stages.append)
    with pytest.raises(ConfigError, match="float16 matmul on CPU"):
        run_profile(RunConfig(device="cpu", m=16, k=16, n=16, dtype="float16"), settings=HostSettings(),
                    on_stage=stages.append)
    assert stages == ["checking", "checking"]


# --- Failures never leave the profiler on -----------------------------------------------------

@pytest.mark.parametrize("fail_at", [1, 3], ids=["in-schedule-warmup", "in-active-step"])
def test_failure_inside_the_profile_then_a_normal_run_works(monkeypatch, warm_cpu, fail_at):
    calls = {"n": 0}

    def build(config, device, dtype):
        def step():
            calls["n"] += 1
            if calls["n"] == fail_at + 1:  # warmup_iters=0: call i+1 is profiler step i
                raise ValueError("boom inside the profiled loop")
            return torch.ones(4, device=device) * 2
        return step

    _register(monkeypatch, "explodes", build)
    with pytest.raises(ValueError, match="boom"):
        _run(RunConfig(workload="explodes", device="cpu", m=8, k=8, n=8, warmup_iters=0))
    assert not _profiler_enabled()
    result = _run(RunConfig(device="cpu", m=64, k=64, n=64))
    assert _row(result.key_averages, "matmul_add")["count"] == 3


def test_real_cpu_allocation_failure_becomes_run_error(monkeypatch, warm_cpu):
    def build(config, device, dtype):
        def step():
            return torch.empty(1 << 60, dtype=torch.uint8)  # 1 EiB: the allocator refuses
        return step

    _register(monkeypatch, "huge", build)
    with pytest.raises(RunError, match="ran out of memory; choose smaller M, K or N"):
        _run(RunConfig(workload="huge", device="cpu", m=8, k=8, n=8, warmup_iters=0, wait=0))
    assert not _profiler_enabled()
    assert _row(_run(RunConfig(device="cpu", m=64, k=64, n=64)).key_averages, "aten::mm")["count"] == 3


def test_torch_out_of_memory_inside_the_profile_becomes_run_error(monkeypatch, warm_cpu):
    def build(config, device, dtype):
        def step():
            raise torch.cuda.OutOfMemoryError("CUDA out of memory. Tried to allocate 64.00 GiB")
        return step

    _register(monkeypatch, "oom", build)
    with pytest.raises(RunError, match=r"8x8x8 float32 ran out of memory"):
        _run(RunConfig(workload="oom", device="cpu", m=8, k=8, n=8, warmup_iters=0))
    assert not _profiler_enabled()


def test_float32_turns_tf32_off_during_the_run_and_restores_it(monkeypatch, warm_cpu):
    seen = {}

    def build(config, device, dtype):
        seen["allow_tf32"] = torch.backends.cuda.matmul.allow_tf32
        seen["dtype"] = dtype
        return lambda: torch.ones(4) + 1

    _register(monkeypatch, "peek", build)
    before = torch.backends.cuda.matmul.allow_tf32
    torch.backends.cuda.matmul.allow_tf32 = True
    try:
        _run(RunConfig(workload="peek", device="cpu", m=8, k=8, n=8))
        assert seen == {"allow_tf32": False, "dtype": torch.float32}
        assert torch.backends.cuda.matmul.allow_tf32 is True
    finally:
        torch.backends.cuda.matmul.allow_tf32 = before


# --- Device description and peaks -------------------------------------------------------------

def test_warm_up_and_detect_describe_this_cpu(warm_cpu):
    assert warm_cpu.kind == "cpu" and warm_cpu.name
    assert warm_cpu.cpu_count and warm_cpu.cpu_count >= 1
    assert 0 < warm_cpu.free_memory_bytes <= warm_cpu.total_memory_bytes
    assert warm_cpu.torch_version == torch.__version__
    assert warm_cpu.peak is None and warm_cpu.sm_count is None


@pytest.mark.skipif(torch.cuda.is_available(), reason="checks the no-GPU fallback")
def test_asking_for_cuda_without_a_gpu_describes_the_cpu_and_is_refused():
    assert detect_device("cuda").kind == "cpu"
    with pytest.raises(ConfigError, match="no CUDA GPU is visible"):
        run_profile(RunConfig(device="cuda", m=8, k=8, n=8), settings=HostSettings())


@pytest.mark.parametrize("name, model", [
    ("NVIDIA H200", "H200 SXM"),
    ("NVIDIA H200 NVL", "H200 NVL"),
    ("NVIDIA A100-SXM4-80GB", "A100 SXM4 80GB"),
    ("NVIDIA A100-SXM4-40GB", "A100 SXM4 40GB"),
    ("NVIDIA A100-PCIE-40GB", "A100 PCIe 40GB"),
    ("NVIDIA A100 80GB PCIe", "A100 PCIe 80GB"),
    ("NVIDIA H100 80GB HBM3", "H100 SXM"),
    ("NVIDIA H100 PCIe", "H100 PCIe"),
    ("Tesla T4", "T4"),
    ("Tesla V100-SXM2-16GB", "V100 SXM2"),
    ("Tesla V100-PCIE-32GB", "V100 PCIe"),
    ("NVIDIA L4", "L4"),
    ("NVIDIA A10G", "A10G"),
    ("NVIDIA A10", "A10"),
    ("NVIDIA L40S", "L40S"),
])
def test_lookup_peak_matches_torch_device_names(name, model):
    assert lookup_peak(name).model == model


@pytest.mark.parametrize("name", ["NVIDIA GeForce RTX 4090", "NVIDIA L40", "AMD EPYC", ""])
def test_lookup_peak_unknown_is_none(name):
    assert lookup_peak(name) is None


def test_peak_table_is_dense_and_sourced():
    for peak in PEAKS.values():
        assert peak.source and peak.memory_bandwidth_gbs > 0
        assert set(peak.tflops) <= {"float32", "tf32", "bfloat16", "float16", "float8", "int8"}
        # Tensor cores run fp16 at least as fast as fp32 cores; tf32 at half the fp16 rate
        # (or equal on the A10G), never above it: a sparse number would break these.
        assert peak.tflops["float16"] > peak.tflops["float32"]
        if "tf32" in peak.tflops:
            assert peak.tflops["tf32"] <= peak.tflops["bfloat16"] == peak.tflops["float16"]
    for model in ("T4", "V100 SXM2"):
        assert "tf32" not in PEAKS[model].tflops and "bfloat16" not in PEAKS[model].tflops
    # H200 dense bf16 is half the datasheet's 1,979 TFLOPS "with sparsity".
    assert PEAKS["H200 SXM"].tflops["bfloat16"] == pytest.approx(1979 / 2)
    # Dense FP8 and int8 are the datasheet's 3,958 "with sparsity" halved.
    assert PEAKS["H200 SXM"].tflops["float8"] == PEAKS["H200 SXM"].tflops["int8"] == pytest.approx(3958 / 2)
    assert PEAKS["H200 SXM"].ridge_flops_per_byte("bfloat16") == pytest.approx(989.5e12 / 4.8e12)
    assert PEAKS["T4"].ridge_flops_per_byte("tf32") is None
