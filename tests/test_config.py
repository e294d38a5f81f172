"""RunConfig's own checks, the host/device/memory checks, and HostSettings from the environment."""

from __future__ import annotations

import dataclasses
import inspect

import pytest

from lab.core.config import (
    OPTIONS,
    ConfigError,
    RunConfig,
    check_device,
    check_limits,
    check_memory,
)
from lab.core.settings import HostSettings, SettingsError, host_environment

# --- RunConfig: refusals that need no context ---------------------------------------------


@pytest.mark.parametrize("field, value", [
    ("m", 0), ("k", -1), ("n", 0), ("m", 1.5), ("m", True), ("n", "64"),
])
def test_dimensions_must_be_whole_numbers_at_least_one(field, value):
    with pytest.raises(ConfigError, match=f"{field.upper()} must be a whole number"):
        RunConfig(**{field: value})


def test_unknown_dtype_names_the_choices():
    with pytest.raises(ConfigError, match="unknown dtype 'float64'.*float32, tf32, bfloat16, float16"):
        RunConfig(dtype="float64")


def test_unknown_device_and_workload():
    with pytest.raises(ConfigError, match="unknown device 'gpu'"):
        RunConfig(device="gpu")
    with pytest.raises(ConfigError, match="unknown workload 'conv'"):
        RunConfig(workload="conv")


@pytest.mark.parametrize("label, reason", [
    ("x" * 200, "1–64 characters"),
    ("", "1–64 characters"),
    ("two\nlines", "printable characters only"),
    ("tab\there", "printable characters only"),
])
def test_bad_labels_are_refused(label, reason):
    with pytest.raises(ConfigError, match=reason):
        RunConfig(step_label=label)
    with pytest.raises(ConfigError, match="matmul label"):
        RunConfig(matmul_label=label)
    with pytest.raises(ConfigError, match="bias-add label"):
        RunConfig(add_label=label)


def test_longest_label_and_unicode_label_are_accepted():
    assert RunConfig(step_label="x" * 64).step_label == "x" * 64
    assert RunConfig(step_label="matmul → add").step_label == "matmul → add"


@pytest.mark.parametrize("field, value", [("warmup", -1), ("wait", -2), ("warmup_iters", -1)])
def test_negative_schedule_counts_are_refused(field, value):
    with pytest.raises(ConfigError, match=f"{field} must be a whole number ≥ 0"):
        RunConfig(**{field: value})


@pytest.mark.parametrize("field", ["active", "repeat"])
def test_active_and_repeat_must_be_at_least_one(field):
    with pytest.raises(ConfigError, match=f"{field} must be a whole number ≥ 1"):
        RunConfig(**{field: 0})


def test_zero_wait_warmup_and_cold_start_are_accepted():
    config = RunConfig(wait=0, warmup=0, warmup_iters=0, active=1)
    assert config.profiled_steps == 1


def test_profiled_steps_counts_every_cycle():
    # One cycle is wait + warmup + active steps; the schedule runs `repeat` cycles.
    assert RunConfig(wait=1, warmup=1, active=3, repeat=1).profiled_steps == 5
    assert RunConfig(wait=2, warmup=1, active=4, repeat=3).profiled_steps == 21


def test_estimated_bytes_counts_inputs_intermediate_and_output():
    # x (M×K) + w (K×N) + b (N) + matmul result (M×N) + output (M×N), 2 bytes each in bf16.
    config = RunConfig(m=100, k=30, n=20, dtype="bfloat16")
    assert config.estimated_bytes == (100 * 30 + 30 * 20 + 20 + 2 * 100 * 20) * 2


def test_from_dict_refuses_unknown_fields_and_round_trips():
    with pytest.raises(ConfigError, match=r"unknown config fields \['colour'\]"):
        RunConfig.from_dict({"m": 64, "colour": "red"})
    config = RunConfig(m=64, k=32, n=16, dtype="bfloat16", matmul_label="mm", compile=True)
    assert RunConfig.from_dict(config.to_dict()) == config


def test_from_dict_still_validates_values():
    with pytest.raises(ConfigError, match="M must be"):
        RunConfig.from_dict({"m": 0})


# --- Host limits --------------------------------------------------------------------------

def test_dimension_above_host_limit_is_refused_with_the_limit():
    with pytest.raises(ConfigError, match="M=1000000 is above this host's limit of 16384"):
        check_limits(RunConfig(m=10**6), HostSettings())
    with pytest.raises(ConfigError, match="N=65 is above this host's limit of 64"):
        check_limits(RunConfig(m=64, k=64, n=65), HostSettings(max_dim=64))


def test_dimension_at_host_limit_is_accepted():
    check_limits(RunConfig(m=64, k=64, n=64), HostSettings(max_dim=64))
    check_limits(RunConfig(m=10**6), HostSettings(max_dim=10**6))


def test_too_many_iterations_are_refused():
    # (1 + 1 + 60) * 1 profiled + 2 warm-up = 64: at the default limit; one more is refused.
    check_limits(RunConfig(active=60), HostSettings())
    with pytest.raises(ConfigError, match="needs 65 iterations.*allows 64"):
        check_limits(RunConfig(active=61), HostSettings())


# --- Device ------------------------------------------------------------------------------

def test_cpu_refuses_float16_and_tf32_but_runs_bfloat16_and_float32():
    with pytest.raises(ConfigError, match="float16 matmul on CPU"):
        check_device(RunConfig(dtype="float16"), kind="cpu", compute_capability=None)
    with pytest.raises(ConfigError, match="tf32 is a tensor-core mode"):
        check_device(RunConfig(dtype="tf32"), kind="cpu", compute_capability=None)
    for dtype in ("float32", "bfloat16"):
        check_device(RunConfig(dtype=dtype), kind="cpu", compute_capability=None)


def test_gpu_dtype_support_follows_compute_capability():
    with pytest.raises(ConfigError, match="tf32 needs compute capability 8.0"):
        check_device(RunConfig(dtype="tf32"), kind="cuda", compute_capability=(7, 0))
    with pytest.raises(ConfigError, match="bfloat16 matmul needs compute capability 8.0"):
        check_device(RunConfig(dtype="bfloat16"), kind="cuda", compute_capability=(7, 5))
    check_device(RunConfig(dtype="float16"), kind="cuda", compute_capability=(7, 5))
    for dtype in ("tf32", "bfloat16", "float16", "float32"):
        check_device(RunConfig(dtype=dtype), kind="cuda", compute_capability=(9, 0))


def test_asking_for_cuda_without_a_gpu_is_refused():
    with pytest.raises(ConfigError, match="no CUDA GPU is visible"):
        check_device(RunConfig(device="cuda"), kind="cpu", compute_capability=None)


# --- Memory ------------------------------------------------------------------------------

def test_memory_that_does_not_fit_is_refused_with_sizes():
    config = RunConfig(m=1024, k=1024, n=1024)  # 4 MiB each for x, w, y, out + 4 KiB: ~16 MiB
    with pytest.raises(ConfigError, match=r"needs about 16\.0 MiB but the GPU has 1\.0 MiB free.*smaller M, K or N"):
        check_memory(config, 2**20, "the GPU")


def test_memory_budget_keeps_a_fifth_for_headroom():
    config = RunConfig(m=64, k=64, n=64)  # x, w, x@w, out: 4·64·64 floats; b: 64; 4 B each
    assert config.estimated_bytes == 65_792
    check_memory(config, 82_240, "RAM")  # 80 % of 82,240 B is exactly 65,792 B: fits
    with pytest.raises(ConfigError, match="choose smaller M, K or N"):
        check_memory(config, 82_239, "RAM")


# --- HostSettings.from_env ----------------------------------------------------------------

def test_from_env_reads_prefixed_variables_only():
    settings = HostSettings.from_env({
        "PROFILER_LAB_MAX_DIM": "8192", "PROFILER_LAB_RUN_TIMEOUT_S": "12.5",
        "PROFILER_LAB_WORKERS": "2", "MAX_DIM": "1", "HOME": "/root",
    })
    assert settings.max_dim == 8192
    assert settings.run_timeout_s == 12.5
    assert settings.workers == 2
    assert settings.max_steps == HostSettings().max_steps  # untouched fields keep defaults


def test_from_env_reads_the_perfetto_origin_as_text():
    settings = HostSettings.from_env({"PROFILER_LAB_PERFETTO_ORIGIN": "http://127.0.0.1:9"})
    assert settings.perfetto_origin == "http://127.0.0.1:9"
    assert HostSettings().perfetto_origin == "https://ui.perfetto.dev"


def test_from_env_with_nothing_set_gives_defaults():
    assert HostSettings.from_env({}) == HostSettings()


@pytest.mark.parametrize("raw, reason", [("abc", "is not a number"), ("1.5", "is not a number"),
                                         ("-3", "is negative")])
def test_from_env_bad_values_name_the_variable(raw, reason):
    with pytest.raises(SettingsError, match=f"PROFILER_LAB_MAX_DIM='{raw}' {reason}"):
        HostSettings.from_env({"PROFILER_LAB_MAX_DIM": raw})


def test_from_env_bad_float_names_the_variable():
    with pytest.raises(SettingsError, match="PROFILER_LAB_RUN_TIMEOUT_S='soon' is not a number"):
        HostSettings.from_env({"PROFILER_LAB_RUN_TIMEOUT_S": "soon"})


def test_from_env_reads_the_backend_and_the_ray_address_as_text():
    settings = HostSettings.from_env({"PROFILER_LAB_BACKEND": "ray", "PROFILER_LAB_RAY_ADDRESS": " head:6379 "})
    assert (settings.backend, settings.ray_address) == ("ray", "head:6379")
    assert (HostSettings().backend, HostSettings().ray_address) == ("local", "auto")
    with pytest.raises(SettingsError, match="PROFILER_LAB_BACKEND='slurm' is unknown; use one of: local, ray"):
        HostSettings.from_env({"PROFILER_LAB_BACKEND": "slurm"})


def test_host_environment_is_the_prefixed_variables_sorted():
    env = {"PROFILER_LAB_WORKERS": "2", "HOME": "/root", "PROFILER_LAB_MAX_DIM": "8192"}
    assert host_environment(env) == (("PROFILER_LAB_MAX_DIM", "8192"), ("PROFILER_LAB_WORKERS", "2"))
    assert HostSettings.from_env(dict(host_environment(env))) == HostSettings.from_env(env)


# --- Each field's Option: declared once, on the field -----------------------------------------

def test_every_field_declares_its_option_once():
    names = [f.name for f in dataclasses.fields(RunConfig)]
    assert list(OPTIONS) == names
    for name, option in OPTIONS.items():
        assert option.name == name and option.label
        assert option.default == getattr(RunConfig(), name)
        assert option.group in {"what", "labels", "schedule", "profiler", "job", "replay"}
        if option.kind == "int":
            assert option.low is not None, name  # RunConfig refuses values below it
        assert not option.inline or option.group == "schedule"
    # The CLI's renames live on the fields too.
    assert OPTIONS["active"].cli_flag == "--steps" and OPTIONS["step_label"].cli_flag == "--label"
    assert OPTIONS["warmup_iters"].cli_flag == "--warmup-iters"


@pytest.mark.parametrize("name", [n for n, o in OPTIONS.items() if o.group == "schedule"])
def test_schedule_counts_are_refused_below_their_option_low(name):
    low = OPTIONS[name].low
    RunConfig(**{name: low})
    with pytest.raises(ConfigError, match=f"{name} must be a whole number ≥ {low}"):
        RunConfig(**{name: low - 1})


def test_profiler_args_are_the_keywords_of_torch_profiler_profile():
    torch_profiler = pytest.importorskip("torch.profiler")
    keywords = set(inspect.signature(torch_profiler.profile).parameters)
    args = RunConfig(with_stack=True).profiler_args()
    assert args == {"record_shapes": True, "profile_memory": False, "with_stack": True, "with_flops": False}
    assert set(args) <= keywords
