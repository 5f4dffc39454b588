"""ng.inference.generation: the Generator runs one window then one step per token and agrees with the window
re-run; the overflow policies at the context limit; compile_generator (fp32, fp16); the errors."""

from __future__ import annotations

import functools
import math

import numpy as np
import pytest

import ngraph_core as ng
from model_zoo.char_transformer import CharTransformer
from neon.data.text import Vocabulary
from neon.layers import Affine
from neon.model import Model
from ngraph_core.inference import GenerationError, GenerationGraphs, Generator, compile_generator

CONTEXT = 12


@functools.lru_cache(maxsize=1)
def model() -> CharTransformer:
    """An untrained 2-layer character Transformer (its logits are not flat: greedy text varies)."""
    return CharTransformer(Vocabulary.from_text("abcdefghijklmnop \n"), d_model=16, num_layers=2, num_heads=2,
                           context=CONTEXT, seed=0)


def reference(prompt: list[int], length: int) -> list[int]:
    """Greedy tokens from the model's own window re-run (``next_logits``: no cache, the last CONTEXT tokens)."""
    ids = list(prompt)
    for _ in range(length):
        ids.append(int(np.argmax(model().next_logits(np.array(ids)))))
    return ids[len(prompt):]


@pytest.mark.parametrize("step_prefill", [0, 3], ids=["window-prefill", "step-prefill"])
def test_one_prefill_then_one_step_per_token_and_the_same_tokens(step_prefill) -> None:
    generator = compile_generator(model(), step_prefill=step_prefill)
    prompt = [3, 1, 4]
    length = CONTEXT - len(prompt) + 1  # fills the cache (the last token is not written), no overflow
    tokens = generator.generate(prompt, length)
    assert tokens == reference(prompt, length)
    runs = (1, length - 1) if step_prefill == 0 else (0, len(prompt) + length - 1)  # the prompt: a window or steps
    assert (generator.window_runs, generator.step_runs) == runs
    assert generator.position == CONTEXT and generator.tokens == prompt + tokens[:-1]
    assert generator.generate(prompt, 4, cached=False) == tokens[:4]
    assert (generator.window_runs, generator.step_runs) == (4, 0)  # uncached: the window for every token


def test_step_logits_equal_the_window_logits() -> None:
    generator = compile_generator(model())
    ids = np.random.default_rng(0).integers(0, 18, CONTEXT)
    logits = generator.start(ids[:2])
    for i in range(2, CONTEXT):
        np.testing.assert_allclose(logits, model().next_logits(ids[:i]), rtol=1e-5, atol=1e-5)
        logits = generator.append(int(ids[i]))
    np.testing.assert_allclose(logits, model().next_logits(ids), rtol=1e-5, atol=1e-5)


def test_overflow_window_is_exact_shift_prefills_from_the_last_half_error_stops() -> None:
    prompt, length = [2, 7], 3 * CONTEXT
    window = compile_generator(model(), overflow="window", step_prefill=0)
    assert window.generate(prompt, length) == reference(prompt, length)
    assert window.step_runs == CONTEXT - len(prompt) and window.window_runs == length - window.step_runs
    shift = compile_generator(model(), overflow="shift", step_prefill=0)
    tokens = shift.generate(prompt, length)
    assert tokens[:CONTEXT - 1] == reference(prompt, CONTEXT - 1)  # the same until the cache is full
    # then a window run over the last CONTEXT // 2 tokens, and CONTEXT // 2 steps to fill the cache again
    assert shift.window_runs == 1 + math.ceil((length - 1 - (CONTEXT - len(prompt))) / (CONTEXT // 2 + 1))
    assert shift.window_runs + shift.step_runs == length
    logits = shift.start(prompt + tokens[:CONTEXT - len(prompt)])  # full
    np.testing.assert_allclose(shift.append(5), model().next_logits(np.array(shift.tokens[-CONTEXT // 2:])),
                               rtol=1e-5, atol=1e-5)
    assert logits.shape == (18,)
    stop = compile_generator(model(), overflow="error")
    with pytest.raises(GenerationError, match=r"expected at most context=12 tokens \(overflow='error'\), received "
                                              r"token 13; hint"):
        stop.generate(prompt, length)
    with pytest.raises(GenerationError, match="expected a prompt of at most context=12 tokens"):
        stop.start(list(range(13)))


def test_fp16_weights_stay_close() -> None:
    generator = compile_generator(model(), precision="fp16")
    assert generator.step_model.precision == "fp16" and generator.window_model.weight_bytes > 0
    ids = [1, 2, 3]
    np.testing.assert_allclose(generator.start(ids), model().next_logits(np.array(ids)), atol=2e-2)


def test_the_errors_say_what_was_expected() -> None:
    with pytest.raises(GenerationError, match=r"expected a model with __ngraph_generation__.*received Model"):
        compile_generator(Model([Affine(2)]))
    with pytest.raises(GenerationError, match="expected precision 'fp32' or 'fp16', received 'int8'"):
        compile_generator(model(), precision="int8")
    graphs = model().generation_graphs(1)
    with pytest.raises(GenerationError, match=r"expected overflow in \('shift', 'window', 'error'\)"):
        Generator(graphs, print, print, overflow="slide")
    with pytest.raises(GenerationError, match="expected step_prefill to be an int >= 0, received -1"):
        Generator(graphs, print, print, step_prefill=-1)
    with pytest.raises(GenerationError, match="expected graphs of batch 1"):
        Generator(model().generation_graphs(2), print, print)
    with pytest.raises(GenerationError, match=r"expected 1 window input, step inputs \(ids, position, \*caches\)"):
        GenerationGraphs(graphs.window_inputs, graphs.window_outputs, graphs.step_inputs[:-1], graphs.step_outputs)
    short = ng.placeholder([ng.make_axis(3, "REC"), ng.make_axis(1, "N")])  # not a cache of 12 rows
    with pytest.raises(GenerationError, match="expected the step inputs' caches shaped as the step's outputs"):
        GenerationGraphs(graphs.window_inputs, graphs.window_outputs, (*graphs.step_inputs[:-1], short),
                         graphs.step_outputs)
    flat = ng.placeholder([ng.make_axis(18, "V"), ng.make_axis(1, "N")])
    with pytest.raises(GenerationError, match=r"expected logits \[V, REC, N\]"):
        GenerationGraphs(graphs.window_inputs, graphs.window_outputs, graphs.step_inputs,
                         (flat, *graphs.step_outputs[1:]))
    generator = compile_generator(model())
    with pytest.raises(GenerationError, match="expected start\\(prompt\\) first"):
        generator.append(1)
    with pytest.raises(GenerationError, match="expected a prompt of at least one token"):
        generator.start([])
    with pytest.raises(GenerationError, match="expected length to be an int >= 1, received 0"):
        generator.generate([1], 0)
