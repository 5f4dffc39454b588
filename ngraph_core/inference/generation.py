"""Generation with key/value caching: one compiled step per new token, not a re-run of the prefix.

A causal language model is compiled into **two functional graphs** (``GenerationGraphs``), and a
driver (``Generator``) carries the caches from one run to the next:

* the **window** ``(ids [REC:T, N]) -> (logits [V, REC:T, N], *caches)``: the model over a window of
  ``T`` tokens (the context), a prompt zero-padded after its end; it also returns every attention
  layer's keys and values (``[D, H, REC:T, N]``, ``[V, H, REC:T, N]``). Causal attention keeps the
  padding from reaching the prompt, so the logits at the prompt's last step are the ones a window
  re-run gives.
* the **step** ``(ids [REC:1, N], position [N], *caches) -> (logits [V, REC:1, N], *caches)``: one new
  token at ``position``; each layer writes its key and value into row ``position`` of the caches and
  attends over rows ``<= position`` (``neon.layers.kv_cache`` builds both for a neon stack).

Neither graph holds state, so each compiles once, as any graph, into a ``CompiledModel``
(``compile_generator``) or a plain computation (a model whose weights keep training: neon's
``CharTransformer.sample``). Then every generated token costs one step.

**The prefill.** A prompt of more than ``step_prefill`` tokens (default 8) is prefilled by **one
window run**; a shorter one token by token through the step, from zeroed caches. Both give the
same logits; the threshold is about cost: a window computes all ``T`` positions (padding
included) and on the NumPy backend costs as much as about 7.5 steps (``benchmarks/generation.py``'s
model, T = 128, one thread, AMD EPYC: 13.6 ms a window, 1.8 ms a step; a step is mostly per-op
overhead), so a one-token prompt would otherwise pay ``T`` positions for one.

**The context limit.** ``T`` rows hold steps ``0..T-1``; a model with learned absolute positions
cannot slide its cache (every key depends on its position), so a token past the context is
handled by the ``overflow`` policy:

* ``"shift"`` (``compile_generator``'s default): prefill again from the last ``T // 2`` tokens, then
  step on: one window run every ``T // 2 + 1`` tokens (llama.cpp's context shift). Past the context
  the model sees between ``T // 2`` and ``T`` tokens, so the text differs from a window re-run's.
* ``"window"``: every token past the context re-runs the window over the last ``T`` tokens: exactly
  what sampling without a cache computes (``CharTransformer.sample``'s default), at its cost.
* ``"error"``: a ``GenerationError``.

Example:
    >>> generator = ng.inference.compile_generator(char_model)          # a model with __ngraph_generation__
    >>> tokens = generator.generate(prompt_ids, 200)                   # greedy
    >>> generator.window_runs, generator.step_runs                      # a prompt of 20 tokens
    (1, 199)
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from ..ir import Op
from .compile import compile_for_inference
from .freeze import InferenceError
from .model import CompiledModel

__all__ = ["OVERFLOWS", "STEP_PREFILL", "GenerationError", "GenerationGraphs", "Generator", "compile_generator"]

OVERFLOWS = ("shift", "window", "error")
"""What a ``Generator`` does with a token past the context (module docstring)."""

STEP_PREFILL = 8
"""Prompts of at most so many tokens are prefilled through the step, longer ones by one window run."""

Run = Callable[..., Sequence[Any]]
Pick = Callable[[int, np.ndarray], int]


class GenerationError(InferenceError):
    """Generation was asked for something its graphs or settings cannot do."""


@dataclass(frozen=True)
class GenerationGraphs:
    """The window and step graphs of a causal language model and the weights they read (module docstring).

    Attributes:
        window_inputs: ``(ids [REC:T, N],)``, int.
        window_outputs: ``(logits [V, REC:T, N], *caches)``.
        step_inputs: ``(ids [REC:1, N], position [N], *caches)``, the caches in ``window_outputs``' order.
        step_outputs: ``(logits [V, REC:1, N], *caches)``.
        weights: variable -> its value (what ``compile_for_inference`` freezes).

    Raises:
        GenerationError: graphs that do not fit together (counts, axes, a logits without ``REC`` and ``N``).

    Example:
        >>> graphs = model.__ngraph_generation__(1)
        >>> graphs.context
        64
    """

    window_inputs: tuple[Op, ...]
    window_outputs: tuple[Op, ...]
    step_inputs: tuple[Op, ...]
    step_outputs: tuple[Op, ...]
    weights: Mapping[Op, Any] = field(default_factory=dict)

    def __post_init__(self) -> None:
        caches = len(self.window_outputs) - 1
        shapes = (len(self.window_inputs), len(self.step_inputs) - 2, len(self.step_outputs) - 1)
        if shapes != (1, caches, caches) or caches < 1:
            raise GenerationError(f"GenerationGraphs: expected 1 window input, step inputs (ids, position, *caches) "
                                  f"and outputs (logits, *caches) with the window's {caches} caches, received "
                                  f"{len(self.window_inputs)} window input(s), {len(self.step_inputs)} step inputs "
                                  f"and {len(self.step_outputs)} step outputs; hint: see the module docstring")
        written = [o.axes for o in self.step_outputs[1:]]
        for what, axes in (("window outputs", [o.axes for o in self.window_outputs[1:]]),
                           ("step inputs", [i.axes for i in self.step_inputs[2:]])):
            if [a.lengths for a in axes] != [a.lengths for a in written]:
                raise GenerationError(f"GenerationGraphs: expected the {what}' caches shaped as the step's outputs "
                                      f"{[a.lengths for a in written]}, received {[a.lengths for a in axes]}; hint: "
                                      "one cache per attention layer, [D, H, REC:context, N], in one order")
        for logits in (self.window_outputs[0], self.step_outputs[0]):
            if logits.axes.recurrent_axis is None or logits.axes.batch_axis is None or len(logits.axes) != 3:
                raise GenerationError(f"GenerationGraphs: expected logits [V, REC, N], received {logits.axes}; "
                                      "hint: the model's per-step output before any softmax")

    @property
    def context(self) -> int:
        """``T``: the window's length, the number of cache rows."""
        return self.window_inputs[0].axes.recurrent_axis.length


def _logit_index(logits: Op, step: int | None) -> Callable[[np.ndarray], np.ndarray]:
    """A function reading the class vector ``[V]`` of step ``t`` (``step`` None: an argument) of example 0."""
    rec, batch = logits.axes.index(logits.axes.recurrent_axis), logits.axes.index(logits.axes.batch_axis)

    def read(values: np.ndarray, t: int = step or 0) -> np.ndarray:
        index: list[Any] = [slice(None)] * 3
        index[rec], index[batch] = t, 0
        return np.asarray(values)[tuple(index)]

    return read


class Generator:
    """Feeds a causal model one token at a time, its key/value caches carried from step to step.

    It runs one sequence (batch 1: the graphs' ``N`` has length 1).

    Args:
        graphs: the model's ``GenerationGraphs``.
        run_window: runs the window graph: ``run_window(ids) -> [logits, *caches]``.
        run_step: runs the step graph: ``run_step(ids, position, *caches) -> [logits, *caches]``.
        overflow: ``"shift"``, ``"window"`` or ``"error"``: past the context (module docstring).
        step_prefill: prompts of at most this many tokens are fed through the step, longer ones through
            one window run (0: always the window).

    Attributes:
        context: the cache rows ``T``.
        tokens: the sequence so far (prompt and appended tokens).
        position: the next free cache row (``T`` when full).
        window_runs, step_runs: how often each graph ran since the last ``start`` (the test of "one step per token").
        window_model, step_model: the two ``CompiledModel``s when ``compile_generator`` made it, else None.

    Raises:
        GenerationError: an unknown overflow policy, a negative ``step_prefill``, graphs with a batch longer than 1.

    Example:
        >>> generator = Generator(graphs, window.infer, step.infer)
        >>> logits = generator.start([3, 1, 4]); logits = generator.append(int(logits.argmax()))
    """

    def __init__(self, graphs: GenerationGraphs, run_window: Run, run_step: Run, overflow: str = "shift",
                 step_prefill: int = STEP_PREFILL) -> None:
        if isinstance(step_prefill, bool) or not isinstance(step_prefill, int) or step_prefill < 0:
            raise GenerationError(f"Generator: expected step_prefill to be an int >= 0, received {step_prefill!r}; "
                                  "hint: 0 prefills every prompt with one window run")
        if overflow not in OVERFLOWS:
            raise GenerationError(f"Generator: expected overflow in {OVERFLOWS}, received {overflow!r}; hint: 'shift' "
                                  "(fast, approximate past the context) or 'window' (exact, re-runs past the context)")
        batch = graphs.window_inputs[0].axes.batch_axis
        if batch is None or batch.length != 1:
            raise GenerationError(f"Generator: expected graphs of batch 1 (one sequence), received ids "
                                  f"{graphs.window_inputs[0].axes}; hint: build them with __ngraph_generation__(1)")
        self.graphs, self.overflow, self.step_prefill = graphs, overflow, step_prefill
        self.context = graphs.context
        self._run_window, self._run_step = run_window, run_step
        self._window_logits = _logit_index(graphs.window_outputs[0], None)
        self._step_logits = _logit_index(graphs.step_outputs[0], 0)
        self._ids_dtype = graphs.window_inputs[0].dtype
        self._position_dtype = graphs.step_inputs[1].dtype
        self.tokens: list[int] = []
        self.position = 0
        self.window_runs = self.step_runs = 0
        self._caches: list[Any] = []
        self.window_model: CompiledModel | None = None
        self.step_model: CompiledModel | None = None

    def _prefill(self, tail: Sequence[int]) -> np.ndarray:
        """Run the window over ``tail`` (at most ``context`` tokens); the caches then hold its rows."""
        window = np.zeros(self.graphs.window_inputs[0].axes.lengths, dtype=self._ids_dtype)
        rec = self.graphs.window_inputs[0].axes.index(self.graphs.window_inputs[0].axes.recurrent_axis)
        np.moveaxis(window, rec, 0)[:len(tail)] = np.asarray(tail, dtype=self._ids_dtype).reshape(-1, 1)
        logits, *self._caches = self._run_window(window)
        self.window_runs += 1
        self.position = len(tail)
        return self._window_logits(logits, len(tail) - 1)

    def _prefill_by_steps(self, tail: Sequence[int]) -> np.ndarray:
        """Feed ``tail`` through the step from zeroed caches (rows past the position are never read)."""
        self._caches = [np.zeros(op.axes.lengths, dtype=op.dtype) for op in self.graphs.step_inputs[2:]]
        self.position = 0
        for token in tail:
            logits = self._step(token)
        return logits

    def _step(self, token: int) -> np.ndarray:
        ids = np.full(self.graphs.step_inputs[0].axes.lengths, token, dtype=self._ids_dtype)
        position = np.full(self.graphs.step_inputs[1].axes.lengths, self.position, dtype=self._position_dtype)
        logits, *self._caches = self._run_step(ids, position, *self._caches)
        self.step_runs += 1
        self.position += 1
        return self._step_logits(logits)

    def start(self, prompt: Sequence[int], by_window: bool | None = None) -> np.ndarray:
        """Forget the sequence; prefill ``prompt`` (its last ``context`` tokens): one window run, or token by
        token through the step when it has at most ``step_prefill`` tokens.

        Args:
            prompt: at least one token id.
            by_window: True: one window run, False: steps, whatever the prompt's length (None: as above).

        Returns:
            the logits ``[V]`` of the token after the prompt.

        Raises:
            GenerationError: an empty prompt; with ``overflow="error"``, a prompt longer than the context.
        """
        prompt = [int(t) for t in prompt]
        if not prompt:
            raise GenerationError("Generator.start: expected a prompt of at least one token, received none; "
                                  "hint: e.g. the id of a newline or of a start token")
        if self.overflow == "error" and len(prompt) > self.context:
            raise GenerationError(f"Generator.start: expected a prompt of at most context={self.context} tokens "
                                  f"(overflow='error'), received {len(prompt)}; hint: cut the prompt, or "
                                  "overflow='shift' / 'window'")
        self.tokens, self.window_runs, self.step_runs = prompt, 0, 0
        tail = prompt[-self.context:]
        by_window = len(tail) > self.step_prefill if by_window is None else by_window
        return self._prefill(tail) if by_window else self._prefill_by_steps(tail)

    def append(self, token: int) -> np.ndarray:
        """Add ``token`` to the sequence: one step (or, past the context, the ``overflow`` policy).

        Returns:
            the logits ``[V]`` of the token after it.

        Raises:
            GenerationError: no ``start`` yet; with ``overflow="error"``, a token past the context.
        """
        if not self.tokens:
            raise GenerationError("Generator.append: expected start(prompt) first, received a token with no "
                                  "sequence; hint: generator.start(prompt_ids)")
        self.tokens.append(int(token))
        if self.position >= self.context:
            if self.overflow == "error":
                raise GenerationError(f"Generator.append: expected at most context={self.context} tokens "
                                      f"(overflow='error'), received token {len(self.tokens)}; hint: "
                                      "overflow='shift' prefills again from the last half, 'window' re-runs")
            keep = self.context if self.overflow == "window" else max(1, self.context // 2)
            return self._prefill(self.tokens[-keep:])
        return self._step(int(token))

    def generate(self, prompt: Sequence[int], length: int, pick: Pick | None = None,
                 cached: bool = True) -> list[int]:
        """``length`` tokens after ``prompt``: ``start``, then ``append`` each picked token.

        Args:
            prompt: at least one token id.
            length: tokens to generate (>= 1).
            pick: ``pick(i, logits) -> token`` for the ``i``-th new token (default: the argmax, greedy).
            cached: False re-runs the window over the last ``context`` tokens for every token (no cache):
                the reference the cache must agree with, and the rate it is measured against.

        Returns:
            the generated token ids (without the prompt).

        Raises:
            GenerationError: a bad prompt or length; ``overflow="error"`` past the context.

        Example:
            >>> generator.generate([0], 50, pick=lambda i, logits: int(np.argmax(logits + noise[i])))
        """
        if isinstance(length, bool) or not isinstance(length, (int, np.integer)) or length < 1:
            raise GenerationError(f"Generator.generate: expected length to be an int >= 1, received {length!r}")
        pick = pick or (lambda _, logits: int(np.argmax(logits)))
        logits = self.start(prompt, by_window=None if cached else True)
        out: list[int] = []
        for i in range(int(length)):
            out.append(int(pick(i, logits)))
            if i + 1 < length:  # the last token needs no logits after it
                if cached:
                    logits = self.append(out[-1])
                else:
                    self.tokens.append(out[-1])
                    logits = self._prefill(self.tokens[-self.context:])
        return out


def compile_generator(source: Any, *, precision: str = "fp32", backend: str = "numpy", overflow: str = "shift",
                      step_prefill: int = STEP_PREFILL) -> Generator:
    """A ``Generator`` over the window and step graphs of ``source``, each compiled for inference (weights frozen).

    Args:
        source: an object with ``__ngraph_generation__(batch_size)`` returning ``GenerationGraphs`` (neon's
            ``CharTransformer``), or ``GenerationGraphs``.
        precision: ``"fp32"`` or ``"fp16"`` (INT8 needs activation calibration, not offered here).
        backend: the transformer backend.
        overflow: past the context (module docstring).
        step_prefill: prompts of at most so many tokens go through the step, longer ones one window run.

    Returns:
        the ``Generator``; ``window_model`` and ``step_model`` are its two ``CompiledModel``s.

    Raises:
        GenerationError: a source without the hook, ``precision="int8"``, an unknown overflow.

    Example:
        >>> generator = ng.inference.compile_generator(load_model("out/char_transformer.h5"))
        >>> generator.generate(vocab.encode("KING.\\n"), 100)
    """
    if precision == "int8":
        raise GenerationError("compile_generator: expected precision 'fp32' or 'fp16', received 'int8'; hint: INT8 "
                              "needs calibrated activation ranges, which generation does not collect; use fp16")
    graphs = source.__ngraph_generation__(1) if hasattr(source, "__ngraph_generation__") else source
    if not isinstance(graphs, GenerationGraphs):
        raise GenerationError(f"compile_generator: expected a model with __ngraph_generation__ (a causal language "
                              f"model, e.g. model_zoo's CharTransformer) or GenerationGraphs, received "
                              f"{type(source).__name__}; hint: load a char_transformer checkpoint")

    def compiled(inputs: Sequence[Op], outputs: Sequence[Op]) -> CompiledModel:
        return compile_for_inference((list(inputs), list(outputs)), weights=graphs.weights, precision=precision,
                                     backend=backend)

    window = compiled(graphs.window_inputs, graphs.window_outputs)
    step = compiled(graphs.step_inputs, graphs.step_outputs)
    run_window, run_step = window.new_executor(), step.new_executor()
    generator = Generator(graphs, run_window, run_step, overflow, step_prefill)
    generator.window_model, generator.step_model = window, step
    return generator
