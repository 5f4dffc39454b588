"""Speech features against independent NumPy references; WAV I/O; LibriSpeech walking; espeak-ng digits."""

from __future__ import annotations

import io
import json
import shutil
import sys
import wave
from pathlib import Path

import numpy as np
import pytest

from neon.data import (
    DataError,
    MissingDependencyError,
    load_librispeech,
    log_mel_spectrogram,
    mel_filterbank,
    read_wav,
    resample,
    stft,
    synthesize_digits,
    walk_librispeech,
    write_wav,
)
from neon.data.speech import hann_window, hz_to_mel, mel_to_hz, read_manifest


def tone(freq: float, rate: int, seconds: float = 1.0, amplitude: float = 0.5) -> np.ndarray:
    return amplitude * np.sin(2 * np.pi * freq * np.arange(int(rate * seconds)) / rate)


def test_wav_round_trip_and_stereo_is_averaged(tmp_path: Path) -> None:
    x = tone(440, 16000, 0.1)
    write_wav(tmp_path / "a.wav", x, 16000)
    y, rate = read_wav(tmp_path / "a.wav")
    assert rate == 16000 and y.dtype == np.float32 and np.abs(y - x).max() <= 1 / 32768
    with wave.open(str(tmp_path / "s.wav"), "wb") as f:
        f.setnchannels(2), f.setsampwidth(2), f.setframerate(8000)
        f.writeframes(np.array([[1000, 3000], [-2000, 0]], dtype="<i2").tobytes())
    assert read_wav(tmp_path / "s.wav")[0].tolist() == [2000 / 32768, -1000 / 32768]


def test_unsupported_or_damaged_wavs_raise(tmp_path: Path) -> None:
    with wave.open(str(tmp_path / "u8.wav"), "wb") as f:
        f.setnchannels(1), f.setsampwidth(1), f.setframerate(8000)
        f.writeframes(bytes(10))
    with pytest.raises(DataError, match="16-bit"):
        read_wav(tmp_path / "u8.wav")
    (tmp_path / "junk.wav").write_bytes(b"RIFF....not a wav")
    with pytest.raises(DataError, match="PCM WAV"):
        read_wav(tmp_path / "junk.wav")


@pytest.mark.parametrize("rate_in, rate_out, freq", [(22050, 16000, 440.0), (16000, 44100, 3000.0),
                                                     (8000, 16000, 1000.0)])
def test_resample_reproduces_a_sine_at_the_new_rate(rate_in: int, rate_out: int, freq: float) -> None:
    y = resample(tone(freq, rate_in), rate_in, rate_out)
    assert y.size == rate_out
    edge = rate_out // 50  # the zero padding at the ends is not part of the sine
    np.testing.assert_allclose(y[edge:-edge], tone(freq, rate_out)[edge:-edge], atol=1e-4)


def test_resample_removes_content_above_the_new_nyquist() -> None:
    y = resample(tone(10_000, 22050), 22050, 16000)  # 10 kHz > 8 kHz: would alias to 6 kHz
    assert np.sqrt(np.mean(y[400:-400] ** 2)) < 1e-3


def test_stft_frames_satisfy_parseval() -> None:
    rng = np.random.default_rng(0)
    x, n_fft, hop = rng.standard_normal(4000), 400, 160
    spec = stft(x, n_fft, hop, center=False)
    frames = np.lib.stride_tricks.sliding_window_view(x, n_fft)[::hop] * hann_window(n_fft)
    one_sided = np.ones(n_fft // 2 + 1)
    one_sided[1:-1] = 2  # the negative frequencies rfft leaves out (n_fft even)
    np.testing.assert_allclose((np.abs(spec) ** 2 * one_sided).sum(axis=1), n_fft * (frames ** 2).sum(axis=1))
    assert stft(x, n_fft, hop).shape == (1 + 4000 // hop, 201)


def test_mel_scales_invert_and_have_their_anchor_points() -> None:
    hz = np.array([0.0, 300.0, 1000.0, 4000.0, 8000.0])
    for scale in ("slaney", "htk"):
        np.testing.assert_allclose(mel_to_hz(hz_to_mel(hz, scale), scale), hz, atol=1e-9)
    assert hz_to_mel(1000.0) == pytest.approx(15.0) and hz_to_mel(1000.0, "htk") == pytest.approx(1000.0, abs=0.1)


def test_mel_triangles_have_unit_area_and_peaks_at_their_centres() -> None:
    rate, n_fft = 16000, 8192  # fine bins (1.95 Hz), so the discrete sums approximate the integrals
    bank = mel_filterbank(rate, n_fft, n_mels=40)
    area = bank.sum(axis=1) * rate / n_fft
    np.testing.assert_allclose(area, 1.0, rtol=0.03)
    centres = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(rate / 2), 42))[1:-1]
    peaks = np.fft.rfftfreq(n_fft, 1 / rate)[bank.argmax(axis=1)]
    np.testing.assert_allclose(peaks, centres, atol=rate / n_fft)


@pytest.mark.parametrize("freq", [300.0, 1000.0, 2500.0, 6000.0])
def test_a_pure_tone_lands_in_the_nearest_mel_band(freq: float) -> None:
    feats = log_mel_spectrogram(tone(freq, 16000))
    edges = mel_to_hz(np.linspace(hz_to_mel(0.0), hz_to_mel(8000.0), 82))
    left, centre, right = edges[:-2], edges[1:-1], edges[2:]  # the continuous Slaney triangles at freq:
    response = np.maximum(0, np.minimum((freq - left) / (centre - left), (right - freq) / (right - centre)))
    expected = int(np.argmax(response * 2 / (right - left)))
    assert feats.shape == (101, 80) and feats.dtype == np.float32
    assert abs(centre[expected] - freq) < (right[expected] - left[expected]) / 2
    assert int(np.median(feats[5:-5].argmax(axis=1))) == expected


def test_log_mel_floor_and_amplitude_scaling() -> None:
    assert np.all(log_mel_spectrogram(np.zeros(1600), floor=1e-8) == np.float32(np.log(1e-8)))
    x = tone(1000, 16000)
    base = log_mel_spectrogram(x, floor=1e-30)
    loud = base > base.max() - 15  # leave out bands at float32 rounding level
    diff = log_mel_spectrogram(2 * x, floor=1e-30) - base
    np.testing.assert_allclose(diff[loud], np.log(4.0), atol=1e-3)  # power scales with amplitude squared


def make_librispeech(root: Path) -> None:
    for speaker, chapter, n in (("19", "198", 2), ("103", "1240", 1)):
        folder = root / speaker / chapter
        folder.mkdir(parents=True)
        lines = []
        for i in range(n):
            utt = f"{speaker}-{chapter}-{i:04d}"
            write_wav(folder / f"{utt}.wav", tone(300 + 100 * i, 16000, 0.2), 16000)
            lines.append(f"{utt} WORDS OF UTTERANCE {i}")
        (folder / f"{speaker}-{chapter}.trans.txt").write_text("\n".join(lines) + "\n")


def test_librispeech_walk_pairs_audio_with_transcripts(tmp_path: Path) -> None:
    make_librispeech(tmp_path)
    utts = walk_librispeech(tmp_path, audio_ext=".wav")
    assert [u for u, _, _ in utts] == ["103-1240-0000", "19-198-0000", "19-198-0001"]
    assert utts[2][2] == "WORDS OF UTTERANCE 1" and utts[2][1].name == "19-198-0001.wav"
    feats, texts = load_librispeech(tmp_path, limit=2, audio_ext=".wav")
    assert [f.shape for f in feats] == [(21, 80), (21, 80)] and texts[1] == "WORDS OF UTTERANCE 0"


def test_librispeech_flac_needs_soundfile_or_a_decoder(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    (tmp_path / "1" / "2").mkdir(parents=True)
    (tmp_path / "1" / "2" / "1-2.trans.txt").write_text("1-2-0000 HELLO\n")
    (tmp_path / "1" / "2" / "1-2-0000.flac").write_bytes(b"fLaC")
    monkeypatch.setitem(sys.modules, "soundfile", None)  # import soundfile -> ImportError
    with pytest.raises(MissingDependencyError, match="pip install soundfile"):
        load_librispeech(tmp_path)
    feats, texts = load_librispeech(tmp_path, decoder=lambda path: (tone(500, 32000, 0.5), 32000))
    assert feats[0].shape == (51, 80) and texts == ["HELLO"]


def test_librispeech_errors_name_the_file(tmp_path: Path) -> None:
    make_librispeech(tmp_path)
    (tmp_path / "19" / "198" / "19-198-0001.wav").unlink()
    with pytest.raises(DataError, match=r"19-198.trans.txt:2: expected audio 19-198-0001.wav"):
        walk_librispeech(tmp_path, audio_ext=".wav")
    (tmp_path / "empty").mkdir()
    with pytest.raises(DataError, match=r"no \*\.trans\.txt"):
        walk_librispeech(tmp_path / "empty")
    with pytest.raises(DataError, match="not a directory"):
        walk_librispeech(tmp_path / "missing")


@pytest.mark.skipif(shutil.which("espeak-ng") is None,
                    reason="espeak-ng is not installed: `make venv` installs it as root (apt-get install espeak-ng)")
def test_synthesize_three_digit_strings_and_cache_them(tmp_path: Path) -> None:
    feats, texts = synthesize_digits(3, tmp_path, seed=5)
    words = {"zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine"}
    assert len(feats) == len(texts) == 3 and all(set(t.split()) <= words for t in texts)
    assert all(f.ndim == 2 and f.shape[1] == 80 and f.shape[0] > 20 and np.isfinite(f).all() for f in feats)
    manifest = json.loads((tmp_path / "manifest.json").read_text())["utterances"]
    assert [m["text"] for m in manifest] == texts and len({m["voice"] for m in manifest} | {"x"}) >= 2
    assert read_wav(tmp_path / manifest[0]["file"])[1] == 22050
    stamps = [(tmp_path / m["file"]).stat().st_mtime_ns for m in manifest]
    again, texts_again = synthesize_digits(3, tmp_path, seed=5)  # cached: no file is rewritten
    assert texts_again == texts and [(tmp_path / m["file"]).stat().st_mtime_ns for m in manifest] == stamps
    np.testing.assert_array_equal(again[0], feats[0])


@pytest.mark.skipif(shutil.which("espeak-ng") is None,
                    reason="espeak-ng is not installed: `make venv` installs it as root (apt-get install espeak-ng)")
def test_synthesis_shows_a_bar_over_utterances(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    class Terminal(io.StringIO):
        def isatty(self) -> bool:
            return True

    for expected in (("synthesizing", "2/2", "features"), ("features",)):  # then cached: nothing to synthesize
        terminal = Terminal()
        monkeypatch.setattr(sys, "stderr", terminal)
        synthesize_digits(2, tmp_path, seed=1, progress=True)
        shown = terminal.getvalue()
        assert all(word in shown for word in expected) and ("synthesizing" in shown) is (len(expected) == 3)
        assert "utterance" in shown


def test_a_cache_manifest_is_read_by_the_bounded_decoder(tmp_path: Path) -> None:
    path = tmp_path / "manifest.json"
    path.write_text(json.dumps({"seed": 0, "utterances": [{"file": "a.wav", "text": "one"}]}))
    assert read_manifest(path) == [{"file": "a.wav", "text": "one"}]
    path.write_text('{"utterances": ' + "[" * 980 + "]" * 980 + "}")
    with pytest.raises(DataError, match=r"manifest.json: expected at most max_depth=8 levels of nesting, received \d+; "
                                        r"hint: delete the cache folder"):
        read_manifest(path)
    path.write_text('{"utterances": [1]}')
    with pytest.raises(DataError, match="utterances' are objects naming a 'file'"):
        read_manifest(path)
