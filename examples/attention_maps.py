"""Attention maps: tap each head's attention weights in a trained Transformer and draw them.

A small ``transformer_sentiment`` network (``model_zoo.transformer_sentiment``) trains for a few
steps on the packaged movie snippets; then two selectors look inside it:

* ``model.select("MultiHeadAttention variable")`` — the attention layers' weights
  (``Wq``, ``Wk``, ``Wv``, ``Wo`` and their biases), one set per block;
* ``WEIGHTS_QUERY`` — ``MultiHeadAttention [axes$="REC,REC_K"] > batch_dot``: inside each
  attention layer, the op on ``[..., REC, REC_K]`` (query time, key time) that feeds a
  ``batch_dot``. That is the attention weights ``softmax(q . k / sqrt(D))`` after the padding
  mask, which ``ng.scaled_dot_product_attention`` multiplies with the values; the scores, also on
  ``[..., REC, REC_K]``, feed the softmax rather than a ``batch_dot``.

A tap on the second selection (one per block, ``#TransformerEncoderLayer_<i>`` in front) receives
each run's weights ``[H, N, REC, REC_K]``; ``attention_maps`` splits them by head and keeps one
text's rows and columns (its own words, not the padding). ``plot_attention_maps`` draws a grid,
a row per block and a column per head, each row of a map a query word's weights over the words.

Usage:
    python examples/attention_maps.py                          # writes out/attention_maps.png
    python examples/attention_maps.py --epochs 2 --n-train 2048 --heads 4 --out /tmp/maps.png
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import numpy as np

from model_zoo.lstm_sentiment import bucket_bounds, encode_texts, subset
from model_zoo.transformer_sentiment import transformer_sentiment
from neon.costs import CrossEntropyMulti
from neon.data import SequenceIterator, Vocabulary, load_movie_snippets, tokenize_words
from neon.model import Model
from neon.optimizers import Adam

WEIGHTS_QUERY = 'MultiHeadAttention [axes$="REC,REC_K"] > batch_dot'
DEFAULT_OUT = Path("out") / "attention_maps.png"


class AttentionMapError(ValueError):
    """The example was asked for a map it cannot draw (no attention layer, no such text)."""


def attention_maps(model: Model, ids: np.ndarray, num_layers: int) -> dict[tuple[int, int], np.ndarray]:
    """Each block's and head's attention weights ``[T, T]`` over one text, through taps.

    Args:
        model: a built ``Model`` with ``num_layers`` ``TransformerEncoderLayer``s.
        ids: one text's word ids (int ``[T]``).
        num_layers: the blocks to read (``TransformerEncoderLayer_0`` ...).

    Returns:
        ``{(block, head): weights}``, ``weights[i, j]`` the weight query word ``i`` gives key word ``j``
        (each row sums to 1).

    Raises:
        AttentionMapError: a block whose selection finds no attention weights.

    Example:
        >>> maps = attention_maps(model, vocab.encode(tokenize_words("a fine film")), 2)
    """
    seen: dict[int, np.ndarray] = {}
    handles = []
    for block in range(num_layers):
        selection = model.select(f"#TransformerEncoderLayer_{block} {WEIGHTS_QUERY}")
        if not selection.outputs:
            raise AttentionMapError(f"attention_maps: expected attention weights in TransformerEncoderLayer_{block}, "
                                    f"found none for {WEIGHTS_QUERY!r}; hint: the model needs num_layers={num_layers}"
                                    " Transformer blocks")
        handles.append(selection.tap(lambda name, value, block=block: seen.__setitem__(block, value)))
    try:
        length = len(ids)
        model.get_outputs(SequenceIterator([np.asarray(ids, dtype=np.int32)], np.zeros(1, dtype=np.int64), nclass=2,
                                           batch_size=1))
    finally:
        for handle in handles:
            handle.remove()
    # the weights are [H, N, REC, REC_K] (docs/attention.md); one text: N is 1
    return {(block, head): weights[head, 0, :length, :length] for block, weights in seen.items()
            for head in range(weights.shape[0])}


def plot_attention_maps(maps: dict[tuple[int, int], np.ndarray], words: Sequence[str], path: str | Path,
                        title: str = "") -> Path:
    """A PNG grid of the maps, a row per block and a column per head, the words on both axes.

    Returns:
        the path written.
    """
    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    blocks, heads = 1 + max(b for b, _ in maps), 1 + max(h for _, h in maps)
    size = 0.35 * len(words) + 1.5
    fig, axes = plt.subplots(blocks, heads, figsize=(size * heads, size * blocks), squeeze=False)
    for (block, head), weights in sorted(maps.items()):
        ax = axes[block][head]
        ax.imshow(weights, vmin=0.0, cmap="viridis")  # each map scaled to its own largest weight
        ax.set_xticks(range(len(words)), words, rotation=90, fontsize=7)
        ax.set_yticks(range(len(words)), words, fontsize=7)
        ax.set_title(f"block {block}, head {head}", fontsize=9)
    if title:
        fig.suptitle(title, fontsize=10)
    fig.tight_layout()
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fig.savefig(path, dpi=100)
    plt.close(fig)
    return path


def run(out: str | Path = DEFAULT_OUT, epochs: int = 1, n_train: int = 1024, d_model: int = 32, num_layers: int = 2,
        num_heads: int = 2, max_length: int = 24, seed: int = 0) -> dict[str, Any]:
    """Train the small network, tap one held-out sentence's attention per head, write the PNG.

    Returns:
        ``{"model", "vocab", "sentence", "maps", "png"}``.

    Example:
        >>> run("out/attention_maps.png")["png"]
    """
    (texts, y), (test_texts, _) = load_movie_snippets()
    texts, y = subset(texts, y, n_train, seed)
    vocab = Vocabulary.from_tokens((tokenize_words(t) for t in texts), min_count=2, max_size=2000)
    train_set = SequenceIterator(encode_texts(texts, vocab, max_length), y, nclass=2, batch_size=32,
                                 bucket_boundaries=bucket_bounds(max_length), shuffle=True, seed=seed)
    model = Model(transformer_sentiment(len(vocab), d_model, num_layers, num_heads, max_length, seed=seed), seed=seed)
    model.fit(train_set, CrossEntropyMulti(), Adam(3e-3), epochs, progress=False)
    sentence = next(t for t in test_texts if 8 <= len(tokenize_words(t)) <= min(max_length, 16))
    words = tokenize_words(sentence)
    variables = model.select("MultiHeadAttention variable")
    print(f"{len(variables.outputs)} attention variables, e.g. {variables.paths[0]}")
    maps = attention_maps(model, vocab.encode(words), num_layers)
    shown = [w if w in vocab.tokens else f"{w}?" for w in words]  # "?": outside the vocabulary (<unk>)
    png = plot_attention_maps(maps, shown, out, title=sentence)
    print(f"attention maps of {len(maps)} heads over {len(words)} words: {png}")
    return {"model": model, "vocab": vocab, "sentence": sentence, "maps": maps, "png": png}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=DEFAULT_OUT)
    parser.add_argument("--epochs", type=int, default=1)
    parser.add_argument("--n-train", type=int, default=1024)
    parser.add_argument("--d-model", type=int, default=32)
    parser.add_argument("--layers", type=int, default=2)
    parser.add_argument("--heads", type=int, default=2)
    parser.add_argument("--seed", type=int, default=0)
    args = parser.parse_args(argv)
    run(args.out, args.epochs, args.n_train, args.d_model, args.layers, args.heads, seed=args.seed)
    return 0


if __name__ == "__main__":
    sys.exit(main())
