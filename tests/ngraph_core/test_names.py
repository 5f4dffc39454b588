"""No user string runs as code: names are validated where they are made and decoded, and the
generated plan never holds user text (issue 18, item 1).

Each case puts a payload that would run Python (touch a marker file) into one user-settable
string field, then builds, compiles and runs. Every case must either raise a typed
``NgraphError`` or run with no side effect; control characters must be rejected.
"""

from __future__ import annotations

import json
import os

import numpy as np
import pytest

import ngraph_core as ng
from neon.layers import Affine, LayerError, deserialize_layer
from ngraph_core.ir import Meta, ScopeEntry
from ngraph_core.ir.names import check_name, printable

PAYLOADS = {
    "newline": "\n",
    "carriage_return": "\r",
    "nul": "\x00",
    "triple_quote": '"""',
    "trailing_backslash": "\\",
}
CONTROL = {"newline", "carriage_return", "nul"}
MARK = "NGRAPH_TEST_NAME_RAN"


def hostile(sep: str) -> str:
    """A name that, were it pasted into generated source, would set the environment variable MARK.

    (No '/' in it: layer names may not hold one, and the check must be the control characters.)
    """
    code = f"__import__('os').environ.__setitem__({MARK!r}, 'ran')"
    return f"x{sep}{code}{sep}#" if sep != "\\" else f"x {code}{sep}"


def run_graph(result: ng.Op, *placeholders: ng.Op) -> None:
    with ng.transformers.make_transformer() as t:
        f = t.computation(result, *placeholders)
        f(*[np.ones(p.axes.lengths) for p in placeholders])
        assert "__import__" not in f._fn.__code__.co_consts  # nothing of the name is in the code object


def _N() -> ng.Axis:
    return ng.make_axis(3, name="N")


def field_placeholder_name(s: str) -> None:
    x = ng.placeholder([_N()], name=s)
    run_graph(x * 2, x)


def field_variable_name(s: str) -> None:
    x = ng.placeholder([_N()])
    run_graph(x * ng.variable([], 1.0, name=s), x)


def field_variable_label(s: str) -> None:
    x = ng.placeholder([_N()])
    run_graph(x * ng.variable([], 1.0, labels=[s]), x)


def field_constant_name(s: str) -> None:
    x = ng.placeholder([_N()])
    run_graph(x * ng.constant(2.0, name=s), x)


def field_named(s: str) -> None:
    x = ng.placeholder([_N()])
    run_graph((x * 3).named(s), x)


def field_labeled(s: str) -> None:
    x = ng.placeholder([_N()])
    run_graph((x * 3).labeled(s), x)


def field_axis_name(s: str) -> None:
    x = ng.placeholder([ng.make_axis(3, name=s)])
    run_graph(x * 2, x)


def field_scope_name(s: str) -> None:
    x = ng.placeholder([_N()])
    with ng.name_scope(s):
        y = x * 4
    run_graph(y, x)


def field_scope_kind(s: str) -> None:
    x = ng.placeholder([_N()])
    with ng.name_scope("layer", kind=s):
        y = x * 4
    run_graph(y, x)


def field_conv_epilogue_name(s: str) -> None:
    """A batch-1 conv + bias + residual + relu, every op and its scope named ``s``: one fused op whose conv
    runs channels last with the epilogue in its generated numba loop (``narrow_gemm``; depth 288), beside
    the program's generated fallback (``kernels/fused._single_block``); neither source may hold the name."""
    C, H, W, N = (ng.make_axis(n, name=a) for n, a in ((32, "C"), (4, "H"), (4, "W"), (1, "N")))
    R, S = ng.make_axis(3, name="R"), ng.make_axis(3, name="S")
    x = ng.placeholder([C, H, W, N], name=s)
    w = ng.constant(np.full((32, 3, 3, 8), 0.01, np.float32), [C, R, S, ng.make_axis(8, name="K")], name=s)
    with ng.name_scope(s, kind=s):
        h = ng.convolution(x, w, padding=1).named(s)
        b = ng.constant(np.linspace(-1, 1, 8, dtype=np.float32), [h.axes[0]], name=s)
        r = ng.placeholder(h.axes, name=s)
        y = ng.relu(h + b + r).named(s)
    from ngraph_core.transformers.numpy import narrow_gemm
    from ngraph_core.transformers.numpy.numba_kernels import cache_dir

    forced, os.environ["NG_CONV"] = os.environ.get("NG_CONV"), "channels_last"  # (the suite forces Winograd)
    try:
        run_graph(y, x, r)
    finally:
        os.environ.pop("NG_CONV") if forced is None else os.environ.__setitem__("NG_CONV", forced)
    assert ("float32", ("bias", "add", "relu"), False) in narrow_gemm._kernels  # the epilogue loop ran

    for path in cache_dir().glob("*.py"):
        assert "__import__" not in path.read_text(), path  # no generated kernel source holds the name


def field_layer_name(s: str) -> None:
    F = ng.make_axis(2, name="F")
    x = ng.placeholder([F, _N()])
    run_graph(Affine(2, init=0.1, name=s)(x), x)


def field_layer_config_name(s: str) -> None:
    layer = deserialize_layer({"class_name": "Affine", "config": {"nout": 2, "name": s}})
    F = ng.make_axis(2, name="F")
    x = ng.placeholder([F, _N()])
    run_graph(layer(x), x)


def _document(edit) -> None:
    """Serialize a small graph, let ``edit`` change every op record, deserialize, run."""
    x = ng.placeholder([_N()], name="x")
    with ng.name_scope("layer", kind="Dense"):
        y = ng.concat_along_axis([x, x * 2], _N()).named("y").labeled("out")
    doc = json.loads(ng.serialize([y, x]))
    for record in doc["ops"]:
        edit(record)
    y2, x2 = ng.deserialize(json.dumps(doc))
    run_graph(y2, x2)


def field_document_name(s: str) -> None:
    _document(lambda r: r["meta"].__setitem__("name", s))


def field_document_label(s: str) -> None:
    _document(lambda r: r["meta"].__setitem__("labels", [s]))


def field_document_scope_name(s: str) -> None:
    _document(lambda r: [e.__setitem__(0, s) for e in r["meta"]["scope"]])


def field_document_scope_kind(s: str) -> None:
    _document(lambda r: [e.__setitem__(1, s) for e in r["meta"]["scope"]])


def field_document_axis_name(s: str) -> None:
    """The axis N renamed everywhere it appears: in every op's axes and in concat's arg."""
    def rename(record: dict) -> None:
        for entry in record["axes"]:
            entry[0] = s
        if record["op"] == "concat":
            record["arg"] = s
    _document(rename)


FIELDS = {name[len("field_"):]: fn for name, fn in globals().items() if name.startswith("field_")}


@pytest.mark.parametrize("payload", sorted(PAYLOADS))
@pytest.mark.parametrize("field", sorted(FIELDS))
def test_no_name_runs_code(field: str, payload: str, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv(MARK, raising=False)
    try:
        FIELDS[field](hostile(PAYLOADS[payload]))
    except ng.NgraphError as exc:
        assert payload in CONTROL, f"{field}: a printable name was rejected: {exc}"
    else:
        assert payload not in CONTROL, f"{field}: a name with a {payload} was accepted"
    assert MARK not in os.environ, f"{field} with a {payload}: the name ran as code"


@pytest.mark.parametrize("payload", sorted(CONTROL))
def test_control_characters_raise_typed_errors(payload: str) -> None:
    bad = f"a{PAYLOADS[payload]}b"
    with pytest.raises(ng.InvalidNameError, match="printable"):
        ng.placeholder([_N()], name=bad)
    with pytest.raises(ng.AxesError, match="axis name"):
        ng.make_axis(2, name=bad)
    with pytest.raises(ng.InvalidNameError, match="scope name"):
        ScopeEntry(bad, "Conv")
    with pytest.raises(LayerError, match="layer name"):
        Affine(2, name=bad)
    with pytest.raises(LayerError):
        deserialize_layer({"class_name": "Affine", "config": {"nout": 2, "name": bad}})
    doc = json.loads(ng.serialize(ng.placeholder([_N()], name="x")))
    doc["ops"][0]["meta"]["name"] = bad
    with pytest.raises(ng.SerializationError, match="printable"):
        ng.deserialize(json.dumps(doc))


def test_plan_never_holds_user_text_even_past_validation(monkeypatch: pytest.MonkeyPatch) -> None:
    """The second wall: a name written straight into meta (bypassing the checks) stays a comment."""
    monkeypatch.delenv(MARK, raising=False)
    x = ng.placeholder([_N()], name="x")
    y = x * 5
    object.__setattr__(y, "meta", Meta(name=hostile("\n"), labels={hostile("\r")}))  # past every check
    with ng.transformers.make_transformer() as t:
        f = t.computation(y, x)
        np.testing.assert_allclose(f(np.ones(3)), 5.0)
    assert MARK not in os.environ
    assert f.source.count("\n") == len(f.source.splitlines())  # one line per step: nothing broke a line
    assert "\\n__import__" in f.source  # the shown plan escapes the newline


def test_fused_program_source_holds_no_user_text(monkeypatch: pytest.MonkeyPatch) -> None:
    """The fused kernel's generated function (``kernels/fused._single_block``): names holding quotes and code
    on the fused ops (control characters are refused when the fused op is named: test above) and odd
    constants (inf, NaN, a long fraction) never reach its text."""
    import re

    monkeypatch.delenv(MARK, raising=False)
    x = ng.placeholder([_N()], name="x")
    a = ng.tanh(x * float("inf") + 0.1234567890123) * 2.0
    y = ng.minimum(a, float("nan")) - x
    for op, payload in ((a, "'"), (y, '")')):
        object.__setattr__(op, "meta", Meta(name=hostile(payload), labels={hostile(payload)}))
    with ng.transformers.make_transformer() as t, np.errstate(all="ignore"):
        f = t.computation(y, x)
        f(np.ones(3))
        (fused,) = [op for op in f.graph.order if op.op is ng.OpType.FUSED]
        kernel = f._fn.__globals__[next(k for k in f._fn.__globals__ if k.startswith("fused"))]
    assert MARK not in os.environ
    code = kernel.source
    assert len(fused.arg.steps) >= 4 and code.count("\n") == len(fused.arg.steps) + 2
    assert re.fullmatch(r"[A-Za-z0-9_(), :\n]*", code), code  # identifiers, commas and parentheses only
    assert "import" not in code and "inf" not in code and "nan" not in code


def test_check_name_rules() -> None:
    assert check_name("conv1/W é 名", "op name") == "conv1/W é 名"
    for bad in ("", None, 3, "a\tb", "a\u202eb", "x" * 257):
        with pytest.raises(ng.InvalidNameError):
            check_name(bad, "op name")
    assert printable("a\nb\x00\u202e") == "a\\nb\\x00\\u202e"
    assert printable("plain") == "plain"


def test_printable_names_still_work() -> None:
    x = ng.placeholder([_N()], name='x """ \\')
    with ng.transformers.make_transformer() as t:
        f = t.computation((x * 2).named("y \\"), x)
        np.testing.assert_allclose(f(np.arange(3.0)), [0.0, 2.0, 4.0])
        assert 'x """ \\' in f.source


@pytest.mark.parametrize("payload", ["\n", "'", "\x00"])
def test_scan_plans_with_buffers_views_and_concats_hold_no_user_text(payload: str,
                                                                      monkeypatch: pytest.MonkeyPatch) -> None:
    """The plan lines of this compiler's later forms (a scan body written into the pack: ``into``
    params, chained states; views as expressions: ``vI = vJ[indexI]``; a result concat's parts in
    place: ``wholeK``) hold only generated identifiers, with every op's name and label hostile past
    validation. A control character set past validation is refused (typed) when a pass rebuilds the
    op; a quote compiles, and stays in the comments."""
    import re

    from ngraph_core.ir import walk

    monkeypatch.delenv(MARK, raising=False)
    h, n, rec, g = ng.make_axis(3, "H"), ng.make_axis(2, "N"), ng.make_axis(4, "REC"), ng.make_axis(6, "G")
    x = ng.placeholder([g, rec, n], name="x")
    u = ng.variable([g, ng.make_axis(3, "H2")], initial_value=np.linspace(-1, 1, 18).reshape(6, 3), name="U")

    def step(x_t, state):
        gates = x_t + ng.dot(u, ng.cast_axes(state, [ng.make_axis(3, "H2"), n]))
        i = ng.sigmoid(ng.cast_axes(ng.slice_along_axis(gates, g, slice(0, 3)), [h, n]))
        c = ng.tanh(ng.cast_axes(ng.slice_along_axis(gates, g, slice(3, 6)), [h, n]))
        new = i * c + state * 0.5
        return [new], [new]

    (final,), _ = ng.scan(step, [x], [ng.constant(0.0, [h, n])], rec)
    (grad,) = ng.gradients(ng.sum(final * final), [u])
    y = ng.placeholder([h, n], name="y")
    joined = ng.concat_along_axis([ng.tanh(y * 2.0) + 1.0, ng.sigmoid(y) * y], h)
    # ops are hash-consed (shared with other tests' equal ops): their meta is put back afterwards
    saved = {op: op.meta for op in walk([final, grad, joined])}
    for op in saved:
        object.__setattr__(op, "meta", Meta(name=hostile(payload), labels={hostile(payload)}))
    plans = []
    try:
        with ng.transformers.make_transformer() as t:
            for results, inputs, feeds in (([final, grad], [x], [np.ones((6, 4, 2))]),
                                           ([joined], [y], [np.ones((3, 2))])):
                f = t.computation(results, *inputs)
                f(*feeds)
                plans.append(f.source)
            plans += [c.source for c in t._subgraphs.values()]
    except ng.NgraphError:
        assert payload in ("\n", "\x00"), "a printable name was refused"
    else:
        assert payload == "'", "a control character reached a compiled plan"
    finally:
        for op, meta in saved.items():
            object.__setattr__(op, "meta", meta)
    assert MARK not in os.environ
    if plans:
        sources = "\n".join(plans)
        assert "into0" in sources and "[index" in sources and "whole" in sources  # each new form is exercised
        for plan in plans:
            for line in plan.splitlines()[1:]:
                assert re.fullmatch(r" {4}[A-Za-z0-9_(), =\[\]]*", line.split("  # ", 1)[0]), line
