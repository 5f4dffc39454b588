"""LookupTable: the layer helper, PyTorch's Embedding (values and weight gradient), axes, errors."""

from __future__ import annotations

import numpy as np
import pytest
from layer_helper import axis, check_layer_gradients, random_input, random_weights, run_layer_test

import ngraph_core as ng
from neon.initializers import Gaussian
from neon.layers import Affine, LayerError, LookupTable


@pytest.mark.parametrize("input_axes, dtype, out_lengths", [
    ([axis("N", 6)], "int64", (4, 6)),
    ([axis("REC", 3), axis("N", 5)], "int32", (4, 3, 5)),
    ([axis("REC", 3), axis("N", 5)], "float32", (4, 3, 5)),
], ids=["ids-N", "ids-REC-N", "float-ids"])
def test_run_layer_test(input_axes, dtype, out_lengths) -> None:
    ids = random_input(input_axes, "int64", 0, 10).astype(dtype)
    run_layer_test(lambda: LookupTable(10, 4, Gaussian(0, 1)), input_axes, out_lengths, input_dtype=dtype,
                   input_value=ids)


def test_gradient_of_the_table_matches_finite_differences() -> None:
    ids = np.array([[0, 3, 3], [1, 4, 0]])
    check_layer_gradients(lambda: LookupTable(5, 3, Gaussian(0, 1)), [axis("REC", 2), axis("N", 3)],
                          input_dtype="int64", input_value=ids)


def test_matches_torch_embedding_values_and_weight_gradient() -> None:
    torch = pytest.importorskip("torch")
    rec, n = axis("REC", 4), axis("N", 3)
    ids_value = random_input([rec, n], "int64", 0, 7)
    ids = ng.placeholder([rec, n], dtype="int64")
    layer = LookupTable(7, 5, Gaussian(0, 1))
    out = layer(ids)
    assert out.axes.names == (layer.name, "REC", "N")
    R = random_weights(out.axes)
    grad = ng.deriv(ng.sum(out * ng.constant(R, out.axes)), layer.W)
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        y, g = t.computation([out, grad], ids)(ids_value)
        table = t.read_variable(layer.W)  # [E, V]

    module = torch.nn.Embedding(7, 5).double()
    with torch.no_grad():
        module.weight.copy_(torch.tensor(table.T))
    yt = module(torch.tensor(ids_value))  # [REC, N, E]
    (yt * torch.tensor(np.moveaxis(R, 0, -1))).sum().backward()
    np.testing.assert_allclose(y, np.moveaxis(yt.detach().numpy(), -1, 0), rtol=1e-12)
    np.testing.assert_allclose(g, module.weight.grad.numpy().T, rtol=1e-12)


def test_out_of_range_ids_look_up_zeros_and_an_affine_follows() -> None:
    ids = ng.placeholder([axis("N", 3)], dtype="int64")
    layer = LookupTable(4, 2)
    out = layer(ids)
    with ng.transformers.make_transformer() as t:
        y = t.computation(out, ids)(np.array([0, 9, -1]))
        table = t.read_variable(layer.W)
    np.testing.assert_allclose(y[:, 0], table[:, 0])
    np.testing.assert_array_equal(y[:, 1:], 0)
    assert Affine(3)(out).axes.lengths == (3, 3)


def test_bad_configs_and_inputs() -> None:
    with pytest.raises(LayerError, match="vocab_size to be a positive int"):
        LookupTable(0, 3)
    with pytest.raises(LayerError, match="embedding_dim to be a positive int"):
        LookupTable(3, -1)
    with pytest.raises(LayerError, match="integer ids"):
        LookupTable(3, 2)(ng.placeholder([axis("N", 2)], dtype="bool"))
    table = LookupTable(3, 2, name="emb")
    with pytest.raises(LayerError, match="without an axis named 'emb'"):
        table(ng.placeholder([axis("emb", 2), axis("N", 2)], dtype="int64"))
