"""A Transformer encoder for binary sentiment (positive / negative) on the movie snippets, as functions and as a script.

The network (``transformer_sentiment``): ``LookupTable(vocab, d_model)`` word vectors plus a
learned ``PositionEmbedding``, a ``TransformerEncoder`` of ``--layers`` pre-norm blocks
(``--heads`` heads, ReLU feed-forward of ``4 * d_model``, a final ``LayerNorm``) whose
self-attention never looks at padding (the batch's lengths reach every block through
``sequence_lengths``), the mean over each text's own words (``RecurrentMean``, lengths again),
dropout (keep 0.5) and ``Affine(2)`` with softmax. Everything around the network is
``lstm_sentiment``'s and is imported from it: the data (the 10,605 snippets of
``vaderSentiment==3.3.2`` and their fixed split, or an ``aclImdb`` folder with ``--data-dir``),
the vocabulary (the training split's words seen twice, the 2,000 most frequent), each text's
last ``--max-length`` words, bucketed batches, ``CrossEntropyMulti`` and Adam (times 0.3 after
each epoch, gradient norm clipped at 5). So the two recipes differ only in the network; their
figures side by side are in benchmarks/RESULTS.md, "Behind the code: transformer_sentiment".

Writes, under ``--out`` (default ``./out/transformer_sentiment``): ``transformer_sentiment.h5``,
``transformer_sentiment_vocab.txt``, ``transformer_sentiment_curve.png`` and
``transformer_sentiment_history.csv``, as ``lstm_sentiment`` does. The script exits with status
1 when a run with the default settings ends below ``TARGET`` (70%).

Usage:
    python -m model_zoo.transformer_sentiment                           # built-in snippets
    python -m model_zoo.transformer_sentiment --layers 1 --d-model 32 --epochs 1 --n-train 256 --n-test 64
"""

from __future__ import annotations

import argparse
import sys
from pathlib import Path

from neon import Sequential
from neon.initializers import Constant, GlorotUniform, set_seed
from neon.layers import Affine, Dropout, LookupTable, PositionEmbedding, RecurrentMean, TransformerEncoder
from neon.model import Model

from .lstm_sentiment import (
    BATCH_SIZE,
    DROPOUT_KEEP,
    MAX_LENGTH,
    MAX_VOCAB,
    TARGET,
    SentimentConfigError,
    TrainResult,
    add_arguments,
    check_epochs,
    check_positive,
    exit_code,
    fit_and_report,
    prepare,
)
from .progress import show_progress

D_MODEL, LAYERS, HEADS, FF_MULT = 48, 2, 4, 4  # 48 wide: about lstm_sentiment's parameter count
EPOCHS, LEARNING_RATE = 2, 1e-3
DEFAULT_OUT = Path("out") / "transformer_sentiment"
STEM = "transformer_sentiment"

__all__ = ["TARGET", "TrainResult", "main", "train", "transformer_sentiment"]


def transformer_sentiment(vocab_size: int, d_model: int = D_MODEL, num_layers: int = LAYERS, num_heads: int = HEADS,
                          max_length: int = MAX_LENGTH, keep: float = DROPOUT_KEEP, nclass: int = 2,
                          seed: int | None = None) -> Sequential:
    """Word ids ``[REC, N]`` -> class probabilities ``[nclass, N]`` (see the module docstring).

    Args:
        vocab_size: ids ``0..vocab_size-1`` (``len(vocabulary)``).
        d_model: the width of each word's vector through the blocks (a multiple of ``num_heads``).
        num_layers, num_heads: Transformer blocks and attention heads per block.
        max_length: the longest text in words (the position table's length).
        keep: dropout's keep probability before the classifier (1.0: none).
        nclass: outputs of the final ``Affine`` (softmax).
        seed: seeds the shared initializer generator (``set_seed``) first; None leaves it.

    Returns:
        a ``Sequential``; with ``Model.fit`` on ``SequenceIterator`` batches the lengths reach the
        attention layers and the mean through ``neon.layers.sequence_lengths``.

    Raises:
        SentimentConfigError: a size below 1, or ``d_model`` not a multiple of ``num_heads``.

    Example:
        >>> model = Model(transformer_sentiment(2002))   # model.fit(SequenceIterator(ids, labels, nclass=2), ...)
    """
    sizes = {name: check_positive(name, value) for name, value in
             (("vocab_size", vocab_size), ("d_model", d_model), ("num_layers", num_layers),
              ("num_heads", num_heads), ("max_length", max_length), ("nclass", nclass))}
    if sizes["d_model"] % sizes["num_heads"]:
        raise SentimentConfigError(f"transformer_sentiment: expected d_model to be a multiple of num_heads="
                                   f"{num_heads}, received {d_model}; hint: pass --d-model "
                                   f"{num_heads * max(1, d_model // num_heads)}")
    if seed is not None:
        set_seed(seed)
    return Sequential([
        LookupTable(sizes["vocab_size"], sizes["d_model"]),
        PositionEmbedding(sizes["max_length"]),
        TransformerEncoder(sizes["num_layers"], sizes["num_heads"], FF_MULT * sizes["d_model"], dropout=0.0,
                           activation="relu", norm_first=True, final_norm=True),
        RecurrentMean(),
        Dropout(keep=keep),
        Affine(sizes["nclass"], init=GlorotUniform(), bias=Constant(0.0), activation="softmax"),
    ], name="TransformerSentiment")


def train(epochs: int = EPOCHS, data_dir: str | Path | None = None, batch_size: int = BATCH_SIZE,
          out: str | Path = DEFAULT_OUT, n_train: int | None = None, n_test: int | None = None,
          learning_rate: float = LEARNING_RATE, max_length: int = MAX_LENGTH, max_vocab: int = MAX_VOCAB,
          d_model: int = D_MODEL, num_layers: int = LAYERS, num_heads: int = HEADS, seed: int = 0,
          progress: bool = False) -> TrainResult:
    """Build the vocabulary, train ``transformer_sentiment`` on the training texts, report held-out accuracy.

    Args:
        epochs: passes over the training texts (0: evaluate the untrained model).
        data_dir: an ``aclImdb`` folder, or None for the built-in snippets.
        batch_size: texts per step.
        out: the folder for the checkpoint, vocabulary, curve and history.
        n_train, n_test: use only so many texts of each split, drawn at random (small runs, tests).
        learning_rate: Adam's rate.
        max_length: keep each text's last ``max_length`` words.
        max_vocab: the most frequent words kept (seen at least twice in the training split).
        d_model, num_layers, num_heads: the network.
        seed: seeds the weights, the data order and dropout.
        progress: show ``fit``'s progress bar as well as the per-epoch lines.

    Returns:
        ``lstm_sentiment``'s ``TrainResult`` (model, history, accuracy, vocabulary, files).

    Raises:
        SentimentConfigError: a bad size or an empty split; DataError: unreadable data.

    Example:
        >>> train(epochs=1, n_train=512, n_test=128, out="out/transformer_small").accuracy
    """
    check_epochs(STEM, epochs)
    for name, value in (("batch_size", batch_size), ("max_vocab", max_vocab), ("max_length", max_length)):
        check_positive(name, value)
    train_set, test_set, vocab, files, description = prepare(STEM, data_dir, batch_size, out, n_train, n_test,
                                                             max_length, max_vocab, seed)
    network = transformer_sentiment(len(vocab), d_model, num_layers, num_heads, max_length, seed=seed)
    print(f"Transformer {num_layers} x d_model {d_model} x {num_heads} heads over {len(vocab)} tokens, {epochs} "
          f"epochs, batch {batch_size}, Adam lr {learning_rate}, texts cut to their last {max_length} words",
          flush=True)
    return fit_and_report(Model(network, seed=seed), train_set, test_set, vocab, files,
                          f"Transformer sentiment: {description}", epochs, learning_rate, progress)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    add_arguments(parser, DEFAULT_OUT, EPOCHS, LEARNING_RATE)
    parser.add_argument("--d-model", type=int, default=D_MODEL)
    parser.add_argument("--layers", type=int, default=LAYERS)
    parser.add_argument("--heads", type=int, default=HEADS)
    args = parser.parse_args(argv)
    result = train(args.epochs, args.data_dir, args.batch_size, args.out, args.n_train, args.n_test, args.lr,
                   args.max_length, args.max_vocab, args.d_model, args.layers, args.heads, args.seed,
                   progress=show_progress(args.progress))
    return exit_code(parser, args, result)


if __name__ == "__main__":
    sys.exit(main())
