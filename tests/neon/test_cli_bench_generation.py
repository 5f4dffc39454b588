"""``ngraph bench --generate``: tokens per second of a saved char_transformer with its key/value cache; the
uncached comparison; -pc on the step graph; bad arguments exit 2."""

from __future__ import annotations

import re
from pathlib import Path

import pytest

from model_zoo.char_transformer import CharTransformer
from neon.cli import ngraph_main
from neon.cli.bench_generation import GenerationResult, format_generation
from neon.data.text import Vocabulary


@pytest.fixture(scope="module")
def char_model(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A tiny CharTransformer (context 8), saved as ``neon train char_transformer --out`` saves it."""
    model = CharTransformer(Vocabulary.from_text("abcdefgh \n"), d_model=16, num_layers=1, num_heads=2, context=8)
    path = tmp_path_factory.mktemp("bench") / "char_transformer.h5"
    model.save_params(path)
    return path


def _figure(text: str, key: str) -> float:
    return float(re.search(rf"^\s*{re.escape(key)}\s+([0-9.]+)", text, re.MULTILINE).group(1))


def test_generate_prints_tokens_per_second_and_the_uncached_rate(char_model: Path,
                                                                  capsys: pytest.CaptureFixture[str]) -> None:
    code = ngraph_main(["bench", str(char_model), "--generate", "20", "--time", "0.3", "--compare", "-pc"])
    out = capsys.readouterr().out
    assert code == 0, out
    assert "generation, fp32, context 8, vocabulary 10; runs of 20 tokens from a one-token prompt" in out
    assert "(overflow shift)" in out and "Latency (one cached step):" in out
    runs, tokens = (int(n) for n in re.search(r"Count:\s+(\d+) runs, (\d+) tokens", out).groups())
    assert runs >= 1 and tokens == 20 * runs
    # every token over the whole duration: tokens / duration
    assert _figure(out, "Tokens/s:") == pytest.approx(tokens / (_figure(out, "Duration:") / 1e3), rel=1e-2)
    assert re.search(r"Uncached:\s+[0-9.]+ tokens/s \(the window re-run per token\); the cache is [0-9.]+x", out)
    assert "Performance counters (20 runs of the cached step)" in out and "MultiHeadAttention_0" in out


def test_format_generation_counts_prefills_and_steps() -> None:
    result = GenerationResult(runs=2, length=10, duration_s=0.5, prefill_ms=[2.0, 4.0, 3.0], step_ms=[1.0] * 17,
                              uncached_tokens_per_s=10.0)
    text = "\n".join(format_generation(result))
    assert "Count:        2 runs, 20 tokens" in text and "Prefill:      3.000 ms (median of 3 prefills)" in text
    assert _figure(text, "Tokens/s:") == 40.0 and "the cache is 4.0x faster" in text


@pytest.mark.parametrize("args, message", [
    (["--generate", "5", "--batch", "2"], "expected --batch 1 (generation runs one sequence), received --batch 2"),
    (["--generate", "5", "--precision", "int8"], "expected --precision fp32 or fp16, received int8"),
    (["--compare"], "--compare compares generation with and without the cache, received it without --generate"),
])
def test_bad_generation_arguments_exit_2(char_model: Path, args: list[str], message: str,
                                         capsys: pytest.CaptureFixture[str]) -> None:
    assert ngraph_main(["bench", str(char_model), "--time", "0.1", *args]) == 2
    err = capsys.readouterr().err
    assert message in err and "hint:" in err


def test_generate_refuses_a_model_that_does_not_generate(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    from neon.layers import Affine
    from neon.model import Model

    model = Model([Affine(3)])
    model.build((4,), batch_size=1)
    model.save_params(tmp_path / "mlp.h5")
    assert ngraph_main(["bench", str(tmp_path / "mlp.h5"), "--generate", "5", "--time", "0.1"]) == 2
    assert "expected a causal language model (a model with __ngraph_generation__" in capsys.readouterr().err
