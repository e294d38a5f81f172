"""A replay as a run of the lab's queue: one op row of a trace, rebuilt and called a few times per
step under the same profiler, estimates, memory checks and limits as every run.

The ``RunConfig`` carries the replay in its ``replay`` field (``ReplayRequest.to_json``: the
row's script spec with what the trace measured, the layout asked for, where it came from); the
dtype variant is the config's ``dtype`` ("tf32" is float32 with TF32 tensor cores, as for every
run) and torch.compile its ``compile``. The workload is found by its qualified name,
``REPLAY_WORKLOAD``, like a lesson's own (``lab.core.workloads.Workloads``).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import ClassVar

from lab.core.workloads import Sizes, Workload
from lab.replay import standalone
from lab.replay.export import script_spec
from lab.replay.rows import RowFigures
from lab.replay.spec import ReplaySpec
from lab.vocab import DTYPES

__all__ = ["CALLS_PER_STEP", "LAYOUTS", "REPLAY_WORKLOAD", "WORKLOADS", "ReplayCall", "ReplayRequest",
           "recorded_dtype", "replay_inputs"]

REPLAY_WORKLOAD = "lab.replay.workload.op"
# Calls of the op per profiled step: with the default schedule's 3 active steps, 9 calls to take
# medians over, as the trace's own same-shape calls are (a replay of the CLI runs 20 in a round).
CALLS_PER_STEP = 3
LAYOUTS = ("as recorded", "contiguous", "channels_last")


@dataclass(frozen=True, kw_only=True)
class ReplayCall(Sizes):
    """A replay has no sizes of its own: the op's shapes are the recorded ones (in ``replay``)."""

    CARRIED: ClassVar[tuple[str | None, str | None, str | None]] = (None, None, None)
    LABELS: ClassVar[tuple[str, str, str]] = ("—", "—", "—")


@dataclass(frozen=True, kw_only=True)
class ReplayRequest:
    """What a replay run rebuilds: the script spec of the row (with the trace's figures under
    "original"), the inputs' layout, and the trace it came from."""

    spec: dict
    layout: str = "as recorded"
    source: str = ""

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be one of {', '.join(LAYOUTS)}, not {self.layout!r}")

    @classmethod
    def of_row(cls, spec: ReplaySpec, original: RowFigures, *, layout: str = "as recorded",
               source: str = "") -> ReplayRequest:
        return cls(spec=script_spec(spec, original, source=source), layout=layout, source=source)

    def to_json(self) -> str:
        return json.dumps({"spec": self.spec, "layout": self.layout, "source": self.source}, sort_keys=True)

    @classmethod
    def from_json(cls, text: str) -> ReplayRequest:
        data = json.loads(text)
        return cls(spec=data["spec"], layout=data.get("layout", "as recorded"), source=data.get("source", ""))

    @property
    def title(self) -> str:
        shapes = ", ".join("×".join(str(d) for d in i["shape"]) for i in self.spec["inputs"] if i["kind"] == "tensor")
        return f"{self.spec['op']} [{shapes}]"


def recorded_dtype(spec: dict) -> str:
    """The run dtype that replays the row as recorded: its floating-point inputs' dtype ("tf32"
    where the trace's GEMM kernel ran TF32), float32 where the lab's dtypes do not name it."""
    floats = [i["dtype"] for i in spec["inputs"] if i["kind"] == "tensor" and i["dtype"] in DTYPES]
    dtype = floats[0] if floats else "float32"
    return "tf32" if dtype == "float32" and spec.get("tf32") else dtype


def _request(config) -> ReplayRequest:
    if not getattr(config, "replay", ""):
        raise ValueError("a replay run needs the op it replays: use the Table's 'Replay here' or "
                         "python -m lab replay TRACE --op NAME")
    return ReplayRequest.from_json(config.replay)


def replay_inputs(config, device, dtype) -> list:
    """The op's arguments in schema order: tensors of the recorded shapes and strides (or the
    layout asked for), in the config's dtype where it differs from the recorded one; scalars."""
    request = _request(config)
    asked = str(dtype).replace("torch.", "")
    as_recorded = recorded_dtype(request.spec).replace("tf32", "float32")
    return standalone.build_args(request.spec, str(device), dtype_name=None if asked == as_recorded else asked,
                                 layout=request.layout)


def build_replay(config, device, dtype):
    """The step: ``CALLS_PER_STEP`` calls of the op on ``replay_inputs``."""
    import torch

    spec = _request(config).spec
    overload, positional, keywords = standalone.resolve(spec["op"], replay_inputs(config, device, dtype))

    def step():
        with torch.no_grad():
            for _ in range(CALLS_PER_STEP):
                out = overload(*positional, **keywords)
        return out

    return step


def replay_bytes(config) -> int:
    """The inputs and one output alive at once (the spec's count), twice over for the allocator's
    rounding and a compiled variant's buffers."""
    return 2 * int(_request(config).spec.get("bytes", 0))


def replay_flops(config) -> int:
    return CALLS_PER_STEP * int(_request(config).spec.get("flops", 0))


WORKLOADS = (
    Workload(name=REPLAY_WORKLOAD, title="replay of one op of a trace",
             formula=f"{CALLS_PER_STEP}× the op, on inputs of its recorded shapes, dtypes and strides",
             build=build_replay, estimate_bytes=replay_bytes, flops=replay_flops, sizes=ReplayCall),
)
