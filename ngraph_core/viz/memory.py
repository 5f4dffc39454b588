"""Pictures of compiled computations: ``memory_plot`` draws a memory plan (the seed's green/red bars).

Drawn with matplotlib's Agg renderer on a private ``Figure`` (never ``pyplot``), so it
needs no display and leaves matplotlib's global state alone. Files are written
atomically: to a temporary file beside the target, then renamed over it.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path
from typing import Any

from ..passes.memory import UNITS, MemoryPlan, format_bytes

_LIVE_COLOR, _OWN_COLOR, _IN_PLACE_COLOR, _ARENA_COLOR = "#d62728", "#2ca02c", "#98df8a", "#1f77b4"


def _plan_of(source: Any) -> MemoryPlan:
    if isinstance(source, MemoryPlan):
        return source
    plan = getattr(source, "memory_plan", None)
    if callable(plan):
        plan = plan()
    if not isinstance(plan, MemoryPlan):
        raise TypeError(
            f"memory_plot: expected a MemoryPlan or an object with a .memory_plan (a compiled computation), "
            f"received {type(source).__name__}; hint: pass plan_memory(order, results) or a computation"
        )
    return plan


def memory_plot(source: Any, path: str | os.PathLike[str], *, title: str | None = None,
                max_labels: int = 200) -> Path:
    """Draw a memory plan as a PNG: per step, the step's own buffer and the bytes live, with the arena size.

    Green bars are the bytes of the buffer each step's op writes (light green: written over
    a source's buffer, in place); red bars the bytes of every arena buffer live at that
    step; the blue line is the arena. The title compares the arena with no reuse.

    Args:
        source: a ``MemoryPlan``, or an object with a ``memory_plan`` attribute (a computation).
        path: the PNG file to write (its folder must exist); replaced atomically.
        title: replaces the default title.
        max_labels: label each step with its op when the plan has at most this many steps.

    Returns:
        ``path`` as a ``Path``.

    Raises:
        TypeError: ``source`` has no memory plan.

    Example:
        >>> memory_plot(plan_memory(order, results), "memory.png")
    """
    from matplotlib.backends.backend_agg import FigureCanvasAgg
    from matplotlib.figure import Figure

    plan, path = _plan_of(source), Path(path)
    steps = list(range(len(plan.order)))
    unit_name, unit = next((u for u in UNITS if max(plan.arena_bytes, plan.peak_live_bytes) >= u[1]), UNITS[-1])
    scale = 1.0 / unit
    own = [b * scale for b in plan.op_bytes]
    in_place = [b if op in plan.in_place else 0.0 for op, b in zip(plan.order, own, strict=True)]
    fresh = [b if op not in plan.in_place else 0.0 for op, b in zip(plan.order, own, strict=True)]

    fig = Figure(figsize=(min(max(8.0, 0.2 * len(steps)), 40.0), 5.0), dpi=100, layout="constrained")
    FigureCanvasAgg(fig)
    ax = fig.add_subplot()
    ax.bar(steps, [b * scale for b in plan.live_bytes], width=0.9, color=_LIVE_COLOR, alpha=0.55,
           label="live at this step")
    ax.bar(steps, fresh, width=0.5, color=_OWN_COLOR, label="op's own buffer")
    if any(in_place):
        ax.bar(steps, in_place, width=0.5, color=_IN_PLACE_COLOR, label="op's buffer, in place")
    ax.axhline(plan.arena_bytes * scale, color=_ARENA_COLOR, linestyle="--", linewidth=1.5,
               label=f"arena ({format_bytes(plan.arena_bytes)})")
    ax.set_xlabel("step")
    ax.set_ylabel(unit_name)
    ax.set_xlim(-1, max(len(steps), 1))
    if 0 < len(steps) <= max_labels:
        ax.set_xticks(steps, [f"{i} {op.op.value}" for i, op in enumerate(plan.order)], rotation=90, fontsize=7)
    fig.suptitle(title or (
        f"memory plan: arena {format_bytes(plan.arena_bytes)} vs {format_bytes(plan.unplanned_bytes)} "
        f"without reuse ({plan.report().reuse_ratio:.2f}x), {len(plan.in_place)} ops in place"
    ))
    ax.set_ylim(0, 1.05 * max(plan.arena_bytes, plan.peak_live_bytes, 1) * scale)
    ax.legend(loc="lower left", bbox_to_anchor=(0.0, 1.0), ncols=4, fontsize=8, frameon=False)
    ax.grid(axis="y", alpha=0.3)

    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            fig.savefig(f, format="png")
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the picture is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
    return path
