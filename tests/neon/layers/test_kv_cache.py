"""neon.layers.kv_cache: the cached step's logits equal the full window's at every position (pre- and post-norm,
one and three layers, learned and sinusoidal positions, prompts of 1 and 5 tokens; float32 and float64), rows
past the position never matter, and the errors."""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np
import pytest

import ngraph_core as ng
from neon.initializers import set_seed
from neon.layers import (
    Affine,
    LayerError,
    LookupTable,
    PositionEmbedding,
    SinusoidalPositionEmbedding,
    TransformerDecoder,
    TransformerEncoder,
)
from neon.layers.kv_cache import cache_placeholders, check_cacheable, decode_step, position_step, prefill

VOCAB, CONTEXT, D_MODEL = 13, 10, 16


@dataclass
class TinyLM:
    """A decoder-only LM's two compiled graphs: the window (logits and caches) and the cached step."""

    window: ng.transformers.Computation
    step: ng.transformers.Computation

    def window_run(self, ids: np.ndarray) -> tuple[np.ndarray, list[np.ndarray]]:
        logits, *caches = self.window(ids[:, None].astype(np.int32))
        return np.asarray(logits)[:, :, 0], list(caches)

    def step_run(self, token: int, position: int, caches: list[np.ndarray]) -> tuple[np.ndarray, list[np.ndarray]]:
        logits, *caches = self.step(np.array([[token]], np.int32), np.array([position], np.int32), *caches)
        return np.asarray(logits)[:, 0, 0], list(caches)


def tiny_lm(norm_first: bool, layers: int, sinusoidal: bool, dtype: str = "float32") -> TinyLM:
    set_seed(0)
    embed = LookupTable(VOCAB, D_MODEL)
    position = SinusoidalPositionEmbedding() if sinusoidal else PositionEmbedding(CONTEXT)
    encoder = TransformerEncoder(layers, 4, 32, dropout=0.0, norm_first=norm_first, causal=True,
                                 final_norm=norm_first)
    output = Affine(VOCAB, bias=0.0)
    batch = ng.make_axis(1, "N")
    ids = ng.placeholder([ng.make_axis(CONTEXT, "REC"), batch], dtype="int32")
    h, written = prefill(encoder, position(embed(ids)))
    token = ng.placeholder([ng.make_axis(1, "REC"), batch], dtype="int32")
    at = ng.placeholder([batch], dtype="int32")
    caches = cache_placeholders(encoder, CONTEXT, batch)
    y, stepped = decode_step(encoder, position_step(position, embed(token), at, CONTEXT), caches, at)
    t = ng.transformers.make_transformer("numpy", float_dtype=dtype)

    def flat(pairs):
        return [op for cache in pairs for op in (cache.keys, cache.values)]

    window = t.computation([output(h), *flat(written)], ids, mode="inference")
    step = t.computation([output(y), *flat(stepped)], token, at, *flat(caches), mode="inference")
    return TinyLM(window, step)


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-norm", "post-norm"])
@pytest.mark.parametrize("layers", [1, 3])
@pytest.mark.parametrize("sinusoidal", [False, True], ids=["learned", "sinusoidal"])
@pytest.mark.parametrize("prompt", [1, 5])
def test_step_logits_equal_the_window_at_every_position(norm_first, layers, sinusoidal, prompt) -> None:
    lm = tiny_lm(norm_first, layers, sinusoidal)
    ids = np.random.default_rng(layers).integers(0, VOCAB, CONTEXT)
    full, _ = lm.window_run(ids)  # the reference: every position's logits of one causal window
    padded = np.where(np.arange(CONTEXT) < prompt, ids, 0)  # the prompt, zero-padded as the driver does
    logits, caches = lm.window_run(padded)
    np.testing.assert_allclose(logits[:, prompt - 1], full[:, prompt - 1], rtol=1e-5, atol=1e-5)
    for position in range(prompt, CONTEXT):
        logits, caches = lm.step_run(int(ids[position]), position, caches)
        np.testing.assert_allclose(logits, full[:, position], rtol=1e-5, atol=1e-5, err_msg=f"position {position}")


@pytest.mark.parametrize("norm_first", [True, False], ids=["pre-norm", "post-norm"])
def test_float64_steps_agree_to_1e_10(norm_first) -> None:
    lm = tiny_lm(norm_first, 2, False, dtype="float64")
    ids = np.random.default_rng(5).integers(0, VOCAB, CONTEXT)
    full, _ = lm.window_run(ids)
    logits, caches = lm.window_run(np.where(np.arange(CONTEXT) < 1, ids, 0))
    assert caches[0].dtype == np.float64
    for position in range(1, CONTEXT):
        logits, caches = lm.step_run(int(ids[position]), position, caches)
        np.testing.assert_allclose(logits, full[:, position], rtol=0, atol=1e-10)


def test_rows_after_the_position_are_never_read() -> None:
    """Stale rows (another sequence's, or garbage) past the position change nothing: key_lengths hides them."""
    lm = tiny_lm(True, 2, False)
    ids = np.random.default_rng(1).integers(0, VOCAB, CONTEXT)
    _, caches = lm.window_run(np.where(np.arange(CONTEXT) < 4, ids, 0))
    rng = np.random.default_rng(2)
    dirty = []
    for cache in caches:
        noisy = np.array(cache)
        noisy[:, :, 4:] = 1e3 * rng.standard_normal(noisy[:, :, 4:].shape)  # [D, H, REC, N]: rows 4.. garbage
        dirty.append(noisy)
    clean_logits, clean = lm.step_run(int(ids[4]), 4, caches)
    dirty_logits, written = lm.step_run(int(ids[4]), 4, dirty)
    np.testing.assert_array_equal(clean_logits, dirty_logits)
    for a, b in zip(clean, written, strict=True):
        np.testing.assert_array_equal(a[:, :, :5], b[:, :, :5])  # rows 0..4 the same, row 4 just written


def _built_encoder(**options) -> TransformerEncoder:
    encoder = TransformerEncoder(1, 2, 8, dropout=0.0, **options)
    encoder(ng.placeholder([ng.make_axis(8, "F"), ng.make_axis(4, "REC"), ng.make_axis(1, "N")]))
    return encoder


def test_the_errors_say_what_was_expected() -> None:
    batch = ng.make_axis(1, "N")
    with pytest.raises(LayerError, match=r"expected causal self-attention.*hint: build the stack with .*causal=True"):
        cache_placeholders(_built_encoder(causal=False), 4, batch)
    with pytest.raises(LayerError, match=r"expected a TransformerEncoder .*received: TransformerDecoder"):
        check_cacheable(TransformerDecoder(1, 2, 8))
    replaced = TransformerEncoder(2, 2, 8, causal=True)
    replaced.layers[1] = LookupTable(4, 8)  # a stack edited by hand: a typed error, not an AttributeError
    with pytest.raises(LayerError, match=r"expected TransformerEncoderLayers .*received: LookupTable.*hint"):
        check_cacheable(replaced)
    with pytest.raises(LayerError, match=r"expected a built stack"):
        cache_placeholders(TransformerEncoder(1, 2, 8, causal=True), 4, batch)
    encoder = _built_encoder(causal=True)
    caches = cache_placeholders(encoder, 4, batch)
    position = ng.placeholder([batch], dtype="int32")
    two_steps = ng.placeholder([ng.make_axis(8, "F"), ng.make_axis(2, "REC"), batch])
    with pytest.raises(LayerError, match=r"expected one new step x \[F, REC:1, N\].*hint: the cached step"):
        decode_step(encoder, two_steps, caches, position)
    one_step = ng.placeholder([ng.make_axis(8, "F"), ng.make_axis(1, "REC"), batch])
    with pytest.raises(LayerError, match=r"expected 1 caches \(one per layer\), received: 2"):
        decode_step(encoder, one_step, caches * 2, position)
    with pytest.raises(LayerError, match=r"expected an int position \[N:1\], received: float32"):
        decode_step(encoder, one_step, caches, ng.placeholder([batch]))
    with pytest.raises(LayerError, match=r"expected a PositionEmbedding or SinusoidalPositionEmbedding"):
        position_step(LookupTable(4, 8), one_step, position, 4)
    learned = PositionEmbedding(3)
    learned(ng.placeholder([ng.make_axis(8, "F"), ng.make_axis(3, "REC"), batch]))
    with pytest.raises(LayerError, match=r"expected a context of at most max_length=3, received: 4"):
        position_step(learned, one_step, position, 4)
