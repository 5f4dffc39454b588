"""A DeepSpeech2-style recogniser (Amodei et al. 2016) trained with CTC on spoken digit strings.

The network (``ctc_speech_net``): a 1-D convolution over time (window 5, 128 filters, ReLU;
the log-mel bands are its channels), two bidirectional GRU layers (``hidden`` units per
direction, concatenated), and ``Affine`` to the ``len(ALPHABET) + 1`` character classes per
frame (blank = 0). The CTC cost (``neon.costs.CTC``) reads the logits; decoding is greedy
(``neon.decoders.greedy_decode``) and the score is the character error rate (``neon.metrics.CER``).

Data: by default ``espeak-ng`` speaks random strings of 1 to 4 digits ("three one four") in
64 voices (8 English accents x 8 voice variants) at 130-199 words per minute and pitch 20-79
(``neon.data.speech.synthesize_digits``); the WAVs are made once and cached, with the log-mel
features, under ``<data dir>/ctc_speech-seed<seed>`` (``.venv/data``; ``--data-dir`` moves it).
The targets are character sequences over ``ALPHABET`` (space and the 15 letters of the digit
words), so the CER counts letters and spaces. Utterances spoken by ``HELD_OUT_VOICES`` (8 of
the 64 voices, one per accent) form the test set: the model is scored on voices it never heard.

Features (``prepare``): 80 log-mel bands (25 ms windows, 10 ms hop), normalised per utterance
(mean 0, variance 1 per band), then ``stack`` consecutive frames concatenated (DeepSpeech2's
time stride: 2 gives 20 ms output frames and halves the recurrent steps). The stacking happens
before the model, so the lengths ``Model.fit`` hands to the recurrent layers, and the frame
counts in the packed CTC targets, are the model's own frame counts.

Measured on 2 cores (numpy backend) while other jobs held the machine (load average about 8),
so the times are upper bounds: ``train()`` with the defaults (800 utterances: 699 training, 101
test from the held-out voices; hidden 96, batch 16, 4 epochs, Adam 2e-3 with gradients clipped
to global norm 5) reaches a held-out **CER of 0.006-0.007** (0.625, 0.171, 0.016, 0.007 after
epochs 1-4; 0.003 after 6) in 2.5 minutes (30-55 s per epoch; 92 s of CPU time), plus about 2
minutes once to synthesise the set. The CI
setting (``CI_SETTINGS``: 160 utterances, hidden 64, batch 8, 6 epochs, Adam 3e-3) reached
0.44 after 5 epochs; the test asserts ``CI_CER_BAR`` (0.6) after 6 (about 60 s of CPU time,
synthesis included).

Writes, under ``--out`` (default ``./out/ctc_speech``): ``ctc_speech.h5`` (weights, optimizer
state, history), ``ctc_speech_history.csv`` and ``ctc_speech_samples.txt`` (reference and
decoded text of the test utterances).

Usage:
    python -m model_zoo.ctc_speech                        # 800 utterances, 4 epochs: CER 0.006
    python -m model_zoo.ctc_speech --n-utterances 160 --epochs 6 --hidden 64 --batch-size 8 --lr 3e-3
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from collections.abc import Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import numpy as np

import ngraph_core as ng
from neon import Sequential
from neon.callbacks import EpochPrinter, MetricHistory
from neon.costs import CTC, pack_ctc_targets
from neon.data import DataError
from neon.data.packaged import data_dirs
from neon.data.sequences import SequenceIterator
from neon.data.speech import DIGITS, read_manifest, synthesize_digits
from neon.decoders import greedy_decode
from neon.initializers import GlorotUniform, set_seed
from neon.layers import Affine, Conv, DeepBiRNN, GRUCell
from neon.metrics import CER
from neon.model import Model
from neon.optimizers import Adam
from ngraph_core import safe_json

from .progress import add_progress_flag, show_progress

ALPHABET = " " + "".join(sorted(set("".join(DIGITS))))  # " efghinorstuvwxz": class k + 1 is ALPHABET[k]
BLANK = 0
NCLASS = len(ALPHABET) + 1
MAX_DIGITS = 4
# one voice per accent, each with another variant, so neither an accent nor a variant is new to the model
HELD_OUT_VOICES = ("en-029+m1", "en-gb+m2", "en-gb-scotland+m3", "en-gb-x-gbclan+m4", "en-gb-x-gbcwmd+f1",
                   "en-gb-x-rp+f2", "en-us+f3", "en-us-nyc+f4")
DEFAULT_OUT = Path("out") / "ctc_speech"
CI_SETTINGS: dict[str, Any] = {"n_utterances": 160, "epochs": 6, "hidden": 64, "batch_size": 8, "learning_rate": 3e-3}
CI_CER_BAR = 0.6  # what CI_SETTINGS reliably reaches (test_ctc_speech asserts it)


class SpeechRecipeError(ng.NgraphError, ValueError):
    """The CTC speech recipe was given settings it cannot use."""


# -- text <-> labels ------------------------------------------------------------------------------
def encode_text(text: str) -> list[int]:
    """Class ids of ``text`` (blank is 0, so ``ALPHABET[k]`` is class ``k + 1``).

    Raises:
        SpeechRecipeError: a character outside ``ALPHABET``.

    Example:
        >>> encode_text("one two")[:3] == [ALPHABET.index("o") + 1, ALPHABET.index("n") + 1, ALPHABET.index("e") + 1]
        True
    """
    bad = sorted(set(text) - set(ALPHABET))
    if bad:
        raise SpeechRecipeError(f"encode_text: expected characters of {ALPHABET!r}, received {bad} in {text!r}; "
                                "hint: transcripts are lower-case digit words separated by spaces")
    return [ALPHABET.index(c) + 1 for c in text]


def decode_labels(labels: Sequence[int]) -> str:
    """The text of class ids (blanks dropped). Example: ``decode_labels(encode_text("six")) == "six"``."""
    return "".join(ALPHABET[k - 1] for k in labels if k != BLANK)


# -- data -----------------------------------------------------------------------------------------
def load_digit_speech(n: int, seed: int = 0, data_dir: str | Path | None = None, progress: bool = False
                      ) -> tuple[list[np.ndarray], list[str], list[str]]:
    """``n`` spoken digit strings (1 to ``MAX_DIGITS`` digits) as log-mel features, synthesised once and cached.

    The WAVs and ``manifest.json`` come from ``synthesize_digits``; the features of the first
    ``n`` utterances are cached next to them in ``features.npz`` (computing them resamples
    every WAV, which costs far more than loading them).

    Args:
        n: utterances (utterance ``i`` depends only on ``seed`` and ``i``, so a smaller ``n`` is a prefix).
        seed: chooses the texts, voices, speeds and pitches.
        data_dir: the cache folder (default ``<data dir>/ctc_speech-seed<seed>``).
        progress: tqdm bars over the utterances while synthesizing them and computing their features.

    Returns:
        ``(features, texts, voices)``: float32 ``(T_i, 80)``, the spoken texts and the espeak-ng voices.

    Raises:
        SpeechRecipeError: ``n`` < 1. MissingDependencyError: no ``espeak-ng``. DataError: synthesis failed.

    Example:
        >>> feats, texts, voices = load_digit_speech(8)   # texts like 'zero three eight'
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 1:
        raise SpeechRecipeError(f"load_digit_speech: expected n to be an int >= 1, received {n!r}")
    folder = Path(data_dir) if data_dir is not None else data_dirs()[0] / f"ctc_speech-seed{seed}"
    cache = folder / "features.npz"
    manifest = folder / "manifest.json"
    if cache.is_file() and manifest.is_file():
        try:  # a damaged cache is synthesized again
            specs = read_manifest(manifest)[:n]
            with np.load(cache, allow_pickle=False) as stored:
                index = safe_json.loads(str(stored["index"]), what=f"{cache}: index", error=DataError, max_depth=8)
                if len(specs) == n and isinstance(index, dict) and all(index.get(s["file"]) == s for s in specs):
                    return ([stored[s["file"]] for s in specs], [str(s["text"]) for s in specs],
                            [str(s["voice"]) for s in specs])
        except DataError:
            pass
    features, texts = synthesize_digits(n, folder, seed=seed, max_digits=MAX_DIGITS, progress=progress)
    specs = read_manifest(manifest)[:n]
    if [s["text"] for s in specs] != texts:
        raise DataError(f"load_digit_speech: {manifest} does not list the {n} utterances just synthesised")
    tmp = folder / "features.tmp.npz"
    np.savez(tmp, index=json.dumps({s["file"]: s for s in specs}), **{s["file"]: f for s, f in zip(specs, features)})
    tmp.replace(cache)
    return features, texts, [str(s["voice"]) for s in specs]


def prepare(features: np.ndarray, stack: int = 2) -> np.ndarray:
    """Per-utterance normalisation (each band to mean 0, variance 1), then ``stack`` frames concatenated.

    Args:
        features: ``(T, F)`` log-mel frames.
        stack: frames per output frame; the last group is zero-padded.

    Returns:
        float32 ``(ceil(T / stack), stack * F)``.

    Example:
        >>> prepare(np.random.rand(101, 80)).shape
        (51, 160)
    """
    x = np.asarray(features, dtype=np.float64)
    x = (x - x.mean(axis=0)) / (x.std(axis=0) + 1e-5)
    frames = -(-x.shape[0] // stack)
    x = np.concatenate([x, np.zeros((frames * stack - x.shape[0], x.shape[1]))])
    return x.reshape(frames, stack * x.shape[1]).astype(np.float32)


class CTCIterator(SequenceIterator):
    """``SequenceIterator`` whose targets are ``CTC``'s packed ``[2 + L, N]`` rows.

    Row 0 is each utterance's frame count (the model keeps the time axis as it is fed), row 1 its
    label count, rows 2.. the labels padded to ``L``, the longest label sequence of the whole set
    (one target shape, so one compiled computation per batch shape).

    Example:
        >>> it = CTCIterator([prepare(f) for f in feats], [encode_text(t) for t in texts], batch_size=16)
        >>> (x, lengths), y = next(iter(it))    # x [160, T, 16], y [2 + L, 16]
    """

    def __init__(self, sequences: Sequence[np.ndarray], labels: Sequence[Sequence[int]], **options: Any) -> None:
        super().__init__(sequences, **options)
        if len(labels) != self.ndata:
            raise DataError(f"CTCIterator: expected {self.ndata} label sequences, received {len(labels)}")
        self.labels = [list(seq) for seq in labels]
        self.max_label_length = max(len(seq) for seq in self.labels)

    def make_batch(self, index: np.ndarray, bucketed: bool = True) -> Any:
        (x, lengths), _ = super().make_batch(index, bucketed)
        packed = pack_ctc_targets([self.labels[i] for i in index], lengths, self.max_label_length)
        return (x, lengths), packed.T.copy()


# -- the network ----------------------------------------------------------------------------------
def ctc_speech_net(hidden: int = 96, conv_filters: int = 128, depth: int = 2, seed: int | None = None) -> Sequential:
    """Conv over time -> ``depth`` bidirectional GRU layers -> per-frame ``Affine`` logits.

    Args:
        hidden: GRU units per direction.
        conv_filters: filters of the front-end convolution (window 5 frames, "same" padding).
        depth: bidirectional layers.
        seed: seeds the initializers first (None leaves them as they are).

    Returns:
        a ``Sequential`` taking ``[F, REC, N]`` frames to logits ``[NCLASS, REC, N]``.

    Example:
        >>> model = Model(ctc_speech_net(96))
    """
    if seed is not None:
        set_seed(seed)
    init = GlorotUniform()
    return Sequential([Conv((5, conv_filters), padding="same", init=init, bias=0.0, activation="relu"),
                       DeepBiRNN(GRUCell(hidden, init=init), depth=depth),
                       Affine(NCLASS, init=init, bias=0.0)], name="CTCSpeech")


def transcribe(model: Model, sequences: Sequence[np.ndarray]) -> list[str]:
    """Greedy CTC transcripts of prepared utterances (one inference batch).

    Example:
        >>> transcribe(model, [prepare(f) for f in feats[:4]])   # ['three one four', ...]
    """
    data = SequenceIterator(list(sequences), batch_size=len(sequences))
    logits = np.moveaxis(model.get_outputs(data), 0, -1)  # (N, C, T) -> (C, T, N)
    return [decode_labels(seq) for seq in greedy_decode(logits, data.lengths, blank=BLANK, scores_kind="logits")]


# -- training -------------------------------------------------------------------------------------
@dataclass
class TrainResult:
    """What ``train`` returns: the model, its history, the held-out CER, sample transcripts, files, seconds."""

    model: Model
    history: Any
    cer: float
    samples: list[tuple[str, str]] = field(default_factory=list)
    files: list[Path] = field(default_factory=list)
    seconds: float = 0.0


def split_by_voice(voices: Sequence[str], held_out: Sequence[str] = HELD_OUT_VOICES) -> tuple[list[int], list[int]]:
    """Indices of the training utterances and of those spoken by a ``held_out`` voice.

    Raises:
        SpeechRecipeError: either part would be empty (too few utterances).
    """
    test = [i for i, v in enumerate(voices) if v in held_out]
    train = [i for i, v in enumerate(voices) if v not in held_out]
    if not test or not train:
        raise SpeechRecipeError(f"split_by_voice: expected utterances from both held-out and other voices, received "
                                f"{len(train)} training and {len(test)} test ones; hint: use more utterances")
    return train, test


def train(n_utterances: int = 800, epochs: int = 4, hidden: int = 96, batch_size: int = 16,
          learning_rate: float = 2e-3, stack: int = 2, out: str | Path = DEFAULT_OUT,
          data_dir: str | Path | None = None, seed: int = 0, verbose_cer: bool = False,
          progress: bool = False) -> TrainResult:
    """Synthesise (or load) the digit set, train ``ctc_speech_net`` with CTC, report the held-out CER.

    Args:
        n_utterances: utterances synthesised; those of ``HELD_OUT_VOICES`` (about 1/8) are the test set.
        epochs: passes over the training utterances.
        hidden: GRU units per direction.
        batch_size: utterances per step (batches are bucketed by length).
        learning_rate: Adam's rate (gradients clipped to global norm 5).
        stack: frames concatenated per model frame.
        out: the folder for ``ctc_speech.h5``, ``_history.csv`` and ``_samples.txt``.
        data_dir: the synthesis cache (default under ``.venv/data``).
        seed: seeds the data, the weights and the batch order.
        verbose_cer: print the test CER after every epoch (one extra inference pass each).
        progress: show tqdm bars: utterances while synthesizing the set, then ``fit``'s batches.

    Returns:
        a ``TrainResult``.

    Raises:
        SpeechRecipeError: bad settings; MissingDependencyError: no ``espeak-ng``.

    Example:
        >>> result = train(**CI_SETTINGS, out="out/ctc_ci")
        >>> result.cer
    """
    for key, value, low in (("epochs", epochs, 0), ("hidden", hidden, 1), ("batch_size", batch_size, 1),
                            ("stack", stack, 1)):
        if isinstance(value, bool) or not isinstance(value, int) or value < low:
            raise SpeechRecipeError(f"train: expected {key} to be an int >= {low}, received {value!r}")
    start = time.perf_counter()
    features, texts, voices = load_digit_speech(n_utterances, seed, data_dir, progress=progress)
    train_ids, test_ids = split_by_voice(voices)
    frames = [prepare(f, stack) for f in features]
    print(f"data: {n_utterances} espeak-ng digit strings ({time.perf_counter() - start:.1f} s to load); "
          f"{len(train_ids)} training, {len(test_ids)} test utterances from {len(HELD_OUT_VOICES)} held-out voices",
          flush=True)
    lengths = np.array([f.shape[0] for f in frames])
    bounds = sorted({int(b) for b in np.percentile(lengths[train_ids], [50, 85])} | {int(lengths.max())})
    train_set = CTCIterator([frames[i] for i in train_ids], [encode_text(texts[i]) for i in train_ids],
                            batch_size=batch_size, bucket_boundaries=bounds, shuffle=True, seed=seed)
    test_frames, test_texts = [frames[i] for i in test_ids], [texts[i] for i in test_ids]

    model = Model(ctc_speech_net(hidden, seed=seed))

    def score() -> float:
        return CER()(test_texts, transcribe(model, test_frames))

    out = Path(out)
    out.mkdir(parents=True, exist_ok=True)
    files = [out / "ctc_speech.h5", out / "ctc_speech_history.csv", out / "ctc_speech_samples.txt"]
    optimizer = Adam(learning_rate, gradient_clip_norm=5.0)
    print(f"conv(5, 128) -> 2 x BiGRU({hidden}) -> Affine({NCLASS}) + CTC; {epochs} epochs, batch {batch_size}, "
          f"Adam {learning_rate}, frames stacked by {stack}", flush=True)
    history = model.fit(train_set, CTC(blank=BLANK), optimizer, num_epochs=epochs, progress=progress,
                        callbacks=[EpochPrinter([("train_cost", "train_cost", ".3f")],
                                                   extra=(lambda: f"test CER {score():.3f}") if verbose_cer else None),
                                      MetricHistory(csv_path=files[1])])
    hypotheses = transcribe(model, test_frames)
    cer = CER()(test_texts, hypotheses)
    model.save_params(files[0])
    samples = list(zip(test_texts, hypotheses))
    files[2].write_text("".join(f"{ref!r} -> {hyp!r}\n" for ref, hyp in samples))
    seconds = time.perf_counter() - start
    print(f"test CER: {cer:.3f} on {len(test_ids)} held-out-voice utterances ({seconds:.0f} s in all)")
    for ref, hyp in samples[:3]:
        print(f"  {ref!r} -> {hyp!r}")
    print(f"saved {', '.join(str(f) for f in files)}")
    return TrainResult(model, history, cer, samples, files, seconds)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--n-utterances", type=int, default=800)
    parser.add_argument("--epochs", type=int, default=4)
    parser.add_argument("--hidden", type=int, default=96, help="GRU units per direction")
    parser.add_argument("--batch-size", type=int, default=16)
    parser.add_argument("--lr", type=float, default=2e-3)
    parser.add_argument("--stack", type=int, default=2, help="frames concatenated per model frame")
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--data-dir", type=Path, default=None, help="synthesis cache (default under .venv/data)")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--verbose-cer", action="store_true", help="print the test CER after every epoch")
    add_progress_flag(parser, "batches (and utterances while synthesizing)")
    args = parser.parse_args(argv)
    train(args.n_utterances, args.epochs, args.hidden, args.batch_size, args.lr, args.stack, args.out,
          args.data_dir, args.seed, args.verbose_cer, progress=show_progress(args.progress))
    return 0


if __name__ == "__main__":
    sys.exit(main())
