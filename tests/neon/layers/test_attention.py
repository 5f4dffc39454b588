"""Attention and Transformer layers: the layer helper (config round trip, forward, a training step),
PyTorch in float64 with copied weights (forward and every gradient, masks and ragged lengths), a
``Model`` fit on ragged sequences and its checkpoint, and the errors."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import numpy as np
import pytest
from layer_helper import axis, run_layer_test

import ngraph_core as ng
from neon.activations import Softmax
from neon.costs import CrossEntropyMulti
from neon.data import SequenceIterator
from neon.layers import (
    Affine,
    FeedForward,
    LayerError,
    LayerNorm,
    MultiHeadAttention,
    PositionEmbedding,
    RecurrentMean,
    SinusoidalPositionEmbedding,
    TransformerDecoder,
    TransformerDecoderLayer,
    TransformerEncoder,
    TransformerEncoderLayer,
    training_mode,
)
from neon.layers.attention import sinusoids
from neon.layers.serialization import deserialize_layer, serialize_layer
from neon.model import Model
from neon.optimizers import Adam
from neon.saving import load_model

torch = pytest.importorskip("torch")

E, HEADS, T, S, N, FF = 6, 2, 5, 4, 3, 7
TOL = 1e-10
LENGTHS = [5, 2, 4]
MEMORY_LENGTHS = [4, 1, 3]


def seq(f: int = E, t: int = T, n: int = N, name: str = "F") -> list[ng.Axis]:
    return [axis(name, f), axis("REC", t), axis("N", n)]


# -- the layer helper: axes, config round trip, forward, one training step ----------------------------------------


@pytest.mark.parametrize("factory", [
    lambda: LayerNorm(eps=1e-3),
    lambda: MultiHeadAttention(2, causal=True),
    lambda: MultiHeadAttention(3, head_dim=4, value_dim=5, bias=False),
    lambda: PositionEmbedding(8),
    lambda: SinusoidalPositionEmbedding(),
    lambda: FeedForward(16, activation="gelu"),
    lambda: TransformerEncoderLayer(2, 16, dropout=0.0, activation="gelu", norm_first=True),
    lambda: TransformerEncoderLayer(2, 16, dropout=0.0),
    lambda: TransformerEncoder(2, 3, 16, dropout=0.0, final_norm=True),
], ids=["layer_norm", "mha_causal", "mha_dims", "position", "sinusoidal", "feed_forward", "encoder_pre_gelu",
        "encoder_post_relu", "encoder_stack"])
def test_layer_helper(factory: Callable) -> None:
    run_layer_test(factory, seq(), (E, T, N))


def test_dropout_layers_are_random_in_training_only() -> None:
    run_layer_test(lambda: TransformerEncoderLayer(2, 16, dropout=0.3), seq(), (E, T, N), deterministic=False)


def test_sinusoids_are_the_papers() -> None:
    table = sinusoids(7, 6)
    for t in range(7):
        for i in range(3):
            assert table[2 * i, t] == pytest.approx(np.sin(t / 10000 ** (2 * i / 6)))
            assert table[2 * i + 1, t] == pytest.approx(np.cos(t / 10000 ** (2 * i / 6)))
    assert sinusoids(2, 5).shape == (5, 2)


# -- PyTorch, float64, copied weights ---------------------------------------------------------------------------


ALL = slice(None)


def same(a: np.ndarray) -> np.ndarray:
    return a


def heads_first(w: np.ndarray) -> np.ndarray:
    """torch's [H * D, ...] rows as our [D, H, ...]."""
    return np.swapaxes(w.reshape(HEADS, -1, *w.shape[1:]), 0, 1)


def mha_pairs(ours: MultiHeadAttention, theirs) -> list[tuple[ng.Op, object, Callable]]:
    """(our variable, torch parameter, its rows, torch array -> our array) for each weight of a MultiHeadAttention."""
    w, b = theirs.in_proj_weight, theirs.in_proj_bias
    q, k, v = slice(0, E), slice(E, 2 * E), slice(2 * E, 3 * E)
    pairs = [(ours.Wq, w, q, heads_first), (ours.Wk, w, k, heads_first), (ours.Wv, w, v, heads_first),
             (ours.bq, b, q, heads_first), (ours.bk, b, k, heads_first), (ours.bv, b, v, heads_first)]
    pairs.append((ours.Wo, theirs.out_proj.weight, ALL, lambda a: np.swapaxes(a.reshape(E, HEADS, -1), 1, 2)))
    pairs.append((ours.bo, theirs.out_proj.bias, ALL, same))
    return pairs


def norm_pairs(ours: LayerNorm, theirs) -> list:
    return [(ours.gamma, theirs.weight, ALL, same), (ours.beta, theirs.bias, ALL, same)]


def block_pairs(ours: TransformerEncoderLayer, theirs) -> list:
    ff = ours.feed_forward
    pairs = mha_pairs(ours.self_attn, theirs.self_attn) + [
        (ff.W1, theirs.linear1.weight, ALL, same), (ff.b1, theirs.linear1.bias, ALL, same),
        (ff.W2, theirs.linear2.weight, ALL, same), (ff.b2, theirs.linear2.bias, ALL, same),
    ] + norm_pairs(ours.norm1, theirs.norm1) + norm_pairs(ours.norm2, theirs.norm2)
    if isinstance(ours, TransformerDecoderLayer):
        pairs += mha_pairs(ours.cross_attn, theirs.multihead_attn) + norm_pairs(ours.norm3, theirs.norm3)
    return pairs


def nte(x: np.ndarray, grad: bool = True):
    """Our [F, REC, N] as torch's batch-first (N, T, F)."""
    return torch.tensor(x.transpose(2, 1, 0), requires_grad=grad)


def padding_mask(lengths: list[int], t: int):
    return torch.arange(t)[None, :] >= torch.tensor(lengths)[:, None]  # True: ignored (torch's convention)


def compare(layer, build: Callable, run_torch: Callable, pairs: Callable, inputs: list[list[ng.Axis]],
            lengths: dict[str, list[int]] | None = None) -> None:
    """Build ``layer`` through ``build(layer, *placeholders, **length_ops)``, copy the weights torch's module
    got (``pairs``), and compare the output and the gradients of ``sum(out * R)`` to every input and weight."""
    rng = np.random.default_rng(0)
    values = [rng.standard_normal([a.length for a in axes]) for axes in inputs]
    xs = [ng.placeholder(axes, dtype="float64") for axes in inputs]
    length_ops = {k: ng.placeholder([inputs[0][2]], dtype="int32") for k in (lengths or {})}
    with training_mode(True):
        out = build(layer, *xs, **length_ops)
    assert out.axes == xs[0].axes
    r = rng.standard_normal(out.axes.lengths)
    tensors = [nte(v) for v in values]
    module, torch_out = run_torch(*tensors)
    matched = pairs(layer, module)
    assert len(matched) == len(layer.trainable_variables)
    loss = ng.sum(out * ng.constant(r, out.axes, dtype="float64"))
    variables = [v for v, _, _, _ in matched]
    grads = ng.gradients(loss, xs + variables)
    (torch_out * torch.tensor(r.transpose(2, 1, 0))).sum().backward()
    feeds = values + [np.array(v, dtype=np.int32) for v in (lengths or {}).values()]
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        for v, p, rows, to_ours in matched:
            t.write_variable(v, to_ours(p.detach().numpy()[rows]))
        got = t.computation([out, *grads], *xs, *length_ops.values())(*feeds)
    np.testing.assert_allclose(got[0], torch_out.detach().numpy().transpose(2, 1, 0), atol=TOL, rtol=TOL,
                               err_msg="forward")
    for i, tensor in enumerate(tensors):
        np.testing.assert_allclose(got[1 + i], tensor.grad.numpy().transpose(2, 1, 0), atol=TOL, rtol=TOL,
                                   err_msg=f"gradient to input {i}")
    for g, (v, p, rows, to_ours) in zip(got[1 + len(xs):], matched):
        np.testing.assert_allclose(g, to_ours(p.grad.numpy()[rows]), atol=TOL, rtol=TOL,
                                   err_msg=f"gradient to {v.name}")


def test_layer_norm_matches_torch() -> None:
    def run_torch(x):
        module = torch.nn.LayerNorm(E, eps=1e-4, dtype=torch.float64)
        with torch.no_grad():
            module.weight.uniform_(0.5, 1.5)
            module.bias.uniform_(-1, 1)
        return module, module(x)

    compare(LayerNorm(eps=1e-4), lambda layer, x: layer(x), run_torch, norm_pairs, [seq()])


@pytest.mark.parametrize("causal", [False, True])
def test_self_attention_matches_torch_with_padding(causal: bool) -> None:
    def run_torch(x):
        torch.manual_seed(1)
        module = torch.nn.MultiheadAttention(E, HEADS, batch_first=True, dtype=torch.float64)
        with torch.no_grad():
            module.in_proj_bias.uniform_(-0.5, 0.5)
            module.out_proj.bias.uniform_(-0.5, 0.5)
        mask = torch.ones(T, T, dtype=torch.bool).triu(1) if causal else None
        y, _ = module(x, x, x, key_padding_mask=padding_mask(LENGTHS, T), attn_mask=mask, need_weights=False)
        return module, y

    compare(MultiHeadAttention(HEADS, causal=causal), lambda layer, x, lengths: layer(x, lengths=lengths), run_torch,
            mha_pairs, [seq()], {"lengths": LENGTHS})


def test_cross_attention_matches_torch_with_memory_padding() -> None:
    def run_torch(x, memory):
        torch.manual_seed(2)
        module = torch.nn.MultiheadAttention(E, HEADS, batch_first=True, dtype=torch.float64)
        with torch.no_grad():
            module.in_proj_bias.uniform_(-0.5, 0.5)
        y, _ = module(x, memory, memory, key_padding_mask=padding_mask(MEMORY_LENGTHS, S), need_weights=False)
        return module, y

    compare(MultiHeadAttention(HEADS),
            lambda layer, x, m, memory_lengths: layer(x, m, memory_lengths=memory_lengths), run_torch, mha_pairs,
            [seq(), seq(t=S, name="M")], {"memory_lengths": MEMORY_LENGTHS})


@pytest.mark.parametrize("norm_first", [False, True])
@pytest.mark.parametrize("activation", ["relu", "gelu"])
def test_encoder_layer_matches_torch(norm_first: bool, activation: str) -> None:
    def run_torch(x):
        torch.manual_seed(3)
        module = torch.nn.TransformerEncoderLayer(E, HEADS, FF, dropout=0.0, activation=activation,
                                                  norm_first=norm_first, batch_first=True, dtype=torch.float64)
        with torch.no_grad():
            for p in module.parameters():
                if p.dim() == 1:
                    p.uniform_(-0.5, 0.5)
        return module, module(x, src_key_padding_mask=padding_mask(LENGTHS, T))

    layer = TransformerEncoderLayer(HEADS, FF, dropout=0.0, activation=activation, norm_first=norm_first)
    compare(layer, lambda layer, x, lengths: layer(x, lengths=lengths), run_torch, block_pairs, [seq()],
            {"lengths": LENGTHS})


@pytest.mark.parametrize("norm_first", [False, True])
def test_decoder_layer_matches_torch(norm_first: bool) -> None:
    def run_torch(x, memory):
        torch.manual_seed(4)
        module = torch.nn.TransformerDecoderLayer(E, HEADS, FF, dropout=0.0, activation="gelu", norm_first=norm_first,
                                                  batch_first=True, dtype=torch.float64)
        with torch.no_grad():
            for p in module.parameters():
                if p.dim() == 1:
                    p.uniform_(-0.5, 0.5)
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)
        y = module(x, memory, tgt_mask=causal, tgt_key_padding_mask=padding_mask(LENGTHS, T),
                   memory_key_padding_mask=padding_mask(MEMORY_LENGTHS, S))
        return module, y

    layer = TransformerDecoderLayer(HEADS, FF, dropout=0.0, activation="gelu", norm_first=norm_first)
    compare(layer, lambda layer, x, m, lengths, memory_lengths: layer(x, m, lengths=lengths,
                                                                       memory_lengths=memory_lengths),
            run_torch, block_pairs, [seq(), seq(t=S)], {"lengths": LENGTHS, "memory_lengths": MEMORY_LENGTHS})


def test_decoder_stack_matches_torch() -> None:
    """``TransformerDecoder`` (2 post-norm layers and a final norm) against ``nn.TransformerDecoder``: outputs and
    the gradients to the target, the memory and every weight of both layers and the norm."""
    def run_torch(x, memory):
        torch.manual_seed(5)
        layer = torch.nn.TransformerDecoderLayer(E, HEADS, FF, dropout=0.0, activation="relu", batch_first=True,
                                                 dtype=torch.float64)
        module = torch.nn.TransformerDecoder(layer, 2, norm=torch.nn.LayerNorm(E, dtype=torch.float64))
        with torch.no_grad():
            for p in module.parameters():
                if p.dim() == 1:
                    p.uniform_(-0.5, 0.5)
        causal = torch.ones(T, T, dtype=torch.bool).triu(1)
        y = module(x, memory, tgt_mask=causal, tgt_key_padding_mask=padding_mask(LENGTHS, T),
                   memory_key_padding_mask=padding_mask(MEMORY_LENGTHS, S))
        return module, y

    def stack_pairs(ours: TransformerDecoder, theirs) -> list:
        return [pair for mine, its in zip(ours.layers, theirs.layers, strict=True) for pair in block_pairs(mine, its)] \
            + norm_pairs(ours.final_norm, theirs.norm)

    decoder = TransformerDecoder(2, HEADS, FF, dropout=0.0, final_norm=True)
    compare(decoder, lambda layer, x, m, lengths, memory_lengths: layer(x, m, lengths=lengths,
                                                                         memory_lengths=memory_lengths),
            run_torch, stack_pairs, [seq(), seq(t=S)], {"lengths": LENGTHS, "memory_lengths": MEMORY_LENGTHS})
    config = decoder.get_config()
    assert (config["num_layers"], config["final_norm"], config["causal"]) == (2, True, True)
    assert deserialize_layer(serialize_layer(decoder)).get_config() == config
    with pytest.raises(LayerError, match="a memory op"):
        TransformerDecoder(1, 2, 8)(ng.placeholder(seq()))


# -- a model on ragged sequences, and its checkpoint -------------------------------------------------------------


def test_a_transformer_model_fits_ragged_sequences_and_its_checkpoint_reloads(tmp_path: Path) -> None:
    rng = np.random.default_rng(0)
    seqs = [rng.standard_normal((int(rng.integers(3, 9)), 3)).astype(np.float32) for _ in range(64)]
    y = np.array([int(s[:, 0].sum() > 0) for s in seqs])

    def layers() -> list:
        return [Affine(8), SinusoidalPositionEmbedding(), PositionEmbedding(16),
                TransformerEncoder(2, 2, 16, dropout=0.1, norm_first=True, final_norm=True), RecurrentMean(),
                Affine(2, activation=Softmax())]

    data = SequenceIterator(seqs, y, nclass=2, batch_size=16, bucket_boundaries=[5], shuffle=True, seed=0)
    model = Model(layers())
    history = model.fit(data, CrossEntropyMulti(), Adam(0.01), 15, progress=False)
    assert history["train_cost"][-1] < 0.8 * history["train_cost"][0], history["train_cost"]
    model.save_params(tmp_path / "transformer.h5")
    fresh = load_model(tmp_path / "transformer.h5")
    test = SequenceIterator(seqs[:20], y[:20], nclass=2, batch_size=10)
    np.testing.assert_allclose(fresh.get_outputs(test), model.get_outputs(test), rtol=1e-6)


def test_padding_past_the_lengths_does_not_change_the_valid_outputs() -> None:
    rng = np.random.default_rng(1)
    seqs = [rng.standard_normal((n, 3)).astype(np.float32) for n in (3, 6, 4, 6)]
    y = np.zeros(4, dtype=int)
    model = Model([Affine(8), TransformerEncoderLayer(2, 16, dropout=0.0), RecurrentMean(),
                   Affine(2, activation=Softmax())])
    out = model.get_outputs(SequenceIterator(seqs, y, nclass=2, batch_size=4))
    padded = model.get_outputs(SequenceIterator(seqs, y, nclass=2, batch_size=4, pad_value=9.0))
    np.testing.assert_allclose(padded, out, rtol=1e-5, atol=1e-6)


# -- errors -----------------------------------------------------------------------------------------------------


def test_errors_say_what_was_expected() -> None:
    x = ng.placeholder(seq())
    with pytest.raises(LayerError, match="divisible by num_heads=4"):
        MultiHeadAttention(4)(x)
    with pytest.raises(LayerError, match="num_heads to be a positive int"):
        MultiHeadAttention(0)
    with pytest.raises(LayerError, match="dropout to be a number in"):
        TransformerEncoderLayer(2, dropout=1.0)
    with pytest.raises(LayerError, match="one feature axis"):
        MultiHeadAttention(2)(ng.placeholder([axis("C", 2), axis("F", 6), axis("REC", 5), axis("N", 3)]))
    with pytest.raises(LayerError, match="recurrent axis named 'REC'"):
        MultiHeadAttention(2)(ng.placeholder([axis("F", 6), axis("N", 3)]))
    with pytest.raises(LayerError, match="at most max_length=4"):
        PositionEmbedding(4)(x)
    with pytest.raises(LayerError, match="memory_lengths only with a memory"):
        MultiHeadAttention(2)(x, memory_lengths=ng.placeholder([axis("N", 3)], dtype="int32"))
    with pytest.raises(LayerError, match="a memory op"):
        TransformerDecoderLayer(2, 8)(x)
    with pytest.raises(LayerError, match="lengths as an op with axes"):
        MultiHeadAttention(2)(x, lengths=ng.placeholder([axis("REC", 5)], dtype="int32"))


# -- cross-attention on a memory of another feature size (torch's kdim / vdim) ------------------------------------


FM = 4  # the memory's features, != E


def mha_pairs_kdim(ours: MultiHeadAttention, theirs) -> list[tuple[ng.Op, object, slice, Callable]]:
    """``mha_pairs`` for a torch module with ``kdim``/``vdim`` != ``embed_dim``: separate q/k/v projection weights
    (``q_proj_weight [E, E]``, ``k_proj_weight [E, kdim]``, ``v_proj_weight [E, vdim]``; no ``in_proj_weight``)."""
    assert theirs.in_proj_weight is None and theirs.k_proj_weight.shape == (E, FM)
    b = theirs.in_proj_bias
    q, k, v = slice(0, E), slice(E, 2 * E), slice(2 * E, 3 * E)
    pairs = [(ours.Wq, theirs.q_proj_weight, ALL, heads_first), (ours.Wk, theirs.k_proj_weight, ALL, heads_first),
             (ours.Wv, theirs.v_proj_weight, ALL, heads_first),
             (ours.bq, b, q, heads_first), (ours.bk, b, k, heads_first), (ours.bv, b, v, heads_first)]
    pairs.append((ours.Wo, theirs.out_proj.weight, ALL, lambda a: np.swapaxes(a.reshape(E, HEADS, -1), 1, 2)))
    pairs.append((ours.bo, theirs.out_proj.bias, ALL, same))
    return pairs


def test_cross_attention_on_a_memory_of_another_size_matches_torch_kdim_vdim() -> None:
    """Queries of E=6 features over a memory of FM=4 (torch's ``kdim=vdim=4``), with memory padding: the output and
    the gradients to the query, the memory (used as both key and value) and every weight, in float64."""
    def run_torch(x, memory):
        torch.manual_seed(6)
        module = torch.nn.MultiheadAttention(E, HEADS, kdim=FM, vdim=FM, batch_first=True, dtype=torch.float64)
        with torch.no_grad():
            module.in_proj_bias.uniform_(-0.5, 0.5)
            module.out_proj.bias.uniform_(-0.5, 0.5)
        y, _ = module(x, memory, memory, key_padding_mask=padding_mask(MEMORY_LENGTHS, S), need_weights=False)
        return module, y

    layer = MultiHeadAttention(HEADS)
    compare(layer, lambda layer, x, m, memory_lengths: layer(x, m, memory_lengths=memory_lengths), run_torch,
            mha_pairs_kdim, [seq(), seq(f=FM, t=S, name="M")], {"memory_lengths": MEMORY_LENGTHS})
    assert layer.Wk.axes.lengths == layer.Wv.axes.lengths == (E // HEADS, HEADS, FM)
