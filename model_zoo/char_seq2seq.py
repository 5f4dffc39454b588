"""A character encoder-decoder (Sutskever et al. 2014, without attention), as functions and as a script.

The model (``Seq2Seq``): source characters -> ``LookupTable`` -> ``LSTM`` (the encoder; only its
final state ``(h, c)`` after each example's last valid character is kept) -> the decoder, an
``LSTM`` over the target characters that *starts from the encoder's state*
(``initial_state=``) -> ``Affine(vocab)`` at every step.

* **Training: teacher forcing.** The target ``t`` is wrapped as ``<s> t </s>``; the decoder reads
  ``<s> t`` and is trained to emit ``t </s>``, one step ahead, with the mean cross entropy over the
  valid target steps (``masked_cross_entropy``: padding does not count). One training
  computation is compiled per ``(batch size, source length, target length)`` and cached;
  sources are padded to one bucket bound, so a run compiles a handful.
* **Decoding: greedy.** One ``ng.scan`` (``feedback_decode``) carries the decoder's state and the
  previous token: each step embeds the token, runs the cell and ``Affine``, and feeds the argmax
  back in; the output is cut at the first ``</s>``. Compiled once per ``(batch, source length,
  steps)``.

The tasks (``TASKS``): random pairs with one right answer, learnable in about a minute —

* ``reverse``: ``"kqzt" -> "tzqk"`` (3-10 letters of a-z);
* ``sort``: ``"kqzt" -> "kqtz"`` (3-10 letters of a-z);
* ``dates``: ``"2026-11-25" -> "25 Nov 2026"`` (any day of 1950-2049).

Training and held-out pairs are drawn from one seeded generator; held-out pairs that also occur
among the training pairs are dropped, so the reported figures are on unseen inputs: exact-match
accuracy (the whole output right) and the character error rate (``neon.metrics.CER``). Adam
(lr 3e-3, gradient norm clipped at 5), batches of 64, LSTMs of 128.

Measured on a shared 2-core machine (OpenBLAS on one thread): the default run (``dates``,
10,000 pairs, 5 epochs) gets all 747 held-out dates right (CER 0) in 40-80 s; ``reverse``
with ``--n-train 10000 --n-test 500 --epochs 8`` gets 87% exact, CER 4.6%, in about a minute
(more pairs and epochs do better: no attention, so the whole string must fit the state), and
``sort`` with the same settings 96% exact, CER 1.3%, in 35 s.

Usage:
    python -m model_zoo.char_seq2seq                                    # dates, 5 epochs of 10,000 pairs
    python -m model_zoo.char_seq2seq --task reverse --n-train 10000 --n-test 500 --epochs 8
    python -m model_zoo.char_seq2seq --task sort --n-train 10000 --n-test 300 --epochs 4   # quick: ~80% exact, 15 s

    >>> from model_zoo.char_seq2seq import train
    >>> result = train("dates", epochs=5)
    >>> result.model.decode(["2026-11-25"])
    ['25 Nov 2026']
"""

from __future__ import annotations

import argparse
import datetime
import string
import sys
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np

import ngraph_core as ng
from neon.callbacks import Callback, Checkpoint, EpochPrinter, History
from neon.data import SequenceIterator
from neon.data.sequences import pad_sequences
from neon.data.text import Vocabulary, char_pairs
from neon.initializers import set_seed
from neon.layers import LSTM, Affine, LookupTable
from neon.metrics import CER
from neon.optimizers import Adam

from .char_models import CharModel, CharModelError, feedback_decode, masked_cross_entropy, record_vocabulary
from .progress import add_progress_flag, show_progress

PAD, BOS, EOS = "<pad>", "<s>", "</s>"
LEARNING_RATE, CLIP_NORM = 3e-3, 5.0
DEFAULT_OUT = Path("out") / "char_seq2seq"
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")
Pair = tuple[str, str]


# -- the tasks ----------------------------------------------------------------------------------------
def random_letters(rng: np.random.Generator, low: int = 3, high: int = 10) -> str:
    """``low`` to ``high`` random letters of a-z."""
    return "".join(rng.choice(list(string.ascii_lowercase), size=int(rng.integers(low, high + 1))))


def reverse_pair(rng: np.random.Generator) -> Pair:
    """``("kqzt", "tzqk")``."""
    s = random_letters(rng)
    return s, s[::-1]


def sort_pair(rng: np.random.Generator) -> Pair:
    """``("kqzt", "kqtz")``."""
    s = random_letters(rng)
    return s, "".join(sorted(s))


def date_pair(rng: np.random.Generator) -> Pair:
    """``("2026-11-25", "25 Nov 2026")``: a uniformly drawn day of 1950-2049."""
    first = datetime.date(1950, 1, 1)
    day = first + datetime.timedelta(days=int(rng.integers(0, (datetime.date(2050, 1, 1) - first).days)))
    return day.isoformat(), f"{day.day:02d} {MONTHS[day.month - 1]} {day.year}"


TASKS: dict[str, Callable[[np.random.Generator], Pair]] = {"reverse": reverse_pair, "sort": sort_pair,
                                                           "dates": date_pair}
ALPHABETS = {"reverse": string.ascii_lowercase, "sort": string.ascii_lowercase,
             "dates": string.digits + "- " + "".join(sorted(set("".join(MONTHS))))}


def make_pairs(task: str, n_train: int, n_test: int, seed: int = 0) -> tuple[list[Pair], list[Pair]]:
    """``n_train`` training pairs and up to ``n_test`` held-out pairs whose sources are not among them.

    Raises:
        CharModelError: an unknown task or counts below 1.

    Example:
        >>> train_pairs, test_pairs = make_pairs("dates", 1000, 100)
        >>> train_pairs[0]
        ('2035-01-24', '24 Jan 2035')
    """
    if task not in TASKS:
        raise CharModelError(f"char_seq2seq: expected a task among {sorted(TASKS)}, received {task!r}; "
                             "hint: --task reverse")
    for key, value in (("n_train", n_train), ("n_test", n_test)):
        if isinstance(value, bool) or not isinstance(value, int) or value < 1:
            raise CharModelError(f"char_seq2seq: expected {key} to be an int >= 1, received {value!r}")
    rng = np.random.default_rng(seed)
    make = TASKS[task]
    train_pairs = [make(rng) for _ in range(n_train)]
    seen = {s for s, _ in train_pairs}
    test_pairs = [p for p in (make(rng) for _ in range(n_test)) if p[0] not in seen]
    return train_pairs, test_pairs


def task_vocabulary(task: str) -> Vocabulary:
    """``<pad>`` (0), ``<s>``, ``</s>``, then the task's characters."""
    return Vocabulary(sorted(ALPHABETS[task]), specials=(PAD, BOS, EOS))


# -- the model ----------------------------------------------------------------------------------------
class Seq2Seq(CharModel):
    """An LSTM encoder-decoder over characters (see the module docstring).

    Args:
        vocab: the characters, with ``<pad>`` (id 0), ``<s>`` and ``</s>`` among its specials.
        embedding_dim: the character vectors' length (encoder and decoder have their own table).
        hidden: the LSTMs' size (the decoder starts from the encoder's state, so they match).
        seed: seeds the initial weights (``set_seed``); None leaves the generator as it is.
        backend: the transformer backend; **transformer_options: for ``make_transformer``.

    Raises:
        CharModelError: a vocabulary without the specials.

    Example:
        >>> model = Seq2Seq(task_vocabulary("reverse"), hidden=128, seed=0)
        >>> model.fit_pairs(make_pairs("reverse", 20000, 1)[0], 8, Adam(3e-3)); model.decode(["abc"])
    """

    def __init__(self, vocab: Vocabulary, embedding_dim: int = 32, hidden: int = 128, seed: int | None = 0,
                 backend: str | None = None, **transformer_options: Any) -> None:
        missing = [t for t in (PAD, BOS, EOS) if t not in vocab.index]
        if missing or vocab.index[PAD] != 0:
            raise CharModelError(f"Seq2Seq: expected a vocabulary with {PAD} (id 0), {BOS} and {EOS}, received one "
                                 f"missing {missing or [PAD + ' at id 0']}; hint: Vocabulary(chars, specials="
                                 f"('{PAD}', '{BOS}', '{EOS}'))")
        if seed is not None:
            set_seed(seed)
        self.vocab, self.embedding_dim, self.hidden = vocab, embedding_dim, hidden
        size = len(vocab)
        super().__init__({"source_embed": LookupTable(size, embedding_dim),
                          "encoder": LSTM(hidden, forget_bias=1.0),
                          "target_embed": LookupTable(size, embedding_dim),
                          "decoder": LSTM(hidden, forget_bias=1.0, return_sequence=True),
                          "output": Affine(size, bias=0.0)}, backend, **transformer_options)

    # -- graphs ---------------------------------------------------------------------------------------
    @staticmethod
    def _ids(t: int, n: int, name: str) -> ng.Op:
        return ng.placeholder([ng.make_axis(t, "REC"), ng.make_axis(n, "N")], dtype="int32", name=name)

    @staticmethod
    def _lengths(n: int, name: str) -> ng.Op:
        return ng.placeholder([ng.make_axis(n, "N")], dtype="int32", name=name)

    def encode(self, source: ng.Op, lengths: ng.Op) -> tuple[ng.Op, ...]:
        """The encoder's final state ``(h, c)`` after each source's last valid character."""
        _, state = self.layers["encoder"](self.layers["source_embed"](source), lengths=lengths, return_state=True)
        return state

    def teacher_forced_logits(self, source: ng.Op, source_lengths: ng.Op, decoder_input: ng.Op,
                              decoder_lengths: ng.Op) -> ng.Op:
        """Logits ``[V, REC, N]`` of every target step, the decoder reading the true previous characters."""
        state = self.encode(source, source_lengths)
        h = self.layers["decoder"](self.layers["target_embed"](decoder_input), lengths=decoder_lengths,
                                   initial_state=state)
        return self.layers["output"](h)

    def build(self) -> None:
        n = 1
        self.teacher_forced_logits(self._ids(1, n, "source"), self._lengths(n, "source_lengths"),
                                   self._ids(1, n, "decoder_input"), self._lengths(n, "target_lengths"))

    def compile_step(self, shape: tuple[int, ...]) -> Any:
        n, t_source, t_target = shape
        source, source_lengths = self._ids(t_source, n, "source"), self._lengths(n, "source_lengths")
        decoder_input, target = self._ids(t_target, n, "decoder_input"), self._ids(t_target, n, "target")
        target_lengths = self._lengths(n, "target_lengths")
        logits = self.teacher_forced_logits(source, source_lengths, decoder_input, target_lengths)
        cost = masked_cross_entropy(logits, target, target_lengths)
        update = self.optimizer(cost, self.trainable_variables)
        return self.transformer.computation([cost, update], source, source_lengths, decoder_input, target,
                                            target_lengths)

    def _compile_cost(self, n: int, t_source: int, t_target: int) -> Any:
        source, source_lengths = self._ids(t_source, n, "source"), self._lengths(n, "source_lengths")
        decoder_input, target = self._ids(t_target, n, "decoder_input"), self._ids(t_target, n, "target")
        target_lengths = self._lengths(n, "target_lengths")
        cost = masked_cross_entropy(self.teacher_forced_logits(source, source_lengths, decoder_input, target_lengths),
                                    target, target_lengths)
        return self.transformer.computation(cost, source, source_lengths, decoder_input, target, target_lengths,
                                            mode="inference")

    def _compile_decode(self, n: int, t_source: int, steps: int) -> Any:
        source, source_lengths = self._ids(t_source, n, "source"), self._lengths(n, "source_lengths")
        decoder = self.layers["decoder"]
        state = decoder.initial(source, self.encode(source, source_lengths))  # onto the decoder's axes
        first = ng.broadcast(ng.constant(self.vocab.index[BOS], (), dtype="int32"), [source.axes.batch_axis])
        tokens = feedback_decode(self.layers["target_embed"], decoder.cell, self.layers["output"], state, first,
                                 steps)
        return self.transformer.computation(tokens, source, source_lengths, mode="inference")

    # -- training ---------------------------------------------------------------------------------------
    def train_step(self, source: np.ndarray, source_lengths: np.ndarray, target: np.ndarray,
                   target_lengths: np.ndarray) -> float:
        """One teacher-forced update on a batch of ``char_pairs``: ``target`` is ``<s> t </s>`` ``[REC, N]``.

        Returns:
            the batch's mean cross entropy per target character (nats), before the update.
        """
        n = int(source.shape[-1])
        step = self.training_step((n, int(source.shape[0]), int(target.shape[0]) - 1))
        return float(step(source, source_lengths, target[:-1], target[1:], target_lengths - 1)[0])

    def cost(self, pairs: Sequence[Pair], batch_size: int = 256) -> float:
        """The teacher-forced cross entropy per target character (nats) over ``pairs``."""
        total, count = 0.0, 0
        batches = char_pairs(list(pairs), self.vocab, bos=BOS, eos=EOS, batch_size=batch_size)
        for (x, x_lengths), (y, y_lengths) in batches.in_order():
            n = x.shape[-1]
            comp = self.inference(("cost", n, x.shape[0], y.shape[0] - 1),
                                  lambda n=n, x=x, y=y: self._compile_cost(n, x.shape[0], y.shape[0] - 1))
            steps = int(np.sum(y_lengths - 1))
            total += float(comp(x, x_lengths, y[:-1], y[1:], y_lengths - 1)) * steps
            count += steps
        return total / max(count, 1)

    def fit_pairs(self, pairs: Sequence[Pair], num_epochs: int, optimizer: Any, batch_size: int = 64,
                  seed: int = 0, callbacks: Sequence[Callback] | None = None,
                  end_epoch: Callable[[int], dict[str, float]] | None = None,
                  resume_from: str | Path | None = None, progress: bool = False) -> History:
        """Train on ``(source, target)`` strings with ``fit_loop`` (teacher forcing, shuffled each epoch).

        Sources are padded to the longest source (one bucket), targets to each batch's longest.

        Returns:
            the ``History``: per epoch ``lr``, ``train_cost`` and ``end_epoch``'s values.
        """
        longest = max(len(s) for s, _ in pairs)
        batches = PairBatches(char_pairs(list(pairs), self.vocab, bos=BOS, eos=EOS, batch_size=batch_size,
                                         bucket_boundaries=[longest], shuffle=True, seed=seed))

        def step(x: np.ndarray, y: tuple[np.ndarray, np.ndarray, np.ndarray]) -> dict[str, float]:
            return {"cost": self.train_step(x, *y)}

        return self.fit(batches, num_epochs, optimizer, step, callbacks=callbacks, end_epoch=end_epoch,
                        resume_from=resume_from, progress=progress)

    # -- decoding ---------------------------------------------------------------------------------------
    def decode(self, sources: Sequence[str], max_length: int | None = None, batch_size: int = 256) -> list[str]:
        """Greedy decoding: each source's output up to its first ``</s>`` (at most ``max_length`` chars).

        Args:
            sources: strings of the vocabulary's characters.
            max_length: the most characters generated (default: twice the longest source, plus 2).
            batch_size: sources decoded together.

        Returns:
            one string per source; the characters are the vocabulary's, never its specials.

        Raises:
            DataError: a character outside the vocabulary; CharModelError: an empty source.

        Example:
            >>> model.decode(["2026-11-25", "1999-01-02"])
            ['25 Nov 2026', '02 Jan 1999']
        """
        if isinstance(sources, str):
            raise CharModelError("Seq2Seq.decode: expected a list of strings, received one string; "
                                 "hint: decode([source])")
        if any(len(s) == 0 for s in sources):
            raise CharModelError("Seq2Seq.decode: expected non-empty sources, received an empty string")
        if not sources:
            return []
        limit = 2 * max(len(s) for s in sources) + 2 if max_length is None else int(max_length)
        if limit < 1:
            raise CharModelError(f"Seq2Seq.decode: expected max_length >= 1, received {max_length!r}")
        steps = limit + 1  # room for </s> after the longest output
        eos = self.vocab.index[EOS]
        out: list[str] = []
        for start in range(0, len(sources), batch_size):
            chunk = sources[start:start + batch_size]
            x, lengths = pad_sequences([self.vocab.encode(s) for s in chunk])
            key = ("decode", x.shape[1], x.shape[0], steps)
            comp = self.inference(key, lambda k=key: self._compile_decode(k[1], k[2], k[3]))
            tokens = np.asarray(comp(x, lengths))
            for column in tokens.T:
                ids = column.tolist()
                ids = (ids[:ids.index(eos)] if eos in ids else ids)[:limit]
                out.append(self.vocab.decode(i for i in ids if i >= 3))  # specials never appear in the text
        return out

    def evaluate(self, pairs: Sequence[Pair]) -> dict[str, float]:
        """Greedy outputs against the targets: ``{"accuracy": exact matches / pairs, "cer": CER}``."""
        hyps = self.decode([s for s, _ in pairs], max_length=max(len(t) for _, t in pairs) + 2)
        refs = [t for _, t in pairs]
        return {"accuracy": float(np.mean([h == r for h, r in zip(hyps, refs)])), "cer": float(CER()(refs, hyps))}

    def config(self) -> dict[str, Any]:
        return {"class_name": "Seq2Seq", "vocab": self.vocab.tokens, "embedding_dim": self.embedding_dim,
                "hidden": self.hidden}

    @classmethod
    def from_record(cls, record: Mapping[str, Any], input_shape: tuple[int, ...] | None, *,
                    custom_objects: Mapping[str, type] | None = None, backend: str | None = None,
                    **transformer_options: Any) -> Seq2Seq:
        """The model ``config()`` describes (vocabulary, sizes), built; ``neon.load_model`` calls it.

        Raises:
            CheckpointError: a record without a vocabulary of strings.
        """
        model = cls(record_vocabulary(record), embedding_dim=record.get("embedding_dim"), hidden=record.get("hidden"),
                    seed=None, backend=backend, **transformer_options)
        model.build()
        return model


class PairBatches:
    """``char_pairs`` batches as ``fit_loop`` takes them: ``x`` = source ids ``[REC, N]``, ``y`` = ``(source
    lengths, targets, target lengths)`` (``fit_loop`` reads the batch size from ``x``)."""

    def __init__(self, batches: SequenceIterator) -> None:
        self.batches = batches

    @property
    def seed(self) -> int:
        return self.batches.seed

    @seed.setter
    def seed(self, value: int) -> None:
        self.batches.seed = value

    def set_epoch(self, epoch: int) -> None:
        self.batches.set_epoch(epoch)

    def __len__(self) -> int:
        return len(self.batches)

    def __iter__(self) -> Any:
        for (x, x_lengths), (y, y_lengths) in self.batches:
            yield x, (x_lengths, y, y_lengths)


# -- the recipe ----------------------------------------------------------------------------------------
@dataclass
class TrainResult:
    """What ``train`` returns: the model, its history, the held-out figures and examples."""

    model: Seq2Seq
    history: History
    accuracy: float
    cer: float
    examples: list[tuple[str, str, str]]
    seconds: float


def train(task: str = "dates", epochs: int = 5, n_train: int = 10000, n_test: int = 1000,
          batch_size: int = 64, hidden: int = 128, embedding_dim: int = 32, learning_rate: float = LEARNING_RATE,
          seed: int = 0, out: str | Path | None = None, progress: bool = False) -> TrainResult:
    """Train a ``Seq2Seq`` on ``task`` and report exact-match accuracy and CER on held-out pairs.

    Args:
        task: ``"reverse"``, ``"sort"`` or ``"dates"``.
        epochs: passes over the training pairs.
        n_train, n_test: pairs drawn (held-out ones seen in training are dropped).
        batch_size, hidden, embedding_dim, learning_rate: the model and Adam's rate.
        seed: seeds the pairs, the weights and the batch order.
        out: a folder for ``<task>.h5`` (the last epoch's checkpoint), or None.
        progress: show ``fit_loop``'s progress bar.

    Returns:
        a ``TrainResult``.

    Raises:
        CharModelError: an unknown task or bad counts.

    Example:
        >>> train("dates", epochs=5).accuracy   # 1.0
    """
    started = time.perf_counter()
    train_pairs, test_pairs = make_pairs(task, n_train, n_test, seed)
    model = Seq2Seq(task_vocabulary(task), embedding_dim, hidden, seed=seed)
    optimizer = Adam(learning_rate, gradient_clip_norm=CLIP_NORM)
    print(f"task {task}: {len(train_pairs)} training and {len(test_pairs)} held-out pairs, e.g. "
          f"{train_pairs[0][0]!r} -> {train_pairs[0][1]!r}; LSTM {hidden}, Adam {learning_rate}", flush=True)

    def end_epoch(epoch: int) -> dict[str, float]:
        figures = model.evaluate(test_pairs)
        return {"valid_cost": model.cost(test_pairs), "valid_accuracy": figures["accuracy"],
                "valid_cer": figures["cer"]}

    callbacks: list[Callback] = [EpochPrinter([("train_cost", "train_cost", ".4f"), ("valid_cost", "valid_cost", ".4f"),
                                               ("valid_accuracy", "exact", "%"), ("valid_cer", "CER", "%")])]
    if out is not None:
        Path(out).mkdir(parents=True, exist_ok=True)
        callbacks.append(Checkpoint(Path(out) / f"{task}.h5"))
    history = model.fit_pairs(train_pairs, epochs, optimizer, batch_size, seed, callbacks, end_epoch,
                              progress=progress)
    figures = model.evaluate(test_pairs)
    sample = test_pairs[:5]
    examples = list(zip([s for s, _ in sample], [t for _, t in sample], model.decode([s for s, _ in sample])))
    seconds = time.perf_counter() - started
    print(f"held-out: exact match {100 * figures['accuracy']:.1f}%, CER {100 * figures['cer']:.2f}% "
          f"({len(test_pairs)} pairs, {seconds:.0f} s in all)")
    for source, target, output in examples:
        print(f"  {source!r} -> {output!r}  ({'ok' if output == target else 'expected ' + repr(target)})")
    return TrainResult(model, history, figures["accuracy"], figures["cer"], examples, seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--task", choices=sorted(TASKS), default="dates")
    parser.add_argument("--epochs", type=int, default=5)
    parser.add_argument("--n-train", type=int, default=10000)
    parser.add_argument("--n-test", type=int, default=1000)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--hidden", type=int, default=128)
    parser.add_argument("--embedding-dim", type=int, default=32)
    parser.add_argument("--lr", type=float, default=LEARNING_RATE)
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--out", type=Path, default=None, help=f"write <task>.h5 here (e.g. {DEFAULT_OUT})")
    add_progress_flag(parser)
    args = parser.parse_args(argv)
    train(args.task, args.epochs, args.n_train, args.n_test, args.batch_size, args.hidden, args.embedding_dim,
          args.lr, args.seed, args.out, progress=show_progress(args.progress))
    return 0


if __name__ == "__main__":
    sys.exit(main())
