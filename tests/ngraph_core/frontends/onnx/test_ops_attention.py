"""Attention (ops_attention.py) against onnxruntime: masks, causality, KV cache, grouped heads, softcap."""

from __future__ import annotations

import numpy as np
import pytest
from ort_check import check_node, make_model

from ngraph_core.frontends.onnx import OnnxError, build_model

RNG = np.random.default_rng(17)


def rand(*shape, dtype="float32"):
    return RNG.standard_normal(shape).astype(dtype)


def numpy_attention(q, k, v, bias=None):
    """softmax(q k^T / sqrt(d) + bias) v over [B, H, S, D]."""
    scores = q @ np.swapaxes(k, -1, -2) / np.sqrt(q.shape[-1])
    if bias is not None:
        scores = scores + bias
    scores = np.exp(scores - scores.max(-1, keepdims=True))
    return (scores / scores.sum(-1, keepdims=True)) @ v


def test_4d_attention_is_softmax_of_scaled_scores():
    q, k, v = rand(2, 3, 4, 8), rand(2, 3, 5, 8), rand(2, 3, 5, 6)
    check_node("Attention", {"q": q, "k": k, "v": v}, opset=23, expected=numpy_attention(q, k, v).astype("float32"),
               rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mask_shape", [(4, 5), (1, 4, 5), (2, 3, 4, 5)])
@pytest.mark.parametrize("mask_dtype", ["float32", "bool"])
def test_masks_of_any_rank_or_bool(mask_shape, mask_dtype):
    q, k, v = rand(2, 3, 4, 8), rand(2, 3, 5, 8), rand(2, 3, 5, 8)
    mask = RNG.random(mask_shape) > 0.3 if mask_dtype == "bool" else rand(*mask_shape)
    if mask_dtype == "bool":
        mask[..., 0] = True  # every row keeps a key
    check_node("Attention", {"q": q, "k": k, "v": v, "m": mask}, opset=23, rtol=1e-4, atol=1e-5)


@pytest.mark.parametrize("mask_dtype", ["float32", "bool"])
def test_a_mask_shorter_than_the_keys_masks_out_the_rest(mask_dtype):
    q, k, v = rand(1, 2, 4, 8), rand(1, 2, 5, 8), rand(1, 2, 5, 8)
    mask = np.ones((4, 3), bool) if mask_dtype == "bool" else rand(4, 3)
    bias = np.full((4, 5), -np.inf, "float32")
    bias[:, :3] = 0 if mask_dtype == "bool" else mask
    expected = numpy_attention(q, k, v, bias).astype("float32")  # onnxruntime refuses short masks
    check_node("Attention", {"q": q, "k": k, "v": v, "m": mask}, opset=23, expected=expected, rtol=1e-4,
               atol=1e-5)


@pytest.mark.parametrize("with_past", [False, True])
def test_causal_with_kv_cache_outputs_present(with_past):
    q, k, v = rand(1, 2, 3, 4), rand(1, 2, 3, 4), rand(1, 2, 3, 4)
    inputs = {"q": q, "k": k, "v": v}
    if with_past:
        inputs.update({"_m": None, "pk": rand(1, 2, 2, 4), "pv": rand(1, 2, 2, 4)})
    got = check_node("Attention", inputs, opset=23, n_outputs=3 if with_past else 1, is_causal=1, rtol=1e-4,
                     atol=1e-5)
    if with_past:
        assert got[1].shape == (1, 2, 5, 4)


def test_3d_inputs_with_grouped_query_heads_and_scale():
    q, k, v = rand(2, 4, 4 * 6), rand(2, 5, 2 * 6), rand(2, 5, 2 * 3)
    got = check_node("Attention", {"q": q, "k": k, "v": v}, opset=23, q_num_heads=4, kv_num_heads=2, scale=0.3,
                     rtol=1e-4, atol=1e-5)
    assert got[0].shape == (2, 4, 4 * 3)


@pytest.mark.parametrize("mode", [0, 1, 2, 3])
def test_softcap_and_every_qk_output_mode(mode):
    q, k, v = rand(1, 2, 3, 4), rand(1, 2, 3, 4), rand(1, 2, 3, 4)
    past = {"pk": rand(1, 2, 2, 4), "pv": rand(1, 2, 2, 4)}
    check_node("Attention", {"q": q, "k": k, "v": v, "m": rand(3, 5), **past}, opset=23, n_outputs=4,
               softcap=2.0, qk_matmul_output_mode=mode, rtol=1e-4, atol=1e-5)


def test_heads_that_do_not_split_the_hidden_size_are_an_error():
    model = make_model("Attention", {"q": rand(1, 2, 10), "k": rand(1, 2, 10), "v": rand(1, 2, 10)}, 23,
                       q_num_heads=3, kv_num_heads=3)
    with pytest.raises(OnnxError, match="heads"):
        build_model(model)


def reference(op_type, inputs, opset, domain="", **attrs):
    """onnx's reference evaluator on one node (the judge for ops onnxruntime lacks)."""
    from onnx import helper
    from onnx.reference import ReferenceEvaluator

    names = [("" if k.startswith("_") else k) for k in inputs]
    node = helper.make_node(op_type, names, ["y0", "y1"][:attrs.pop("n_outputs", 1)], domain=domain, **attrs)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(k, helper.np_dtype_to_tensor_dtype(v.dtype),
                                                                            v.shape)
                                            for k, v in inputs.items() if not k.startswith("_")],
                              [helper.make_empty_tensor_value_info(o) for o in node.output])
    imports = [helper.make_opsetid("", opset)] + ([helper.make_opsetid(domain, 1)] if domain else [])
    model = helper.make_model(graph, opset_imports=imports)
    fed = {k: v for k, v in inputs.items() if not k.startswith("_")}
    return model, ReferenceEvaluator(model).run(None, fed)


def run_ours(model, inputs):
    return build_model(model, initializers="constants").run({k: v for k, v in inputs.items() if not k.startswith("_")})


@pytest.mark.parametrize("interleaved", [0, 1])
@pytest.mark.parametrize("rank, rot", [(4, 0), (4, 4), (3, 0)])
def test_rotary_embedding_halves_or_interleaved_with_positions(interleaved, rank, rot):
    b, s, h, d = 2, 3, 2, 8
    x = rand(b, h, s, d) if rank == 4 else rand(b, s, h * d)
    half = (rot or d) // 2
    inputs = {"x": x, "cos": rand(10, half), "sin": rand(10, half),
              "pos": RNG.integers(0, 10, (b, s)).astype("int64")}
    attrs = dict(interleaved=interleaved, rotary_embedding_dim=rot, **({"num_heads": h} if rank == 3 else {}))
    model, expected = reference("RotaryEmbedding", inputs, 23, **attrs)
    np.testing.assert_allclose(run_ours(model, inputs)[0], expected[0], rtol=1e-5, atol=1e-6)


@pytest.mark.parametrize("rule", ["linear", "gated", "delta", "gated_delta"])
@pytest.mark.parametrize("with_past", [False, True])
def test_linear_attention_update_rules_match_the_reference(rule, with_past):
    b, t, hq, hkv, dk, dv = 2, 4, 4, 2, 3, 5
    inputs = {"q": rand(b, t, hq * dk), "k": rand(b, t, hkv * dk) * 0.5, "v": rand(b, t, hkv * dv)}
    inputs["past"] = rand(b, hkv, dk, dv) if with_past else None
    inputs["decay"] = -np.abs(rand(b, t, hkv * dk if with_past else hkv)) if "gated" in rule else None
    inputs["beta"] = RNG.random((b, t, hkv)).astype("float32") if "delta" in rule else None
    inputs = {(k if v is not None else f"_{k}"): (v if v is not None else np.zeros(0, "float32"))
              for k, v in inputs.items()}
    while next(reversed(inputs)).startswith("_"):  # trailing omitted inputs are left out
        inputs.popitem()
    model, expected = reference("LinearAttention", inputs, 27, n_outputs=2, update_rule=rule, q_num_heads=hq,
                                kv_num_heads=hkv)
    got = run_ours(model, inputs)
    for g, e in zip(got, expected):
        np.testing.assert_allclose(g, e, rtol=1e-4, atol=1e-5)


def test_linear_attention_rejects_a_decay_the_rule_does_not_take():
    inputs = {"q": rand(1, 2, 4), "k": rand(1, 2, 4), "v": rand(1, 2, 4), "_p": np.zeros(0, "float32"),
              "decay": rand(1, 2, 1)}
    from onnx import helper

    node = helper.make_node("LinearAttention", ["q", "k", "v", "", "decay"], ["y"], update_rule="linear",
                            q_num_heads=1, kv_num_heads=1)
    graph = helper.make_graph([node], "g", [helper.make_tensor_value_info(k, 1, v.shape) for k, v in inputs.items()
                                            if not k.startswith("_")], [helper.make_empty_tensor_value_info("y")])
    with pytest.raises(OnnxError, match="decay"):
        build_model(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 27)]))


def test_flex_attention_score_mod_subgraph_runs_inline():
    from onnx import helper, numpy_helper

    q, k, v = rand(1, 4, 3, 4), rand(1, 2, 5, 4), rand(1, 2, 5, 6)
    bias = rand(3, 5)
    body = helper.make_graph([helper.make_node("Add", ["s", "bias"], ["out"])], "score_mod",
                             [helper.make_tensor_value_info("s", 1, None)], [helper.make_tensor_value_info("out", 1,
                                                                                                           None)],
                             [numpy_helper.from_array(bias, "bias")])
    inputs = {"q": q, "k": k, "v": v}
    model, expected = reference("FlexAttention", inputs, 26, domain="ai.onnx.preview", score_mod=body)
    kr, vr = np.repeat(k, 2, axis=1), np.repeat(v, 2, axis=1)
    mine = numpy_attention(q, kr, vr, bias)
    np.testing.assert_allclose(expected[0], mine, rtol=1e-4, atol=1e-5)  # the reference agrees with numpy
    np.testing.assert_allclose(run_ours(model, inputs)[0], mine, rtol=1e-4, atol=1e-5)
