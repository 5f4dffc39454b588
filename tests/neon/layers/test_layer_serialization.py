"""serialize_layer / deserialize_layer: registry lookup, custom objects, shared layers, malformed data."""

from __future__ import annotations

import pytest

from neon import Sequential
from neon.layers import Affine, Dropout, Layer, LayerError, deserialize_layer, layer_classes, serialize_layer


def test_every_neon_layer_is_registered() -> None:
    names = set(layer_classes())
    assert {"Affine", "Linear", "Bias", "Activation", "Dropout", "BatchNorm", "Flatten", "LookupTable",
            "Sequential", "Tree", "BranchNode", "MergeSum", "MergeBroadcast"} <= names


def test_shared_layers_stay_shared_through_a_round_trip() -> None:
    shared = Affine(4, name="shared")
    model = Sequential([shared, Dropout(0.5), shared])
    clone = deserialize_layer(serialize_layer(model))
    assert clone[0] is clone[2] and clone[0] is not shared


def test_custom_objects_win_and_unknown_classes_fail() -> None:
    class Affine2(Layer):
        def call(self, x):
            return x

    data = {"class_name": "Mystery", "config": {"name": "m"}}
    with pytest.raises(LayerError, match="expected a known layer class, received: 'Mystery'.*custom_objects"):
        deserialize_layer(data)
    assert isinstance(deserialize_layer(data, custom_objects={"Mystery": Affine2}), Affine2)


@pytest.mark.parametrize("bad", [None, [], {"config": {}}, {"class_name": "Affine", "config": 3}])
def test_malformed_data(bad) -> None:
    with pytest.raises(LayerError, match="deserialize_layer: expected"):
        deserialize_layer(bad)
    with pytest.raises(LayerError, match="expected a neon Layer"):
        serialize_layer(object())


def test_add_variable_takes_an_array_as_the_initial_value():
    import numpy as np

    import ngraph_core as ng
    from neon.layers import Layer

    class Scaled(Layer):
        def build(self, x):
            self.w = self.add_variable("w", [ng.make_axis(2, "A"), ng.make_axis(3, "B")], np.arange(6.0).reshape(2, 3))

        def call(self, x):
            return x

    layer = Scaled()
    layer(ng.placeholder([ng.make_axis(3, "F"), ng.make_axis(2, "N")]))
    with ng.transformers.make_transformer() as t:
        np.testing.assert_array_equal(t.read_variable(layer.w), np.arange(6.0).reshape(2, 3))
