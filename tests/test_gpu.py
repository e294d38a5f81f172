"""GPU behaviour of the engine and the page, on a real CUDA device (the H200 box).

Run with ``python -m pytest tests/test_gpu.py -q -m gpu``; every test skips, saying why, on a
host without CUDA. Facts are checked from the raw Chrome trace independently of
``lab.analysis`` where possible (kernels, flows, the launching op by time containment).
"""

from __future__ import annotations

import gzip
import json
import re
from pathlib import Path

import numpy as np
import pytest
import torch

from lab.core.config import ConfigError, RunConfig
from lab.core.result import RunError
from lab.core.settings import HostSettings
from lab.trace.load import load_trace

pytestmark = [
    pytest.mark.gpu,
    pytest.mark.apptest,
    pytest.mark.pool,
    pytest.mark.skipif(not torch.cuda.is_available(), reason="needs a CUDA GPU (torch.cuda.is_available() is False)"),
]

# cuBLAS/CUTLASS GEMM kernel names on Ampere/Hopper (nvjet, sm90_xmma_gemm, cutlass…).
GEMM_NAME = re.compile(r"gemm|nvjet|cutlass|xmma", re.IGNORECASE)
# A worker's first profile initialises CUPTI (~7 s on an H200) before the run itself.
RESULT_WAIT_S = 240.0
APP = Path(__file__).resolve().parents[1] / "app.py"


@pytest.fixture(scope="module")
def settings():
    return HostSettings()


@pytest.fixture(scope="module")
def warm_cuda():
    from lab.run.runner import warm_up

    return warm_up("cuda")


@pytest.fixture(scope="module")
def bf16_result(warm_cuda, settings):
    from lab.run.runner import run_profile

    config = RunConfig(m=1024, k=1024, n=1024, dtype="bfloat16", device="cuda",
                       matmul_label="mm_part", add_label="add_part")
    return run_profile(config, settings=settings)


def _events(result) -> list[dict]:
    return json.loads(gzip.decompress(result.trace_gz))["traceEvents"]


def _launching_op(launch: dict, cpu_ops: list[dict]) -> str | None:
    """The innermost aten op on the launch's thread whose span contains the launch call."""
    inside = [op for op in cpu_ops if op["tid"] == launch["tid"] and op["pid"] == launch["pid"]
              and op["ts"] <= launch["ts"] and launch["ts"] + launch.get("dur", 0) <= op["ts"] + op["dur"]
              and op["name"].startswith("aten::")]
    return min(inside, key=lambda op: op["dur"])["name"] if inside else None


def test_cuda_trace_has_kernels_gpu_annotations_and_events_timing(bf16_result):
    events = _events(bf16_result)
    cats = {e.get("cat") for e in events}
    assert "kernel" in cats and "gpu_user_annotation" in cats
    gpu_labels = {e["name"] for e in events if e.get("cat") == "gpu_user_annotation"}
    cpu_labels = {e["name"] for e in events if e.get("cat") == "user_annotation"}
    # Kineto projects the innermost label around each kernel onto its stream: with labels
    # around the matmul and the add, those (not the outer step label) show on the GPU.
    # Seen on an H200, torch 2.11: {'mm_part', 'add_part'}.
    assert {"mm_part", "add_part"} <= gpu_labels
    assert {"matmul_add", "mm_part", "add_part"} <= cpu_labels
    t = bf16_result.timing
    assert t.method == "cuda events"
    assert len(t.profiled_us) == bf16_result.config.active
    assert all(us > 0 for us in t.profiled_us + t.unprofiled_us)
    assert bf16_result.device.kind == "cuda" and bf16_result.device.cupti_available


def test_gemm_and_add_kernels_are_linked_to_their_launches(bf16_result):
    events = _events(bf16_result)
    kernels = [e for e in events if e.get("cat") == "kernel" and e.get("ph") == "X"]
    # cuBLAS on Hopper launches some kernels through the driver API (cuLaunchKernelEx).
    launches = {e["args"]["correlation"]: e for e in events
                if e.get("cat") in ("cuda_runtime", "cuda_driver") and e.get("ph") == "X"
                and "correlation" in e.get("args", {})}
    flow_starts = {e["id"] for e in events if e.get("ph") == "s" and e.get("cat") == "ac2g"}
    flow_ends = {e["id"] for e in events if e.get("ph") == "f" and e.get("cat") == "ac2g"}
    cpu_ops = [e for e in events if e.get("cat") == "cpu_op" and e.get("ph") == "X"]

    owner_of = {}  # kernel name -> set of launching aten ops
    for k in kernels:
        corr = k["args"]["correlation"]
        assert corr in launches, f"kernel {k['name'][:60]} has no launch call"
        assert corr in flow_starts and corr in flow_ends, f"kernel {k['name'][:60]} has no ac2g flow"
        owner_of.setdefault(k["name"], set()).add(_launching_op(launches[corr], cpu_ops))
    gemm = [name for name in owner_of if GEMM_NAME.search(name)]
    add = [name for name, ops in owner_of.items() if "aten::add" in ops]
    assert gemm and all("aten::mm" in owner_of[name] for name in gemm)
    assert add and not set(add) & set(gemm)

    # The lab's parser finds the same pairs: every kernel's row is the GPU end of one flow.
    trace = load_trace(bf16_result.trace_gz)
    ev = trace.events
    kernel_rows = set(np.flatnonzero((ev["cat"] == "kernel").to_numpy()).tolist())
    linked = set(trace.flows["gpu_row"].tolist())
    assert kernel_rows and kernel_rows <= linked
    launch_names = set(ev["name"].astype(str).to_numpy()[trace.flows["launch_row"].to_numpy()])
    assert launch_names and all(n.startswith(("cuda", "cu")) for n in launch_names)


def test_key_averages_have_device_time_for_mm(bf16_result):
    ka = bf16_result.key_averages
    mm = ka[ka["name"] == "aten::mm"]
    assert len(mm) == 1
    assert mm["device_total_us"].iloc[0] > 0
    assert "device_time_total" in bf16_result.tables


def test_tf32_runs_and_restores_the_flag(warm_cuda, settings):
    from lab.run.runner import run_profile

    before = torch.backends.cuda.matmul.allow_tf32
    result = run_profile(RunConfig(m=1024, k=1024, n=1024, dtype="tf32", device="cuda"), settings=settings)
    assert torch.backends.cuda.matmul.allow_tf32 == before
    names = [e["name"] for e in _events(result) if e.get("cat") == "kernel"]
    assert any(GEMM_NAME.search(n) for n in names)
    assert result.timing.unprofiled_median_us > 0


def test_oversized_run_is_refused_before_allocating(warm_cuda):
    from lab.run.runner import run_profile

    huge = RunConfig(m=200_000, k=200_000, n=200_000, dtype="bfloat16", device="cuda")
    allocated = torch.cuda.memory_allocated()
    with pytest.raises(ConfigError, match="choose smaller M, K or N"):
        run_profile(huge, settings=HostSettings(max_dim=200_000))
    assert torch.cuda.memory_allocated() == allocated


def test_real_out_of_memory_is_a_run_error_and_the_next_run_succeeds(warm_cuda, settings):
    """A run that passes the memory estimate but cannot allocate: most of the GPU is held by a
    filler tensor. x is M×K bf16, made (as every input) from a float32 randn: 6 bytes per
    element at that moment against the estimate's 2, so an estimate of 60 % of free memory
    needs 180 % of it."""
    from lab.run.runner import run_profile

    torch.cuda.empty_cache()
    free, _ = torch.cuda.mem_get_info()
    leave = 4 * 2**30
    if free < leave + 2**30:
        pytest.skip(f"only {free / 2**30:.1f} GiB free; the test needs more than {(leave + 2**30) / 2**30:.0f} GiB")
    filler = torch.empty(free - leave, dtype=torch.uint8, device="cuda")
    try:
        left, _ = torch.cuda.mem_get_info()
        k = 8192
        m = int(0.3 * left / k)  # 2·M·K bytes ≈ 60 % of what is left: passes check_memory (80 %)
        config = RunConfig(m=m, k=k, n=8, dtype="bfloat16", device="cuda")
        assert config.estimated_bytes < 0.8 * left
        with pytest.raises(RunError, match="ran out of GPU memory"):
            run_profile(config, settings=HostSettings(max_dim=max(m, k)))
        enabled = getattr(torch._C._autograd, "_profiler_enabled", None)  # private: may be absent
        assert enabled is None or not enabled()  # the runner leaves the profiler off
    finally:
        del filler
        torch.cuda.empty_cache()
    after = run_profile(RunConfig(m=512, k=512, n=512, dtype="bfloat16", device="cuda", step_label="after_oom"),
                        settings=settings)
    assert any(e.get("cat") == "kernel" for e in _events(after))


def test_two_gpus_serve_two_runs_at_once():
    if torch.cuda.device_count() < 2:
        pytest.skip(f"needs two GPUs; {torch.cuda.device_count()} visible")
    from lab.run.service import ProfileService

    service = ProfileService(settings=HostSettings(), devices=["cuda:0", "cuda:1"])
    try:
        service.start(wait=True)
        configs = [RunConfig(m=2048, k=2048, n=2048, dtype="bfloat16", device="cuda", step_label=f"two_gpus_{i}")
                   for i in range(2)]
        tickets = [service.submit(c) for c in configs]
        results = [t.result(timeout=RESULT_WAIT_S) for t in tickets]
    finally:
        service.shutdown()
    assert [r.config.step_label for r in results] == ["two_gpus_0", "two_gpus_1"]
    assert all(r.device.kind == "cuda" for r in results)
    assert results[0].device.index != results[1].device.index
    assert {t.poll().worker for t in tickets} == {0, 1}


def run_page_once(m: int, dtype: str, device: str, timeout_s: float = 300.0):
    """Drive app.py through AppTest: set sizes, dtype and device, click "Run profile".

    Returns the AppTest after the run (the Summary view is open). Used by the GPU test below;
    the same steps work on a CPU host (device "cpu"), which is how they were checked.
    Form widgets are set by key as tests/test_app.py does (AppTest keeps a form's edits until
    its submit button is clicked).
    """
    from streamlit.testing.v1 import AppTest

    at = AppTest.from_file(str(APP), default_timeout=timeout_s)
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    values = {"cfg_m": m, "cfg_k": m, "cfg_n": m, "cfg_dtype": dtype, "cfg_device": device,
              "cfg_exact": "", "cfg_step_label": "matmul_add"}
    widgets = {w.key: w for kind in ("select_slider", "radio", "text_input") for w in at.get(kind)}
    for key, value in values.items():
        widgets[key].set_value(value)
    next(b for b in at.form_submit_button if b.label == "Run profile").click()  # not the own-trace form
    at.run()
    assert not at.exception, [e.value for e in at.exception]
    assert not at.error, [e.value for e in at.error]
    return at


def page_texts(at) -> list[str]:
    return [t.value for t in at.text]


def open_view(at, name: str) -> None:
    at.session_state["view"] = name  # st.tabs(key="view") is a widget: this opens the tab
    at.run()
    assert not at.exception, [e.value for e in at.exception]


def test_app_runs_a_profile_on_the_gpu():
    pytest.importorskip("streamlit", reason="streamlit is not installed on this host")
    pytest.importorskip("altair", reason="altair (the page's charts) is not installed on this host")
    at = run_page_once(1024, "bfloat16", "cuda")
    assert at.session_state["subject"].startswith("run:")
    (run,) = at.session_state["runs"]
    assert run.run.device.kind == "cuda" and run.run.config.dtype == "bfloat16"
    device_lines = [t for t in page_texts(at) if t.startswith("Device: ")]
    assert device_lines and "cuda:" in device_lines[0], page_texts(at)
    assert torch.cuda.get_device_name(0) in device_lines[0]
    open_view(at, "Table")
    names = set(at.dataframe[0].value["Name"].astype(str))
    assert "matmul_add" in names and "aten::mm" in names, names
