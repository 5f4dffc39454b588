"""MatMul, Gemm, Einsum, the softmax family and Dropout (ops_nn.py, ops_einsum.py) against onnxruntime."""

from __future__ import annotations

import numpy as np
import pytest
from ort_check import check_node, make_model

from ngraph_core.frontends.onnx import OnnxError, UnsupportedOnnxOpError, build_model, import_model
from ngraph_core.ir import OpType, toposort

RNG = np.random.default_rng(5)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def run_unchecked(op_type, inputs, opset, static=None, n_outputs=1, **attrs):
    """Our outputs for one node whose outputs onnx's shape inference leaves untyped (so onnx.checker
    and onnxruntime refuse the model): ``build_model`` skips the checker."""
    model = make_model(op_type, inputs, opset, n_outputs, static, **attrs)
    return build_model(model, initializers="constants").run(inputs)


@pytest.mark.parametrize("a, b", [((2, 3, 4, 5), (5, 6)), ((7, 5), (5, 2)), ((3, 1, 2, 4), (5, 4, 3)),
                                  ((4,), (2, 4, 3)), ((2, 3, 4), (4,))])
def test_matmul_shapes(a, b):
    check_node("MatMul", {"a": rand(*a), "b": rand(*b)}, opset=13, rtol=1e-5, atol=1e-5)


def test_matmul_with_a_matrix_on_the_right_is_one_dot():
    model = make_model("MatMul", {"a": rand(2, 3, 4, 5)}, 13, static={"w": rand(5, 6)})
    ops = toposort(import_model(model, initializers="constants").outputs)
    kinds = [o.op for o in ops]
    assert kinds.count(OpType.DOT) == 1 and OpType.SUM not in kinds


def test_batched_matmul_is_one_grouped_convolution_without_the_broadcast_product():
    model = make_model("MatMul", {"a": rand(2, 3, 4, 5), "b": rand(2, 3, 5, 6)}, 13)
    ops = toposort(import_model(model).outputs)
    assert [o.op for o in ops].count(OpType.CONV) == 1
    assert max(o.axes.size for o in ops) <= 2 * 3 * 5 * 6  # never [2, 3, 4, 5, 6]


def test_matmul_float16_accumulates_in_float32():
    a, b = (rand(4, 256) * 4).astype("float16"), (rand(256, 3) * 4).astype("float16")
    expected = (a.astype("float32") @ b.astype("float32")).astype("float16")
    check_node("MatMul", {"a": a, "b": b}, opset=13, expected=expected, rtol=1e-3, atol=1e-2)


def test_matmul_integer_with_zero_points():
    a = RNG.integers(0, 255, (3, 4)).astype("uint8")
    b = RNG.integers(-128, 127, (4, 2)).astype("int8")
    check_node("MatMulInteger", {"a": a, "b": b}, opset=10, static={"az": np.array(7, "uint8")})
    # per-row / per-column zero points (onnxruntime takes scalars only)
    az, bz = np.array([1, 2, 3], "uint8"), np.array([0, 5], "int8")
    expected = (a.astype("int32") - az[:, None]) @ (b.astype("int32") - bz)
    check_node("MatMulInteger", {"a": a, "b": b}, opset=10, static={"az": az, "bz": bz}, expected=expected)


@pytest.mark.parametrize("opset", [7, 11, 13])
@pytest.mark.parametrize("c_shape", [(), (1,), (5,), (3, 1), (3, 5)])
def test_gemm_broadcasts_c_and_applies_alpha_beta_transposes(opset, c_shape):
    a, b, c = rand(4, 3), rand(5, 4), rand(*c_shape)
    check_node("Gemm", {"a": a, "b": b, "c": c}, opset=opset, alpha=0.5, beta=-2.0, transA=1, transB=1,
               rtol=1e-5, atol=1e-5)


def test_gemm_without_c():
    check_node("Gemm", {"a": rand(3, 4), "b": rand(4, 2)}, opset=13, alpha=3.0, rtol=1e-5, atol=1e-5)


def test_gemm_rejects_batched_operands():
    with pytest.raises(OnnxError, match="2-D"):
        run_unchecked("Gemm", {"a": rand(2, 3, 4), "b": rand(4, 2)}, 6, static={"c": rand(2)})


@pytest.mark.parametrize("equation, shapes", [
    ("ij,jk->ik", [(3, 4), (4, 5)]),
    ("bij,bjk->bik", [(2, 3, 4), (2, 4, 5)]),
    ("ii->i", [(4, 4)]),
    ("ij->", [(3, 4)]),
    ("...ij,...jk", [(2, 1, 3, 4), (5, 4, 2)]),
    ("i,j->ij", [(3,), (4,)]),
    ("abc,cd,db->a", [(2, 3, 4), (4, 5), (5, 3)]),
    ("bhqd,bhkd->bhqk", [(2, 2, 3, 4), (2, 2, 5, 4)]),
    ("ij,ij->i", [(3, 4), (3, 4)]),
])
def test_einsum_equations(equation, shapes):
    inputs = {f"x{i}": rand(*s) for i, s in enumerate(shapes)}
    expected = np.einsum(equation, *inputs.values())
    (got,) = run_unchecked("Einsum", inputs, 12, equation=equation)
    assert got.shape == expected.shape
    np.testing.assert_allclose(got, expected, rtol=1e-4, atol=1e-5)


def test_einsum_wrong_rank_is_an_error():
    with pytest.raises(OnnxError, match="rank"):
        run_unchecked("Einsum", {"x": rand(2, 3)}, 12, equation="ijk->i")


@pytest.mark.parametrize("op_type", ["Softmax", "LogSoftmax", "Hardmax"])
@pytest.mark.parametrize("opset, axis", [(11, 0), (11, 1), (11, -1), (13, 0), (13, 1), (13, -2)])
def test_softmax_family_axis_semantics_before_and_after_opset_13(op_type, opset, axis):
    x = rand(2, 3, 4)
    if op_type == "Hardmax":
        x[0, 1] = x[0, 0]  # ties: the first maximum wins
    check_node(op_type, {"x": x}, opset=opset, axis=axis, rtol=1e-5, atol=1e-6)


def test_softmax_before_opset_13_normalizes_every_trailing_dim():
    x = rand(2, 3, 4)
    (got,) = check_node("Softmax", {"x": x}, opset=11, axis=1, rtol=1e-5, atol=1e-6)
    np.testing.assert_allclose(got.sum(axis=(1, 2)), 1.0, rtol=1e-5)


@pytest.mark.parametrize("opset, mask_dtype", [(7, "float32"), (10, "bool"), (13, "bool")])
def test_dropout_inference_is_identity_with_a_full_mask(opset, mask_dtype):
    x = rand(3, 4)
    y, mask = run_unchecked("Dropout", {"x": x}, opset, n_outputs=2, **({"ratio": 0.3} if opset < 12 else {}))
    assert np.array_equal(y, x) and mask.dtype == mask_dtype and mask.shape == x.shape and mask.all()


def test_dropout_training_with_zero_ratio_is_identity():
    x = rand(3, 4)
    (y,) = run_unchecked("Dropout", {"x": x}, 13, static={"r": np.array(0.0, "float32"), "t": np.array(True)})
    assert np.array_equal(y, x)


def test_dropout_training_with_ratio_is_unsupported():
    model = make_model("Dropout", {"x": rand(3)}, 13,
                       static={"r": np.array(0.5, "float32"), "t": np.array(True)})
    with pytest.raises(UnsupportedOnnxOpError, match="training_mode"):
        import_model(model, initializers="constants")
