"""examples/attention_maps.py (issue 35 item 6): selectors find the attention layers' variables and, per head,
their attention weights, which equal a NumPy recomputation from those variables; the PNG is written."""

from __future__ import annotations

import importlib.util
import math
import subprocess
import sys
from pathlib import Path

import numpy as np
import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPT = ROOT / "examples" / "attention_maps.py"


@pytest.fixture(scope="module")
def example():
    spec = importlib.util.spec_from_file_location("attention_maps", SCRIPT)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


@pytest.fixture(scope="module")
def result(example, tmp_path_factory):
    out = tmp_path_factory.mktemp("maps") / "maps.png"
    return example.run(out, epochs=1, n_train=96, d_model=16, num_layers=2, num_heads=2, max_length=24)


def read(model, path: str) -> np.ndarray:
    (var,) = [v for v, p in zip(model.select("variable").outputs, model.select("variable").paths, strict=True)
              if p.endswith(path)]
    return np.asarray(model.transformer.read_variable(var), dtype=np.float64)


def test_the_selector_finds_every_attention_variable(result) -> None:
    paths = result["model"].select("MultiHeadAttention variable").paths
    names = sorted(p.rsplit("/", 2)[-2] + "/" + p.rsplit("/", 1)[-1] for p in paths)
    assert len(paths) == 16 and all("MultiHeadAttention_0" in p for p in paths)
    assert {p.split("/")[2] for p in paths} == {"TransformerEncoderLayer_0", "TransformerEncoderLayer_1"}
    assert {n.split("/")[1] for n in names} == {"Wq", "Wk", "Wv", "Wo", "bq", "bk", "bv", "bo"}


def test_the_tapped_weights_are_the_first_blocks_attention(result) -> None:
    """Block 0's tapped maps equal softmax(q k / sqrt(D)) recomputed in NumPy from the embedding, the positions,
    the pre-norm LayerNorm and Wq, Wk, bq, bk; every row is a distribution."""
    model, vocab, maps = result["model"], result["vocab"], result["maps"]
    from neon.data import tokenize_words

    ids = vocab.encode(tokenize_words(result["sentence"]))
    assert set(maps) == {(b, h) for b in range(2) for h in range(2)}
    for weights in maps.values():
        assert weights.shape == (len(ids), len(ids)) and np.all(weights >= 0)
        np.testing.assert_allclose(weights.sum(axis=1), 1.0, rtol=1e-5)
    layer = "TransformerEncoder_0/TransformerEncoderLayer_0"
    table = read(model, "LookupTable_0/W")  # [E, V]
    h = table[:, ids] + read(model, "PositionEmbedding_0/P")[:, :len(ids)]  # [F, T]
    mean, var = h.mean(axis=0), h.var(axis=0)
    x = (h - mean) / np.sqrt(var + 1e-5) * read(model, f"{layer}/LayerNorm_0/gamma")[:, None] + \
        read(model, f"{layer}/LayerNorm_0/beta")[:, None]
    wq, wk = read(model, f"{layer}/MultiHeadAttention_0/Wq"), read(model, f"{layer}/MultiHeadAttention_0/Wk")  # [D,H,F]
    q = np.einsum("dhf,ft->dht", wq, x) + read(model, f"{layer}/MultiHeadAttention_0/bq")[:, :, None]
    k = np.einsum("dhf,ft->dht", wk, x) + read(model, f"{layer}/MultiHeadAttention_0/bk")[:, :, None]
    scores = np.einsum("dhi,dhj->hij", q, k) / math.sqrt(q.shape[0])
    expected = np.exp(scores - scores.max(axis=2, keepdims=True))
    expected /= expected.sum(axis=2, keepdims=True)
    for head in range(2):
        np.testing.assert_allclose(maps[(0, head)], expected[head], rtol=1e-4, atol=1e-6)


def test_the_png_is_written_and_missing_blocks_raise(example, result) -> None:
    assert result["png"].read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"
    with pytest.raises(example.AttentionMapError, match="TransformerEncoderLayer_2.*hint"):
        example.attention_maps(result["model"], np.array([2, 3], dtype=np.int32), 3)


def test_the_script_runs(tmp_path) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), "--n-train", "64", "--d-model", "16", "--layers", "1",
                           "--heads", "4", "--out", str(tmp_path / "m.png")], cwd=ROOT, capture_output=True,
                          text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    assert "attention maps of 4 heads" in done.stdout and (tmp_path / "m.png").exists()
