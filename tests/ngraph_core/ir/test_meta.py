"""Metadata: immutable Meta values changed only through update_meta, the change log, scope class
hierarchies, and their round trip through serialization."""

from __future__ import annotations

import json

import pytest

import ngraph_core as ng
from ngraph_core.ir import Meta, ScopeEntry, changed_since, meta_generation


def test_meta_is_immutable() -> None:
    x = ng.placeholder([ng.make_axis(3, name="N")], name="x")
    with pytest.raises(AttributeError, match="update_meta"):
        x.meta.name = "y"  # type: ignore[misc]
    with pytest.raises(AttributeError):
        x.meta.labels.add("z")  # type: ignore[attr-defined]
    with pytest.raises(TypeError):
        x.meta.attrs["lr_scale"] = 0.1  # type: ignore[index]


def test_update_meta_changes_and_logs() -> None:
    W = ng.variable([ng.make_axis(2, name="C")], 1.0, name="W")
    before = meta_generation()
    assert ng.update_meta(W, remove_labels=["trainable"], add_labels=["frozen"], attrs={"lr_scale": 0.1}) is W
    assert "trainable" not in W.meta.labels and "frozen" in W.meta.labels
    assert dict(W.meta.attrs) == {"lr_scale": 0.1}
    assert meta_generation() > before and changed_since([W], before) == [W]
    ng.update_meta(W, attrs={"lr_scale": None})
    assert dict(W.meta.attrs) == {}
    mark = meta_generation()
    ng.update_meta(W, add_labels=["frozen"])  # no change: not logged
    assert meta_generation() == mark and changed_since([W], mark) == []
    with pytest.raises(ng.InvalidNameError):
        ng.update_meta(W, add_labels=["a\nb"])


def test_rebuilding_an_op_merges_labels_through_the_log() -> None:
    x = ng.placeholder([ng.make_axis(3, name="N")])
    y = x * 2.0
    mark = meta_generation()
    again = ng.Op(y.op, y.src, y.axes, y.dtype, y.arg, labels=["out"])
    assert again is y and "out" in y.meta.labels and changed_since([y], mark) == [y]


def test_scope_kinds_match_base_classes() -> None:
    x = ng.placeholder([ng.make_axis(3, name="N")])
    with ng.name_scope("block", kind="ResidualBlock", kinds=("ResidualBlock", "Layer")):
        y = x * 3.0
    entry = y.meta.scope[-1]
    assert entry.is_a("ResidualBlock") and entry.is_a("Layer") and not entry.is_a("Conv")
    with pytest.raises(ng.InvalidNameError):
        ScopeEntry("ok", "Kind", ("bad\x00",))


def test_attrs_and_kinds_round_trip_through_serialize() -> None:
    x = ng.placeholder([ng.make_axis(3, name="N")], name="x")
    with ng.name_scope("conv1", kind="Conv", kinds=("Conv", "LayerStack", "Layer")):
        W = ng.variable([], 2.0, name="W")
    ng.update_meta(W, attrs={"lr_scale": 0.5, "groups": [1, 2], "tag": "a"})
    y, x2 = ng.deserialize(ng.serialize([x * W, x]))
    (W2,) = [o for o in ng.ordered_ops([y]) if o.op is ng.OpType.VARIABLE]
    assert dict(W2.meta.attrs) == {"lr_scale": 0.5, "groups": (1, 2), "tag": "a"}
    assert W2.meta.scope[-1].kinds == ("Conv", "LayerStack", "Layer")


def test_unserializable_attrs_and_bad_documents_fail_clearly() -> None:
    W = ng.variable([], 2.0, name="W")
    ng.update_meta(W, attrs={"fn": object()})
    with pytest.raises(ng.SerializationError, match="attribute"):
        ng.serialize(W)
    doc = json.loads(ng.serialize(ng.variable([], 1.0, name="V")))
    doc["ops"][0]["meta"]["attrs"] = {"x\n": 1}
    with pytest.raises(ng.SerializationError):
        ng.deserialize(json.dumps(doc))
    doc["ops"][0]["meta"]["attrs"] = {"x": {"nested": 1}}
    with pytest.raises(ng.SerializationError):
        ng.deserialize(json.dumps(doc))


def test_meta_equality_and_replace() -> None:
    m = Meta("a", (), {"l"}, {"k": 1})
    assert m.replace(name="b").name == "b" and m.replace() == m and m != m.replace(attrs={"k": 2})
