"""viz.render / viz.to_dot: scopes as clusters, op styles, highlights, axes labels, collapsing, escaping, files."""

from __future__ import annotations

import html
import re
import shutil
import types
import xml.etree.ElementTree as ET

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.ir import Graph
from ngraph_core.viz import FORMATS, HIGHLIGHT_COLOR, VizError, render, to_dot

needs_dot = pytest.mark.skipif(shutil.which("dot") is None,
                               reason="Graphviz's dot program is not installed (apt-get install graphviz)")
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"
ODD = 'q"uo\\te <b>&amp; \\'  # a quote, backslashes (one at the end), markup and an entity


# -- a small parser for the DOT the graphviz package writes (one statement per line) ----------------


def _value(text: str, i: int) -> tuple[str, int]:
    """The attribute value starting at ``text[i]`` (quoted, <html> or bare) and the index after it."""
    if text[i] == '"':
        j = i + 1
        while text[j] != '"':
            j += 2 if text[j] == "\\" else 1
        return text[i + 1:j], j + 1
    if text[i] == "<":
        depth, j = 0, i
        while True:
            depth += {"<": 1, ">": -1}.get(text[j], 0)
            j += 1
            if depth == 0:
                return text[i + 1:j - 1], j
    m = re.match(r"[^\s\]]+", text[i:])
    return m.group(0), i + m.end()


def _attrs(text: str) -> dict[str, str]:
    out, i = {}, 0
    while (m := re.compile(r"\s*(\w+)=").match(text, i)) is not None:
        out[m.group(1)], i = _value(text, m.end())
    return out


def _text(label: str) -> str:
    """An HTML-like label's text: tags dropped, lines joined by a space, entities decoded."""
    return " ".join(html.unescape(re.sub(r"<[^>]*>", "", line)) for line in label.split("<BR/>"))


def parse_dot(dot: str) -> tuple[dict[str, dict], list[tuple[str, str, dict]], list[tuple[str, ...]]]:
    """``(nodes, edges, clusters)``: each node's attributes plus ``text`` and ``cluster`` (the
    cluster labels it is nested in); edges as ``(tail, head, attrs)``; each cluster's label path."""
    nodes, edges, clusters, stack = {}, [], [], []
    for line in dot.splitlines():
        s = line.strip()
        if s.startswith("subgraph cluster_"):
            stack.append(None)
        elif s == "}":
            if stack:
                stack.pop()
        elif stack and stack[-1] is None and s.startswith("color="):
            stack[-1] = _text(_attrs(s)["label"])
            clusters.append(tuple(stack))
        elif m := re.match(r"(n\d+) -> (n\d+)(?: \[(.*)\])?$", s):
            edges.append((m.group(1), m.group(2), _attrs(m.group(3) or "")))
        elif m := re.match(r"(n\d+) \[(.*)\]$", s):
            attrs = _attrs(m.group(2))
            nodes[m.group(1)] = {**attrs, "text": _text(attrs["label"]), "cluster": tuple(stack)}
    return nodes, edges, clusters


def by_text(nodes: dict[str, dict], text: str) -> str:
    (found,) = [k for k, v in nodes.items() if v["text"] == text]
    return found


# -- the graph under test --------------------------------------------------------------------------------


def two_scopes():
    """conv1 (Conv) -> head (Affine) -> a sum outside; head reads conv1's output twice (h * h)."""
    C, H, N = ng.make_axis(3, name="C"), ng.make_axis(5, name="H"), ng.make_axis(4, name="N")
    X = ng.placeholder([C, N]).named("X")
    with ng.name_scope("conv1", kind="Conv"):
        W1 = ng.variable([H, C], initial_value=0.1).named("W1")
        h = ng.relu(ng.dot(W1, X)).named("h")
    with ng.name_scope("head", kind="Affine"):
        W2 = ng.variable([H], initial_value=0.2).named("W2")
        y = ng.dot(W2, h * h).named("y")
    z = ng.sum(y).named("z")
    return types.SimpleNamespace(X=X, W1=W1, h=h, W2=W2, y=y, z=z, ops=ng.ordered_ops([z]))


def test_scopes_become_labelled_clusters_with_one_node_per_op():
    g = two_scopes()
    nodes, edges, clusters = parse_dot(to_dot(g.z))
    assert sorted(clusters) == [("conv1 : Conv",), ("head : Affine",)]
    assert len(nodes) == len(g.ops)
    for text, cluster in (("variable W1", ("conv1 : Conv",)), ("relu h", ("conv1 : Conv",)),
                          ("variable W2", ("head : Affine",)), ("dot y", ("head : Affine",)),
                          ("placeholder X", ()), ("sum z", ())):
        assert nodes[by_text(nodes, text)]["cluster"] == cluster, text
    # one edge per (source, consumer) pair; h * h reads h twice: one edge counted x2
    assert len(edges) == len({(s, op) for op in g.ops for s in op.src})
    mul = next(k for k, v in nodes.items() if v["text"] == "mul")
    (twice,) = [e for e in edges if e[0] == by_text(nodes, "relu h") and e[1] == mul]
    assert _text(twice[2]["label"]) == "\u00d72"
    flat, _, flat_clusters = parse_dot(to_dot(g.z, group_by=None))
    assert flat_clusters == [] and all(v["cluster"] == () for v in flat.values()) and len(flat) == len(g.ops)


def test_op_kinds_are_styled_by_group():
    nodes, _, _ = parse_dot(to_dot(two_scopes().z))
    style = {v["text"]: (v["shape"], v.get("fillcolor"), v.get("style", "")) for v in nodes.values()}
    assert style["variable W1"] == ("box", "#8fd18a", "filled")
    assert style["placeholder X"][0] == "invhouse"
    assert style["relu h"][0] == "ellipse" and style["sum z"][0] == "invtrapezium"
    assert style["dot y"][0] == "box" and "bold" in style["dot y"][2]
    assert HIGHLIGHT_COLOR not in {v[1] for v in style.values()}


def test_highlight_marks_exactly_the_given_ops():
    g = two_scopes()
    for highlight in (types.SimpleNamespace(ops=[g.W1, g.W2]), [g.W1, g.W2], (op for op in (g.W1, g.W2))):
        nodes, _, _ = parse_dot(to_dot(g.z, highlight=highlight))
        marked = sorted(v["text"] for v in nodes.values() if v.get("fillcolor") == HIGHLIGHT_COLOR)
        assert marked == ["variable W1", "variable W2"]
        assert all(nodes[by_text(nodes, t)]["penwidth"] == "3" for t in marked)
    nodes, _, _ = parse_dot(to_dot(g.z, highlight=g.h))
    assert [v["text"] for v in nodes.values() if v.get("fillcolor") == HIGHLIGHT_COLOR] == ["relu h"]
    with pytest.raises(VizError, match="highlight"):
        to_dot(g.z, highlight=[g.W1, "W2"])


def test_show_axes_labels_each_edge_with_its_source_axes():
    g = two_scopes()
    nodes, edges, _ = parse_dot(to_dot(g.z, show_axes=True))
    label = {(nodes[a]["text"], nodes[b]["text"]): _text(attrs.get("label", "")) for a, b, attrs in edges}
    assert label[("placeholder X", "dot")] == "C=3, N=4"
    assert label[("variable W1", "dot")] == "H=5, C=3"
    assert label[("dot y", "sum z")] == "N=4"
    assert label[("relu h", "mul")] == "H=5, N=4 \u00d72"
    _, plain, _ = parse_dot(to_dot(g.z))
    assert not any("×" not in _text(attrs.get("label", "×")) for _, _, attrs in plain)  # only counts


def test_collapse_draws_each_scope_at_the_depth_as_one_node():
    g = two_scopes()
    outside = [op for op in g.ops if not op.meta.scope]
    in_conv = sum(1 for op in g.ops if op.meta.scope and op.meta.scope[0].name == "conv1")
    nodes, edges, clusters = parse_dot(to_dot(g.z, collapse=1, highlight=[g.W2]))
    assert len(nodes) == 2 + len(outside) and clusters == []
    conv = by_text(nodes, f"conv1 : Conv {in_conv} ops")
    head = next(k for k, v in nodes.items() if v["text"].startswith("head : Affine"))
    assert nodes[head]["fillcolor"] == HIGHLIGHT_COLOR and nodes[conv]["fillcolor"] != HIGHLIGHT_COLOR
    (merged,) = [attrs for a, b, attrs in edges if (a, b) == (conv, head)]  # h feeds mul twice: one edge
    assert _text(merged["label"]) == "\u00d72"
    assert len(edges) == len({(a, b) for a, b, _ in edges})
    # too many ops for max_ops collapses by itself; collapse=0 draws every op anyway
    assert len(parse_dot(to_dot(g.z, max_ops=len(nodes)))[0]) == len(nodes)
    assert len(parse_dot(to_dot(g.z, max_ops=3, collapse=0))[0]) == len(g.ops)


def test_automatic_collapse_keeps_the_deepest_scopes_that_fit():
    C = ng.make_axis(2, name="C")
    x = ng.placeholder([C]).named("x")
    with ng.name_scope("net", kind="Sequential"):
        for i in range(3):
            with ng.name_scope(f"layer{i}", kind="Affine"):
                x = ng.tanh(x * float(i + 2) + 1.0)
    ops = ng.ordered_ops([x])
    nodes, _, clusters = parse_dot(to_dot(x, max_ops=4))  # depth 2: x and three layers
    assert len(nodes) == 4 and clusters == [("net : Sequential",)]
    assert sorted(v["text"].split(" : ")[0] for v in nodes.values())[:3] == ["layer0", "layer1", "layer2"]
    nodes, _, _ = parse_dot(to_dot(x, max_ops=3))  # nothing fits: depth 1
    assert len(nodes) == 2 and len(ops) > 3


def test_odd_names_cannot_break_the_dot():
    C = ng.make_axis(2, name=ODD)
    with ng.name_scope(ODD, kind="Odd"):
        x = ng.placeholder([C]).named(ODD)
        y = ng.exp(x).named("<<B>>")
    dot = to_dot(y, show_axes=True, title=ODD)
    nodes, edges, clusters = parse_dot(dot)
    assert {v["text"] for v in nodes.values()} == {f"placeholder {ODD}", "exp <<B>>"}
    assert clusters == [(f"{ODD} : Odd",)]
    assert _text(edges[0][2]["label"]) == f"{ODD}=2"
    assert not any("<b>" in v["label"] or "<<B>>" in v["label"] for v in nodes.values())  # text, never tags
    # tooltips are quoted escStrings: undoing \\ and \" gives the names back
    tooltip = re.sub(r"\\(.)", r"\1", nodes[by_text(nodes, f"placeholder {ODD}")]["tooltip"])
    assert tooltip == f"placeholder {ODD} [{ODD}:2] float32 in {ODD}"


@needs_dot
def test_odd_names_render_as_their_text(tmp_path):
    C = ng.make_axis(2, name="C")
    with ng.name_scope(ODD, kind="Odd"):
        y = ng.exp(ng.placeholder([C]).named(ODD))
    path = render(y, tmp_path / "odd", title=ODD, show_axes=True)
    texts = {t.text for t in ET.parse(path).iter("{http://www.w3.org/2000/svg}text")}
    assert {ODD, f"{ODD} : Odd"} <= texts


@needs_dot
def test_render_writes_an_svg_atomically(tmp_path):
    g = two_scopes()
    path = render(g.z, tmp_path / "net", title="two scopes")
    assert path == tmp_path / "net.svg"
    root = ET.parse(path).getroot()
    assert root.tag == "{http://www.w3.org/2000/svg}svg"
    assert len([e for e in root.iter("{http://www.w3.org/2000/svg}g") if e.get("class") == "node"]) == len(g.ops)
    texts = {t.text for t in root.iter("{http://www.w3.org/2000/svg}text")}
    assert {"conv1 : Conv", "head : Affine", "two scopes", "W1"} <= texts
    assert render(g.z, str(tmp_path / "net.svg"), collapse=1) == path  # the extension may be given; replaced
    assert [p.name for p in tmp_path.iterdir()] == ["net.svg"]


@needs_dot
def test_render_writes_a_png(tmp_path):
    path = render(two_scopes().z, tmp_path / "net.png", format="png")
    data = path.read_bytes()
    assert data[:8] == PNG_MAGIC and data[12:16] == b"IHDR" and len(data) > 1000


@needs_dot
def test_render_without_a_path_returns_the_digraph():
    g = two_scopes()
    graph = render(g.z, format="png", highlight=[g.y])
    assert graph.format == "png" and graph.source == to_dot(g.z, highlight=[g.y])
    assert graph.pipe(format="svg").lstrip().startswith(b"<?xml")


def test_format_dot_writes_the_text_without_the_dot_program(tmp_path, monkeypatch):
    monkeypatch.setenv("PATH", str(tmp_path))  # no dot program on PATH
    g = two_scopes()
    path = render(g.z, tmp_path / "net", format="dot")
    assert path == tmp_path / "net.dot" and path.read_text() == to_dot(g.z)
    for fmt in ("svg", "png"):
        with pytest.raises(VizError, match="apt-get install graphviz"):
            render(g.z, tmp_path / "net", format=fmt)
    assert [p.name for p in tmp_path.iterdir()] == ["net.dot"]


def test_bad_arguments_raise_typed_errors(tmp_path):
    g = two_scopes()
    with pytest.raises(VizError, match="svg, png, pdf, dot.*'jpeg'"):
        render(g.z, tmp_path / "x", format="jpeg")
    with pytest.raises(VizError, match="names format 'png' but format='svg'"):
        render(g.z, tmp_path / "x.png")
    with pytest.raises(VizError, match="group_by"):
        to_dot(g.z, group_by="layer")
    with pytest.raises(VizError, match="collapse to be an int >= 0"):
        to_dot(g.z, collapse=-1)
    with pytest.raises(VizError, match="received int"):
        to_dot(42)
    with pytest.raises(VizError, match="compiled=True"):
        to_dot(g.z, compiled=True)
    assert issubclass(VizError, ng.NgraphError) and ng.viz.FORMATS == FORMATS
    assert list(tmp_path.iterdir()) == []


def test_sources_models_subgraphs_and_computations():
    g = two_scopes()
    model = types.SimpleNamespace(__ngraph_ops__=lambda: [g.z])
    assert to_dot(model) == to_dot(g.z) == to_dot([g.z])
    p = ng.placeholder([g.X.axes[0]]).named("p")
    body = Graph((p,), (ng.tanh(p) * 2.0,))
    nodes, _, _ = parse_dot(to_dot(body))
    assert "placeholder p" in {v["text"] for v in nodes.values()}
    v = ng.variable([g.X.axes[0]], initial_value=1.0).named("v")
    nodes, _, _ = parse_dot(to_dot(ng.call(body, v)))
    assert any(t.startswith("call") and t.endswith(f"body: {len(body.order)} ops")
               for t in (n["text"] for n in nodes.values()))


def test_compiled_computation_shows_the_fused_chain():
    C, N = ng.make_axis(3, name="C"), ng.make_axis(4, name="N")
    X = ng.placeholder([C, N]).named("X")
    with ng.name_scope("act", kind="Activation"):
        y = ng.sum(ng.tanh(X * 2.0 + 1.0), reduction_axes=[C]).named("y")
    with ng.transformers.make_transformer() as t:
        f = t.computation(y, X)
        np.testing.assert_allclose(f(np.ones((3, 4), np.float32)), np.full(4, 3 * np.tanh(3.0)), rtol=1e-6)
        built, _, _ = parse_dot(to_dot(f))
        compiled, _, clusters = parse_dot(to_dot(f, compiled=True))
        assert to_dot(f.graph) == to_dot(f, compiled=True)  # the compiled graph itself draws the same
    assert len(compiled) == len(f.graph.order) < len(built)
    kinds = {v["text"].split()[0] for v in compiled.values()}
    assert "fused" in kinds and "tanh" not in kinds and "tanh" in {v["text"].split()[0] for v in built.values()}
    fused = next(v for v in compiled.values() if v["text"].startswith("fused"))
    assert "tanh(" in fused["text"] and fused["cluster"] == ("act : Activation",) and clusters
