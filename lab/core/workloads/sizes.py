"""A workload's sizes, typed and named for what they mean.

``RunConfig`` carries every workload's sizes in three integers, ``m``, ``k`` and ``n`` (the form's
three sliders, the CLI's ``--m/--k/--n``, the samples' manifest). What they mean depends on the
workload: a GEMM's M×K by K×N, an attention's tokens, head dim and heads, a row loop's rows and
columns. Each ``Sizes`` class names them once: its fields are what the workload's builder and
cost model read (``Rows.of(config).rows``, never ``config.m``), and ``CARRIED`` says which field
travels in ``m``, ``k`` and ``n`` (None: that one is unused and left at 1). A lesson's run is
written in these (``lab.lessons.schema.lesson_run``) and becomes the ``RunConfig`` a worker
receives through ``dims``.
"""

from __future__ import annotations

from dataclasses import dataclass, fields
from typing import ClassVar, Protocol, TypeVar

__all__ = ["Attention", "GemmShape", "HostCopy", "MatmulChain", "Mlp", "Rows", "SmallOps", "Sizes"]

S = TypeVar("S", bound="Sizes")


class _Dims(Protocol):
    @property
    def m(self) -> int: ...
    @property
    def k(self) -> int: ...
    @property
    def n(self) -> int: ...


@dataclass(frozen=True, kw_only=True)
class Sizes:
    """The base: ``CARRIED`` (the field held in ``m``, ``k``, ``n``, in that order; None: unused)
    and ``LABELS`` (how the form labels the three sliders for this workload)."""

    CARRIED: ClassVar[tuple[str | None, str | None, str | None]] = ("m", "k", "n")
    LABELS: ClassVar[tuple[str, str, str]] = ("M", "K", "N")

    def dims(self) -> tuple[int, int, int]:
        """The ``m``, ``k`` and ``n`` of the ``RunConfig`` that carries these sizes."""
        m, k, n = (int(getattr(self, name)) if name else 1 for name in self.CARRIED)
        return m, k, n

    @classmethod
    def of(cls: type[S], config: _Dims) -> S:
        """These sizes, read back from a config's ``m``, ``k`` and ``n``."""
        return cls(**{name: getattr(config, dim) for dim, name in zip("mkn", cls.CARRIED) if name})

    @classmethod
    def names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


@dataclass(frozen=True, kw_only=True)
class GemmShape(Sizes):
    """A matrix product x (M×K) @ w (K×N)."""

    m: int
    k: int
    n: int


@dataclass(frozen=True, kw_only=True)
class Attention(Sizes):
    """Attention over one sequence: q, k and v are heads × tokens × head_dim (batch 1)."""

    CARRIED = ("tokens", "head_dim", "heads")
    LABELS = ("tokens", "head dim", "heads")
    tokens: int
    head_dim: int
    heads: int


@dataclass(frozen=True, kw_only=True)
class Mlp(Sizes):
    """An MLP on ``rows`` inputs of ``model_dim`` features, with ``hidden_dim`` hidden features."""

    CARRIED = ("rows", "model_dim", "hidden_dim")
    LABELS = ("rows", "model dim", "hidden dim")
    rows: int
    model_dim: int
    hidden_dim: int


@dataclass(frozen=True, kw_only=True)
class MatmulChain(Sizes):
    """``matmuls`` products in a row: y (rows × width) @ w (width × width), each on the last one's result."""

    CARRIED = ("rows", "width", "matmuls")
    LABELS = ("rows", "width", "matmuls per step")
    rows: int
    width: int
    matmuls: int


@dataclass(frozen=True, kw_only=True)
class Rows(Sizes):
    """A rows × columns tensor handled row by row (or as a whole)."""

    CARRIED = ("rows", "columns", None)
    LABELS = ("rows", "columns", "unused")
    rows: int
    columns: int


@dataclass(frozen=True, kw_only=True)
class SmallOps(Sizes):
    """``iterations`` elementwise steps on a rows × columns tensor."""

    CARRIED = ("rows", "columns", "iterations")
    LABELS = ("rows", "columns", "iterations")
    rows: int
    columns: int
    iterations: int


@dataclass(frozen=True, kw_only=True)
class HostCopy(Sizes):
    """``copies`` host → device copies per step of a rows × columns host tensor."""

    CARRIED = ("rows", "columns", "copies")
    LABELS = ("rows", "columns", "copies per step")
    rows: int
    columns: int
    copies: int
