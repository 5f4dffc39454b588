"""Pictures of graphs: ``to_dot`` writes a graph as Graphviz DOT text, ``render`` draws it (SVG, PNG, PDF).

Each op is one node, shaped and coloured by its ``OpGroup`` (variables are green boxes,
placeholders input arrows, constants small grey boxes, element-wise ops ellipses, dot, conv
and the other nn ops bold boxes, ...); each layer scope (``op.meta.scope``) becomes a nested
cluster labelled ``name : Kind``. Big graphs collapse: the scopes at one depth become single
nodes that count their ops, and the edges between them are merged, with counts.

Names are user text and may hold quotes, backslashes, ``<``, ``>`` and ``&``: every label is
an HTML-like label whose text is XML-escaped, and every tooltip a quoted string whose
backslashes are doubled, so no name can end a label or change the DOT around it.
``to_dot`` needs only the ``graphviz`` Python package; ``render`` needs Graphviz's ``dot``
program too (Debian: ``apt-get install graphviz``). Files are written atomically.
"""

from __future__ import annotations

import html
import itertools
import os
import shutil
import tempfile
from collections.abc import Iterable
from pathlib import Path
from typing import TYPE_CHECKING, Any

from ..errors import NgraphError
from ..ir import Graph, Op, OpGroup, OpType, ScopeEntry, format_axes, subgraphs, toposort

if TYPE_CHECKING:
    import graphviz

FORMATS = ("svg", "png", "pdf", "dot")  # "dot": the DOT text itself, which needs no ``dot`` program
GROUPINGS = ("scope", None)
HIGHLIGHT_COLOR = "#ff7070"  # no op style uses it, so a test can count the highlighted nodes
_HIGHLIGHT_PEN = {"color": "#b00000", "penwidth": "3"}
_CLUSTER_FILLS = ("#f3f6fa", "#e6edf5")  # alternate by depth so nested layers stay distinct
_COLLAPSED = {"shape": "folder", "style": "filled", "fillcolor": "#cfdcec"}
_MAX_EXPRESSION = 60

# the first group an op belongs to picks its style
_STYLES: tuple[tuple[frozenset[OpType], dict[str, str]], ...] = (
    (frozenset({OpType.VARIABLE}), {"shape": "box", "style": "filled", "fillcolor": "#8fd18a"}),
    (frozenset({OpType.PLACEHOLDER}), {"shape": "invhouse", "style": "filled", "fillcolor": "#9ecae1"}),
    (frozenset({OpType.CONSTANT}), {"shape": "box", "style": "filled,rounded", "fillcolor": "#e0e0e0",
                                    "fontsize": "8", "fontcolor": "#555555", "height": "0.2", "margin": "0.04"}),
    (OpGroup.RANDOM, {"shape": "box", "style": "filled,dashed", "fillcolor": "#fff2b3"}),
    (OpGroup.COMPILED, {"shape": "box3d", "style": "filled,bold", "fillcolor": "#ffd27f", "penwidth": "2"}),
    (OpGroup.CONTRACTION | OpGroup.NN, {"shape": "box", "style": "filled,bold", "fillcolor": "#fdae6b",
                                        "penwidth": "2"}),
    (OpGroup.ELEMENTWISE, {"shape": "ellipse", "style": "filled", "fillcolor": "#ffffff"}),
    (OpGroup.REDUCE, {"shape": "invtrapezium", "style": "filled", "fillcolor": "#dadaeb"}),
    (OpGroup.MOVEMENT, {"shape": "parallelogram", "style": "filled", "fillcolor": "#f2e6d9"}),
    (frozenset({OpType.SCAN, OpType.CALL}), {"shape": "doubleoctagon", "style": "filled", "fillcolor": "#c7e9c0"}),
    (OpGroup.CONTROL, {"shape": "hexagon", "style": "filled", "fillcolor": "#fbb4c4"}),
)

Unit = Op | tuple[ScopeEntry, ...]  # what a node stands for: one op, or a collapsed scope path


class VizError(NgraphError, ValueError):
    """A graph cannot be drawn: an unknown source, format or option, or no Graphviz ``dot`` program."""


def to_dot(source: Any, *, compiled: bool = False, group_by: str | None = "scope", highlight: Any = None,
           show_axes: bool = False, collapse: int | None = None, max_ops: int = 400,
           title: str | None = None) -> str:
    """The DOT text of a graph's picture; needs no ``dot`` program.

    Args:
        source: what to draw (see ``render``).
        compiled, group_by, highlight, show_axes, collapse, max_ops, title: as for ``render``.

    Returns:
        The DOT source (``digraph ngraph { ... }``); feed it to ``dot -Tsvg`` or any DOT viewer.

    Raises:
        VizError: an unknown source, grouping or option.

    Example:
        >>> text = ng.viz.to_dot(loss, show_axes=True)
        >>> "cluster_" in text   # one cluster per layer scope
        True
    """
    return _build(source, compiled=compiled, group_by=group_by, highlight=highlight, show_axes=show_axes,
                  collapse=collapse, max_ops=max_ops, title=title).source


def render(source: Any, path: str | os.PathLike[str] | None = None, *, format: str = "svg",  # noqa: A002
           compiled: bool = False, group_by: str | None = "scope", highlight: Any = None, show_axes: bool = False,
           collapse: int | None = None, max_ops: int = 400, title: str | None = None) -> graphviz.Digraph | Path:
    """Draw a graph with Graphviz; write it to ``path``, or return the ``graphviz.Digraph`` (it shows in Jupyter).

    Args:
        source: an ``Op``; an iterable of ops; a computation (``t.computation(...)``: its results as built,
            or with ``compiled=True`` the compiled ops, ``fused`` ones included); a compiled graph; an
            ``ir.Graph``; or any object with a ``__ngraph_ops__()`` method returning its root ops (a model).
        path: the file to write, with or without the format's extension (``"net"`` -> ``net.svg``);
            replaced atomically. None: write nothing and return the ``Digraph``.
        format: one of ``FORMATS``: ``"svg"``, ``"png"``, ``"pdf"``, or ``"dot"`` (the DOT text).
        compiled: draw a computation's compiled op order instead of the graph as built.
        group_by: ``"scope"`` nests each layer scope's ops in a cluster labelled ``name : Kind``;
            None draws the ops flat.
        highlight: ops to fill in ``HIGHLIGHT_COLOR`` with a bold outline: anything with ``.ops`` (a
            selector's ``Selection``), an op, or an iterable of ops. A collapsed scope holding one is
            highlighted too. Ops that are not drawn are ignored.
        show_axes: label each edge with its source's axes (``C=3, N=32``).
        collapse: draw the scopes at this depth (1: the outermost) as single nodes; 0 never collapses.
            None: collapse only when the graph has more than ``max_ops`` ops, at the deepest depth that
            leaves at most ``max_ops`` nodes (depth 1 if none does).
        max_ops: the most nodes drawn before collapsing (see ``collapse``).
        title: a heading over the picture.

    Returns:
        The ``Path`` written when ``path`` is given, else the ``graphviz.Digraph`` (its ``format`` set).

    Raises:
        VizError: an unknown source, format or option; a ``path`` whose extension names another
            format; no ``dot`` program for ``svg``/``png``/``pdf`` (hint: ``apt-get install graphviz``);
            ``dot`` failing.

    Example:
        >>> ng.viz.render(model, "model", highlight=model.select("Conv variable"))
        PosixPath('model.svg')
    """
    if format not in FORMATS:
        raise VizError(f"render: expected a format among {', '.join(FORMATS)}, received {format!r}; "
                       "hint: pick one of those, or use to_dot for the DOT text")
    target = None if path is None else _target(Path(path), format)
    if format != "dot":
        _require_dot(format)
    graph = _build(source, compiled=compiled, group_by=group_by, highlight=highlight, show_axes=show_axes,
                   collapse=collapse, max_ops=max_ops, title=title)
    graph.format = format
    if target is None:
        return graph
    _write(target, graph.source.encode() if format == "dot" else _pipe(graph, format))
    return target


# -- what to draw -------------------------------------------------------------------------------


def _compiled_graph(source: Any) -> Any:
    """``source``'s compiled graph (``.results`` and ``.order``): a computation's ``.graph``, or itself."""
    for candidate in (getattr(source, "graph", None), source):
        if hasattr(candidate, "results") and hasattr(candidate, "order") and not isinstance(candidate, Graph):
            return candidate
    return None


def _ops_of(source: Any, compiled: bool) -> list[Op]:
    """The ops to draw, sources first."""
    compiled_graph = _compiled_graph(source)
    if compiled:
        if compiled_graph is None:
            raise VizError(f"render: compiled=True draws a computation's compiled ops, received "
                           f"{type(source).__name__}; hint: pass t.computation(...), or drop compiled=True")
        return _checked(compiled_graph.order, "compiled order")
    if isinstance(source, Op):
        return toposort([source])
    if isinstance(source, Graph):
        return toposort([*source.params, *source.roots])
    if callable(getattr(source, "__ngraph_ops__", None)):
        return toposort(_checked(source.__ngraph_ops__(), "__ngraph_ops__()"))
    if compiled_graph is source:  # a compiled graph: its order is all there is
        return _checked(source.order, "compiled order")
    if compiled_graph is not None:  # a computation: its results, as built
        return toposort(_checked(source.results, "computation results"))
    if isinstance(source, Iterable) and not isinstance(source, (str, bytes)):
        return toposort(_checked(source, "ops"))
    raise VizError(f"render: expected an op, ops, a computation, an ir.Graph or an object with "
                   f"__ngraph_ops__(), received {type(source).__name__}; hint: pass the ops whose graph to draw")


def _checked(items: Iterable[Any], what: str) -> list[Op]:
    ops = list(items)
    bad = next((x for x in ops if not isinstance(x, Op)), None)
    if bad is not None or not ops:
        got = "nothing" if not ops else type(bad).__name__
        raise VizError(f"render: expected ops in {what}, received {got}; hint: pass the ops whose graph to draw")
    return ops


def _highlighted(highlight: Any) -> set[Op]:
    if highlight is None:
        return set()
    if isinstance(highlight, Op):
        return {highlight}
    ops = getattr(highlight, "ops", highlight)
    ops = ops() if callable(ops) else ops
    if not isinstance(ops, Iterable) or isinstance(ops, (str, bytes)):
        raise VizError(f"render: expected highlight to be ops or a selection with .ops, received "
                       f"{type(highlight).__name__}; hint: pass model.select(query) or a list of ops")
    ops = list(ops)
    return set(_checked(ops, "highlight")) if ops else set()


def _collapse_depth(ops: list[Op], collapse: int | None, max_ops: int) -> int:
    """The scope depth drawn as single nodes (0: none)."""
    for value, name, least in ((collapse, "collapse", 0), (max_ops, "max_ops", 1)):
        if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < least):
            raise VizError(f"render: expected {name} to be an int >= {least}, received {value!r}")
    if collapse is not None:
        return collapse
    if len(ops) <= max_ops:
        return 0
    deepest = max(len(op.meta.scope) for op in ops)
    # a deeper cut keeps more detail and never draws fewer nodes: take the deepest that fits
    return next((d for d in range(deepest, 0, -1) if len({_unit(op, d) for op in ops}) <= max_ops), 1 if deepest else 0)


def _unit(op: Op, depth: int) -> Unit:
    return op.meta.scope[:depth] if depth and len(op.meta.scope) >= depth else op


# -- labels (user text: always escaped) ---------------------------------------------------------


def _html(*lines: str, bold_first: bool = True) -> str:
    """An HTML-like DOT label: one escaped line each, the first in bold."""
    parts = [html.escape(line) for line in lines]
    if bold_first and parts:
        parts[0] = f"<B>{parts[0]}</B>"
    return "<" + "<BR/>".join(parts) + ">"


def _tooltip(text: str) -> str:
    import graphviz

    return graphviz.escape(text)  # backslashes doubled; the package quotes the rest


def _scope_text(entry: ScopeEntry) -> str:
    return entry.name if entry.kind in ("", entry.name) else f"{entry.name} : {entry.kind}"


def _axes_text(op: Op) -> str:
    return ", ".join(f"{a.name}={a.length}" for a in op.axes) or "scalar"


def _op_lines(op: Op) -> list[str]:
    lines = [op.op.value]
    if op.meta.name:
        lines.append(op.meta.name)
    if op.op is OpType.FUSED and hasattr(op.arg, "expression"):
        text = op.arg.expression()
        lines.append(text if len(text) <= _MAX_EXPRESSION else text[:_MAX_EXPRESSION - 3] + "...")
    elif op.op is OpType.CONSTANT and type(op.arg) in (int, float):
        lines.append(f"{op.arg:g}")
    for graph in subgraphs(op):
        lines.append(f"body: {len(graph.order)} ops")
    return lines


def _style(op: Op) -> dict[str, str]:
    return dict(next((style for group, style in _STYLES if op.op in group), {"shape": "ellipse"}))


# -- the picture --------------------------------------------------------------------------------


def _build(source: Any, *, compiled: bool, group_by: str | None, highlight: Any, show_axes: bool,
           collapse: int | None, max_ops: int, title: str | None) -> graphviz.Digraph:
    try:
        import graphviz
    except ImportError as e:  # pragma: no cover - a dependency in setup.cfg
        raise VizError("render: the graphviz Python package is missing; hint: pip install graphviz==0.21") from e
    if group_by not in GROUPINGS:
        raise VizError(f"render: expected group_by among {GROUPINGS}, received {group_by!r}")
    ops = _ops_of(source, compiled)
    marked = _highlighted(highlight)
    depth = _collapse_depth(ops, collapse, max_ops)

    members: dict[Unit, list[Op]] = {}
    for op in ops:
        members.setdefault(_unit(op, depth), []).append(op)
    ids = {unit: f"n{i}" for i, unit in enumerate(members)}
    # each node sits in the cluster of its scope (a collapsed scope: in its parent's)
    placed: dict[tuple[ScopeEntry, ...], list[Unit]] = {}
    children: dict[tuple[ScopeEntry, ...], list[tuple[ScopeEntry, ...]]] = {}
    for unit in members:
        where = () if group_by is None else (unit.meta.scope if isinstance(unit, Op) else unit[:-1])
        placed.setdefault(where, []).append(unit)
        for k in range(1, len(where) + 1):
            siblings = children.setdefault(where[:k - 1], [])
            if where[:k] not in siblings:
                siblings.append(where[:k])

    graph = graphviz.Digraph("ngraph", graph_attr={"rankdir": "TB", "fontname": "Helvetica"},
                             node_attr={"fontname": "Helvetica", "fontsize": "10"},
                             edge_attr={"fontname": "Helvetica", "fontsize": "8", "color": "#555555"})
    if title:
        graph.attr(label=_html(title), labelloc="t", fontsize="14")
    counter = itertools.count()

    def add_nodes(into: graphviz.Digraph, where: tuple[ScopeEntry, ...]) -> None:
        for unit in placed.get(where, ()):
            inside = members[unit]
            if isinstance(unit, Op):
                attrs = _style(unit)
                where_text = "/".join(e.name for e in unit.meta.scope) or "(top level)"
                attrs["tooltip"] = _tooltip(" ".join(filter(None, (unit.op.value, unit.meta.name)))
                                            + f" {format_axes(unit.axes)} {unit.dtype} in {where_text}")
                label = _html(*_op_lines(unit))
            else:
                attrs = dict(_COLLAPSED)
                attrs["tooltip"] = _tooltip("/".join(e.name for e in unit))
                label = _html(_scope_text(unit[-1]), f"{len(inside)} ops")
            if marked.intersection(inside):
                attrs.update(fillcolor=HIGHLIGHT_COLOR, **_HIGHLIGHT_PEN)
                attrs["style"] = "filled,bold" + (",rounded" if "rounded" in attrs.get("style", "") else "")
            into.node(ids[unit], label=label, **attrs)
        for scope in children.get(where, ()):
            with into.subgraph(name=f"cluster_{next(counter)}") as cluster:
                cluster.attr(label=_html(_scope_text(scope[-1])), style="rounded,filled",
                             fillcolor=_CLUSTER_FILLS[(len(scope) - 1) % 2], color="#8c9db5", fontsize="11",
                             tooltip=_tooltip("/".join(e.name for e in scope)))
                add_nodes(cluster, scope)

    add_nodes(graph, ())
    drawn = set(ops)
    edges: dict[tuple[Unit, Unit], list[Op]] = {}  # merged: one edge per pair of nodes, with a count
    for op in ops:
        for src in op.src:
            ends = (_unit(src, depth), _unit(op, depth))
            if src in drawn and ends[0] != ends[1]:  # not an edge inside one collapsed scope
                edges.setdefault(ends, []).append(src)
    for (tail, head), srcs in edges.items():
        text = [_axes_text(srcs[0])] if show_axes and isinstance(tail, Op) else []
        if len(srcs) > 1:
            text.append(f"\u00d7{len(srcs)}")
        graph.edge(ids[tail], ids[head], **({"label": _html(*text, bold_first=False)} if text else {}))
    return graph


# -- files ----------------------------------------------------------------------------------------


def _target(path: Path, format: str) -> Path:  # noqa: A002
    suffix = path.suffix.lower().lstrip(".")
    if suffix == format:
        return path
    if suffix in FORMATS:
        raise VizError(f"render: the path {str(path)!r} names format {suffix!r} but format={format!r}; "
                       f"hint: pass format={suffix!r}, or a path without that extension")
    return path.with_name(f"{path.name}.{format}")


def _require_dot(format: str) -> None:  # noqa: A002
    if shutil.which("dot") is None:
        raise VizError(f"render: format {format!r} needs Graphviz's dot program, which is not on PATH; "
                       "hint: apt-get install graphviz (or brew install graphviz), or use to_dot / format='dot'")


def _pipe(graph: graphviz.Digraph, format: str) -> bytes:  # noqa: A002
    import graphviz

    try:
        return graph.pipe(format=format)
    except graphviz.ExecutableNotFound as e:
        raise VizError("render: Graphviz's dot program is not on PATH; hint: apt-get install graphviz") from e
    except graphviz.CalledProcessError as e:
        err = (e.stderr or b"").decode(errors="replace").strip()
        raise VizError(f"render: dot failed drawing {format}: {err}; hint: check the DOT with to_dot") from e


def _write(path: Path, data: bytes) -> None:
    """Write ``data`` to ``path`` atomically: a temporary file beside it, then a rename over it."""
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    try:
        with os.fdopen(fd, "wb") as f:
            f.write(data)
        os.chmod(tmp, 0o644)  # mkstemp makes it private; the picture is an ordinary file
        os.replace(tmp, path)
    except BaseException:
        os.unlink(tmp)
        raise
