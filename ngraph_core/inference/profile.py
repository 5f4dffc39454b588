"""Per-layer performance counters, printed like OpenVINO's ``benchmark_app -pc`` table.

A transformer made with ``profile=True`` wraps every kernel it binds into a compiled plan so that
each call adds its time (``time.perf_counter_ns``), one call and its output's bytes to
``transformer.profile_counters[op]``; the plan's source is unchanged and an unprofiled
transformer pays nothing. This module turns those counters into rows — one per op, and one per
layer scope (the ops a layer created, summed) — and prints them.

On a GPU backend a kernel call only enqueues work, so the times are launch times, not device time.

Example:
    >>> with ng.transformers.make_transformer(profile=True) as t:
    ...     f = t.computation(y, x); f(batch); f(batch)
    ...     print(format_counters(collect_counters(t)))
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from ..errors import NgraphError
from ..ir import Op

__all__ = ["LayerCounter", "OpCounter", "ProfileError", "ProfileReport", "collect_counters", "format_counters",
           "layer_of"]


class ProfileError(NgraphError, ValueError):
    """Counters asked of something that was not profiled (a transformer made without ``profile=True``)."""


@dataclass(frozen=True)
class OpCounter:
    """What one op of a compiled plan cost.

    Attributes:
        name: the op's name (``dot_3`` style names for unnamed ops).
        kind: the op kind (``OpType`` value, e.g. ``dot``, ``conv``, ``fused``).
        layer: the scope path of the layer that made it (``Sequential_0/Affine_1``), ``""`` outside layers.
        real_ns: nanoseconds spent in its kernel, over all calls.
        calls: how many times its kernel ran.
        bytes: bytes its kernel wrote per call (its output's ``nbytes``).
    """

    name: str
    kind: str
    layer: str
    real_ns: int
    calls: int
    bytes: int

    @property
    def status(self) -> str:
        """``EXECUTED`` when the kernel ran at least once, else ``NOT_RUN`` (OpenVINO's words)."""
        return "EXECUTED" if self.calls else "NOT_RUN"


@dataclass(frozen=True)
class LayerCounter:
    """The ops of one layer scope, summed.

    Attributes:
        layer: the scope path (``""``: ops made outside any layer).
        kinds: the op kinds it ran, in plan order, without repeats.
        real_ns: nanoseconds over all its ops and calls.
        calls: runs of the layer (the most calls of any of its ops: one run calls each op once).
        bytes: bytes its ops wrote per run.
        ops: how many ops it holds.
    """

    layer: str
    kinds: tuple[str, ...]
    real_ns: int
    calls: int
    bytes: int
    ops: int


@dataclass(frozen=True)
class ProfileReport:
    """The counters of a profiled transformer, one row per op in plan order.

    Attributes:
        ops: one ``OpCounter`` per op that got a kernel.
    """

    ops: tuple[OpCounter, ...]

    @property
    def total_ns(self) -> int:
        """Nanoseconds over every kernel call."""
        return sum(c.real_ns for c in self.ops)

    def layers(self, depth: int | None = None) -> tuple[LayerCounter, ...]:
        """The per-op rows summed per layer scope, in the order each layer first appears.

        Args:
            depth: sum at this many scope levels (``2``: ``Sequential_0/hidden`` holds its
                ``Linear_0``, ``Bias_0``...); default: the full scope path of each op.

        Raises:
            ProfileError: a depth below 1.
        """
        if depth is not None and depth < 1:
            raise ProfileError(f"performance counters: expected a scope depth >= 1, received {depth}; "
                               "hint: 1 sums per outermost layer, None keeps full scope paths")
        groups: dict[str, list[OpCounter]] = {}
        for c in self.ops:
            key = c.layer if depth is None else "/".join(c.layer.split("/")[:depth])
            groups.setdefault(key, []).append(c)
        return tuple(LayerCounter(layer, tuple(dict.fromkeys(c.kind for c in rows)),
                                  sum(c.real_ns for c in rows), max(c.calls for c in rows),
                                  sum(c.bytes for c in rows), len(rows))
                     for layer, rows in groups.items())


def layer_of(op: Op) -> str:
    """The scope path of ``op`` as ``Outer/Inner`` layer names (``""`` outside any layer).

    Example:
        >>> layer_of(affine_dot)
        'Sequential_0/Affine_1'
    """
    return "/".join(str(entry) for entry in op.meta.scope)


def collect_counters(profiled: Any) -> ProfileReport:
    """The counters of a profiled transformer, or of an object holding one in ``.transformer``.

    Args:
        profiled: a transformer made with ``profile=True`` (``make_transformer(profile=True)``,
            ``Model(..., profile=True)``), or an object with such a ``transformer`` attribute.

    Returns:
        a ``ProfileReport`` with a row per op that got a kernel, in compile order.

    Raises:
        ProfileError: ``profiled`` has no profiling transformer.

    Example:
        >>> report = collect_counters(t)
        >>> report.ops[0].calls
        3
    """
    transformer = profiled if hasattr(profiled, "profile_counters") else getattr(profiled, "transformer", None)
    if transformer is None or not getattr(transformer, "profile", False):
        raise ProfileError(
            f"performance counters: expected a transformer made with profile=True, received "
            f"{type(profiled).__name__}; hint: make_transformer(profile=True), or compile with profiling on"
        )
    rows = []
    for op, (ns, calls, nbytes) in list(transformer.profile_counters.items()):
        rows.append(OpCounter(op.name, op.op.value, layer_of(op), ns, calls, nbytes // calls if calls else 0))
    return ProfileReport(tuple(rows))


def _table(header: tuple[str, ...], rows: Iterable[tuple[str, ...]]) -> list[str]:
    rows = list(rows)
    widths = [max(len(h), *(len(r[i]) for r in rows)) if rows else len(h) for i, h in enumerate(header)]
    numeric = {i for i, h in enumerate(header) if h.startswith(("real", "calls", "bytes", "%"))}
    line = lambda cells: "  ".join(c.rjust(w) if i in numeric else c.ljust(w)  # noqa: E731 - a local formatter
                                   for i, (c, w) in enumerate(zip(cells, widths))).rstrip()
    return [line(header), line(tuple("-" * w for w in widths))] + [line(r) for r in rows]


def format_counters(report: ProfileReport, per_op: bool = True, top: int | None = None,
                    depth: int | None = None) -> str:
    """The ``-pc`` table: per layer (name, op kinds, status, real time, calls, bytes, share), then per op.

    Args:
        report: ``collect_counters``'s result.
        per_op: also print one row per op under the layer table.
        top: print only the ``top`` slowest rows of each table (default: all, in plan order).
        depth: scope levels the layer table sums at (``ProfileReport.layers``); default: full paths.

    Returns:
        the table as text, ending with the total time.

    Example:
        >>> print(format_counters(collect_counters(t), per_op=False))
        layer                  op kinds  status    real time (ms)  calls  bytes  %
        Sequential_0/Affine_0  dot,add   EXECUTED           0.012      3    256  61.3
        ...
    """
    total = report.total_ns or 1
    layers = list(report.layers(depth))
    if top is not None:
        layers = sorted(layers, key=lambda c: -c.real_ns)[:top]
    lines = _table(("layer", "op kinds", "status", "real time (ms)", "calls", "bytes", "%"), (
        (c.layer or "(outside layers)", ",".join(c.kinds), "EXECUTED" if c.calls else "NOT_RUN",
         f"{c.real_ns / 1e6:.3f}", str(c.calls), str(c.bytes), f"{100 * c.real_ns / total:.1f}")
        for c in layers))
    if per_op:
        ops = list(report.ops) if top is None else sorted(report.ops, key=lambda c: -c.real_ns)[:top]
        lines += [""] + _table(("op", "kind", "layer", "status", "real time (ms)", "calls", "bytes"), (
            (c.name, c.kind, c.layer or "-", c.status, f"{c.real_ns / 1e6:.3f}", str(c.calls), str(c.bytes))
            for c in ops))
    lines.append(f"Total time: {report.total_ns / 1e6:.3f} ms over {sum(c.calls for c in report.ops)} kernel calls")
    return "\n".join(lines)
