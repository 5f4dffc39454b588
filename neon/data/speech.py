"""Speech features in NumPy: WAV I/O, resampling to 16 kHz, log-mel spectrograms; LibriSpeech; spoken digits.

Log-mel features follow the Whisper/librosa recipe: a centred STFT (reflect padding of
``n_fft // 2``) with a periodic Hann window, the power spectrum ``|X|^2``, a **Slaney** mel
filterbank (the mel scale linear below 1 kHz and logarithmic above; each triangle scaled by
``2 / (f_right - f_left)`` so it has unit area in Hz: ``librosa.filters.mel``'s default;
``mel_scale="htk"`` selects ``2595 log10(1 + f/700)`` instead), then ``log(max(mel, floor))``.
The result is float32 ``(frames, n_mels)``: ``(T, F)``, what ``SequenceIterator`` batches.

``load_librispeech(root)`` walks LibriSpeech's ``<split>/<speaker>/<chapter>/`` folders (FLAC
audio decoded with ``soundfile`` when installed, plus ``<speaker>-<chapter>.trans.txt``).
``synthesize_digits(n)`` speaks digit strings ("three one four") with ``espeak-ng``, varying
voice, speed and pitch, and caches the WAVs and a ``manifest.json`` on disk.
"""

from __future__ import annotations

import json
import math
import os
import shutil
import subprocess
import sys
import wave
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np

from ngraph_core import safe_json

from .iterators import DataError
from .packaged import data_dirs

SAMPLE_RATE = 16_000
MAX_WAV_SECONDS = 600  # refuse WAV headers announcing more than 10 minutes per file
MAX_TRANSCRIPT_BYTES = 1 << 20
DIGITS = ("zero", "one", "two", "three", "four", "five", "six", "seven", "eight", "nine")
VARIANTS = ("m1", "m2", "m3", "m4", "f1", "f2", "f3", "f4")  # espeak-ng voice variants mixed with each accent


class MissingDependencyError(DataError, ImportError):
    """An optional tool or package (``soundfile``, ``espeak-ng``) that this loader needs is not installed."""


# -- WAV and resampling ---------------------------------------------------------------------------
def read_wav(path: str | Path) -> tuple[np.ndarray, int]:
    """Read a 16-bit PCM WAV file (mono or stereo, averaged to mono).

    Returns:
        ``(samples, rate)``: float32 samples in [-1, 1) and the sample rate in Hz.

    Raises:
        DataError: not a WAV file, a sample width other than 16 bits, more than 2 channels,
            more than ``MAX_WAV_SECONDS`` announced, or a truncated file.

    Example:
        >>> samples, rate = read_wav("digit.wav")
    """
    try:
        with wave.open(str(path), "rb") as f:
            channels, width, rate, frames = f.getnchannels(), f.getsampwidth(), f.getframerate(), f.getnframes()
            if width != 2 or channels not in (1, 2) or rate < 1:
                raise DataError(f"read_wav: {path}: expected 16-bit PCM with 1 or 2 channels, received "
                                f"{8 * width}-bit with {channels} channel(s) at {rate} Hz; hint: convert with "
                                "`ffmpeg -i in -acodec pcm_s16le out.wav`")
            if frames > MAX_WAV_SECONDS * rate:
                raise DataError(f"read_wav: {path}: {frames} frames announced, expected at most "
                                f"{MAX_WAV_SECONDS} s ({MAX_WAV_SECONDS * rate} frames)")
            raw = f.readframes(frames)
    except (wave.Error, EOFError) as err:
        raise DataError(f"read_wav: {path}: expected a PCM WAV file, received an unreadable one ({err})") from err
    if len(raw) != frames * channels * 2:
        raise DataError(f"read_wav: {path}: truncated, {len(raw)} of {frames * channels * 2} data bytes")
    samples = np.frombuffer(raw, dtype="<i2").reshape(frames, channels).mean(axis=1)
    return (samples / 32768.0).astype(np.float32), rate


def write_wav(path: str | Path, samples: np.ndarray, rate: int) -> None:
    """Write mono float samples in [-1, 1] as 16-bit PCM (clipped). Example: ``write_wav("a.wav", x, 16000)``."""
    pcm = np.clip(np.round(np.asarray(samples, dtype=np.float64) * 32768.0), -32768, 32767).astype("<i2")
    with wave.open(str(path), "wb") as f:
        f.setnchannels(1)
        f.setsampwidth(2)
        f.setframerate(int(rate))
        f.writeframes(pcm.tobytes())


def resample(samples: np.ndarray, rate_in: int, rate_out: int = SAMPLE_RATE, zeros: int = 16) -> np.ndarray:
    """Band-limited resampling by a windowed-sinc filter (polyphase-equivalent for rational ratios).

    Output sample ``n`` sits at input time ``t = n * rate_in / rate_out`` and is
    ``sum_k x[k] * fc * sinc(fc * (t - k)) * kaiser(t - k)`` with cutoff ``fc = min(1, rate_out / rate_in)``
    (relative to the input Nyquist), over ``zeros / fc`` taps each side.

    Args:
        samples: 1-D signal.
        rate_in, rate_out: sample rates in Hz.
        zeros: sinc zero crossings kept each side (filter quality).

    Returns:
        float32 signal of ``ceil(len * rate_out / rate_in)`` samples.

    Example:
        >>> resample(np.zeros(22050), 22050).shape
        (16000,)
    """
    x = np.asarray(samples, dtype=np.float64)
    if x.ndim != 1 or rate_in < 1 or rate_out < 1:
        raise DataError(f"resample: expected a 1-D signal and positive rates, received shape {x.shape}, "
                        f"rates {rate_in} -> {rate_out}")
    if rate_in == rate_out:
        return x.astype(np.float32)
    g = math.gcd(rate_in, rate_out)
    up, down = rate_out // g, rate_in // g
    fc = min(1.0, rate_out / rate_in)
    width = int(math.ceil(zeros / fc))
    taps = np.arange(-width + 1, width + 1)
    n_out = -(-x.size * up // down)
    out = np.empty(n_out)
    padded = np.concatenate([np.zeros(width), x, np.zeros(width + 1)])
    for start in range(0, n_out, 8192):  # blocks bound the (block, taps) gather
        n = np.arange(start, min(start + 8192, n_out))
        base = n * down // up  # integer part of t, exact
        frac = (n * down % up) / up
        k = base[:, None] + taps[None, :]
        dt = (base[:, None] + frac[:, None]) - k
        h = fc * np.sinc(fc * dt) * np.i0(8.6 * np.sqrt(np.clip(1 - (dt / width) ** 2, 0, 1))) / np.i0(8.6)
        out[start: start + n.size] = np.sum(h * padded[k + width], axis=1)
    return out.astype(np.float32)


# -- STFT and log-mel -----------------------------------------------------------------------------
def hann_window(length: int) -> np.ndarray:
    """The periodic Hann window ``0.5 - 0.5 cos(2 pi n / length)`` (as torch.hann_window)."""
    return 0.5 - 0.5 * np.cos(2 * np.pi * np.arange(length) / length)


def stft(samples: np.ndarray, n_fft: int = 400, hop_length: int = 160, center: bool = True) -> np.ndarray:
    """Short-time Fourier transform with a periodic Hann window of ``n_fft`` samples.

    Returns:
        complex ``(frames, n_fft // 2 + 1)``; with ``center``, ``1 + len // hop_length`` frames
        (the signal reflect-padded by ``n_fft // 2`` each side).

    Example:
        >>> stft(np.zeros(16000)).shape
        (101, 201)
    """
    x = np.asarray(samples, dtype=np.float64)
    if center:
        x = np.pad(x, n_fft // 2, mode="reflect" if x.size > n_fft // 2 else "constant")
    if x.size < n_fft:
        x = np.pad(x, (0, n_fft - x.size))
    frames = np.lib.stride_tricks.sliding_window_view(x, n_fft)[::hop_length]
    return np.fft.rfft(frames * hann_window(n_fft), axis=1)


def hz_to_mel(hz: np.ndarray | float, scale: str = "slaney") -> np.ndarray:
    """Hz to mel: Slaney (3 mels per 200 Hz up to 1 kHz = 15 mels, then 27 mels per factor 6.4) or HTK."""
    f = np.asarray(hz, dtype=np.float64)
    if scale == "htk":
        return 2595.0 * np.log10(1.0 + f / 700.0)
    linear = f / (200.0 / 3)
    return np.where(f >= 1000.0, 15.0 + np.log(np.maximum(f, 1e-12) / 1000.0) / (np.log(6.4) / 27.0), linear)


def mel_to_hz(mel: np.ndarray | float, scale: str = "slaney") -> np.ndarray:
    """The inverse of ``hz_to_mel``."""
    m = np.asarray(mel, dtype=np.float64)
    if scale == "htk":
        return 700.0 * (10.0 ** (m / 2595.0) - 1.0)
    return np.where(m >= 15.0, 1000.0 * np.exp((np.log(6.4) / 27.0) * (m - 15.0)), (200.0 / 3) * m)


def mel_filterbank(rate: int = SAMPLE_RATE, n_fft: int = 400, n_mels: int = 80, fmin: float = 0.0,
                   fmax: float | None = None, scale: str = "slaney") -> np.ndarray:
    """Triangular mel filters over the ``n_fft // 2 + 1`` FFT bins, ``(n_mels, n_fft // 2 + 1)``.

    Centres are evenly spaced in mel between ``fmin`` and ``fmax`` (default ``rate / 2``); each
    triangle is scaled to unit area in Hz (Slaney normalisation, as librosa's default).

    Raises:
        DataError: an unknown scale or an empty frequency range.

    Example:
        >>> mel_filterbank().shape
        (80, 201)
    """
    fmax = rate / 2 if fmax is None else fmax
    if scale not in ("slaney", "htk") or not 0 <= fmin < fmax <= rate / 2:
        raise DataError(f"mel_filterbank: expected scale 'slaney' or 'htk' and 0 <= fmin < fmax <= {rate / 2}, "
                        f"received scale={scale!r}, fmin={fmin}, fmax={fmax}")
    edges = mel_to_hz(np.linspace(hz_to_mel(fmin, scale), hz_to_mel(fmax, scale), n_mels + 2), scale)
    freqs = np.fft.rfftfreq(n_fft, 1.0 / rate)
    lower = (freqs[None, :] - edges[:-2, None]) / (edges[1:-1] - edges[:-2])[:, None]
    upper = (edges[2:, None] - freqs[None, :]) / (edges[2:] - edges[1:-1])[:, None]
    return np.maximum(0.0, np.minimum(lower, upper)) * (2.0 / (edges[2:] - edges[:-2]))[:, None]


def log_mel_spectrogram(samples: np.ndarray, rate: int = SAMPLE_RATE, n_fft: int = 400, hop_length: int = 160,
                        n_mels: int = 80, floor: float = 1e-10, scale: str = "slaney") -> np.ndarray:
    """Log-mel features ``log(max(mel_filterbank @ |STFT|^2, floor))``, float32 ``(frames, n_mels)``.

    Args:
        samples: 1-D signal at ``rate`` (16 kHz: 25 ms windows, 10 ms hop by default).
        floor: the smallest power kept, so silence gives ``log(floor)`` instead of ``-inf``.

    Example:
        >>> log_mel_spectrogram(np.zeros(16000)).shape
        (101, 80)
    """
    power = np.abs(stft(samples, n_fft, hop_length)) ** 2
    mel = power @ mel_filterbank(rate, n_fft, n_mels, scale=scale).T
    return np.log(np.maximum(mel, floor)).astype(np.float32)


def wav_features(path: str | Path, rate: int = SAMPLE_RATE, **kwargs: float) -> np.ndarray:
    """``log_mel_spectrogram`` of a WAV file resampled to ``rate``. Example: ``wav_features("a.wav").shape``."""
    samples, rate_in = read_wav(path)
    return log_mel_spectrogram(resample(samples, rate_in, rate), rate, **kwargs)  # type: ignore[arg-type]


# -- LibriSpeech ----------------------------------------------------------------------------------
def read_flac(path: str | Path) -> tuple[np.ndarray, int]:
    """Decode a FLAC file with ``soundfile`` (optional): mono float32 and its rate.

    Raises:
        MissingDependencyError: ``soundfile`` is not installed (hint: ``pip install soundfile``).
    """
    try:
        import soundfile  # optional: only FLAC needs it
    except ImportError as err:
        raise MissingDependencyError(f"read_flac: {path}: expected the `soundfile` package to decode FLAC, "
                                     "received ImportError; hint: `pip install soundfile` (or convert the "
                                     "corpus to 16-bit WAV and pass audio_ext='.wav')") from err
    data, rate = soundfile.read(str(path), dtype="float32", always_2d=True)
    return data.mean(axis=1).astype(np.float32), int(rate)


def walk_librispeech(root: str | Path, audio_ext: str = ".flac") -> list[tuple[str, Path, str]]:
    """Find every utterance under a LibriSpeech folder (``<speaker>/<chapter>/*.trans.txt`` + audio).

    Each transcript line reads ``<speaker>-<chapter>-<utterance> WORDS ...``; its audio is
    ``<id><audio_ext>`` in the same folder. Symbolic links are not followed.

    Returns:
        ``[(utterance_id, audio_path, transcript), ...]`` sorted by id.

    Raises:
        DataError: ``root`` is not a folder, holds no transcripts, a malformed line, or a missing audio file.

    Example:
        >>> utts = walk_librispeech("~/data/LibriSpeech/dev-clean")
    """
    base = Path(root).expanduser()
    if not base.is_dir():
        raise DataError(f"walk_librispeech: expected a LibriSpeech folder, received {base} (not a directory)")
    found: list[tuple[str, Path, str]] = []
    for folder, _, files in os.walk(base, followlinks=False):
        for name in sorted(f for f in files if f.endswith(".trans.txt")):
            path = Path(folder) / name
            if path.is_symlink() or path.stat().st_size > MAX_TRANSCRIPT_BYTES:
                raise DataError(f"walk_librispeech: {path}: expected a regular transcript file under "
                                f"{MAX_TRANSCRIPT_BYTES} bytes")
            for lineno, line in enumerate(path.read_text(encoding="utf-8").splitlines(), 1):
                if not line.strip():
                    continue
                utt, _, text = line.strip().partition(" ")
                audio = Path(folder) / f"{utt}{audio_ext}"
                if not text or utt.count("-") != 2:
                    raise DataError(f"walk_librispeech: {path}:{lineno}: expected '<speaker>-<chapter>-<utt> "
                                    f"WORDS', received {line[:80]!r}")
                if not audio.is_file():
                    raise DataError(f"walk_librispeech: {path}:{lineno}: expected audio {audio.name} next to "
                                    f"the transcript, received no such file")
                found.append((utt, audio, text))
    if not found:
        raise DataError(f"walk_librispeech: no *.trans.txt under {base}; expected <speaker>/<chapter>/ folders")
    return sorted(found)


def load_librispeech(root: str | Path, limit: int | None = None, audio_ext: str = ".flac",
                     decoder: Callable[[Path], tuple[np.ndarray, int]] | None = None
                     ) -> tuple[list[np.ndarray], list[str]]:
    """Log-mel features and transcripts of a local LibriSpeech split (never downloads).

    Args:
        root: e.g. ``~/data/LibriSpeech/dev-clean``.
        limit: read at most this many utterances (in id order).
        audio_ext, decoder: the audio suffix and its decoder (default: ``read_flac`` / ``read_wav``).

    Returns:
        ``(features, transcripts)``: float32 ``(T_i, 80)`` arrays at 16 kHz and upper-case strings.

    Raises:
        DataError: as ``walk_librispeech``; MissingDependencyError without ``soundfile`` for FLAC.

    Example:
        >>> feats, texts = load_librispeech("~/data/LibriSpeech/dev-clean", limit=100)
    """
    decode = decoder or (read_flac if audio_ext == ".flac" else read_wav)
    utts = walk_librispeech(root, audio_ext)[:limit]
    features = []
    for _, audio, _ in utts:
        samples, rate = decode(audio)
        features.append(log_mel_spectrogram(resample(samples, rate, SAMPLE_RATE)))
    return features, [text for _, _, text in utts]


# -- spoken digits (espeak-ng) --------------------------------------------------------------------
def espeak_voices() -> list[str]:
    """The installed espeak-ng English voices (its own ``gmw/`` accents, no MBROLA) times ``VARIANTS``.

    Raises:
        MissingDependencyError: ``espeak-ng`` is not on PATH (hint: ``make venv`` installs it).
    """
    exe = shutil.which("espeak-ng")
    if exe is None:
        raise MissingDependencyError("espeak_voices: expected the `espeak-ng` program on PATH, received none; "
                                     "hint: `make venv` installs it as root (or `apt-get install espeak-ng`)")
    listing = subprocess.run([exe, "--voices=en"], capture_output=True, text=True, timeout=30, check=True).stdout
    accents = sorted({line.split()[1] for line in listing.splitlines()[1:]
                      if len(line.split()) >= 5 and line.split()[4].startswith("gmw/")})
    variants = subprocess.run([exe, "--voices=variant"], capture_output=True, text=True, timeout=30).stdout
    installed = {line.split()[4][3:].lower() for line in variants.splitlines()[1:] if len(line.split()) >= 5}
    return [f"{a}+{v}" for a in accents for v in VARIANTS if v in installed] or accents


def digit_utterances(n: int, seed: int, voices: list[str], max_digits: int = 5) -> list[dict[str, object]]:
    """The ``n`` utterance specs of ``synthesize_digits``: text, file, voice, speed and pitch (seeded)."""
    rng = np.random.default_rng([seed, 0xD161])
    specs = []
    for i in range(n):
        digits = rng.integers(0, 10, size=int(rng.integers(1, max_digits + 1)))
        specs.append({"text": " ".join(DIGITS[d] for d in digits), "file": f"digits_{i:05d}.wav",
                      "voice": voices[int(rng.integers(len(voices)))], "speed": int(rng.integers(130, 200)),
                      "pitch": int(rng.integers(20, 80))})
    return specs


def read_manifest(path: str | Path) -> list[dict[str, object]]:
    """The utterances a synthesis cache's ``manifest.json`` lists (``synthesize_digits`` writes it).

    Args:
        path: the manifest.

    Returns:
        its ``utterances``: dicts with a ``file`` name, as written.

    Raises:
        DataError: the file cannot be read, is not JSON (or nests deeper than 8 levels, or is
            over 64 MiB), or its utterances are not objects naming a file.

    Example:
        >>> [u["text"] for u in read_manifest(folder / "manifest.json")][:2]
        ['three one four', 'one five']
    """
    hint = "hint: delete the cache folder; it is synthesized again"
    try:
        text = Path(path).read_bytes()
    except OSError as exc:
        raise DataError(f"read_manifest: cannot read {path} ({exc.strerror or exc}); {hint}") from None
    doc = safe_json.loads(text, what=f"read_manifest: {path}", error=DataError, max_depth=8, max_chars=64 << 20,
                          hint=hint)
    entries = doc.get("utterances", []) if isinstance(doc, dict) else None
    if not isinstance(entries, list) or not all(isinstance(e, dict) and isinstance(e.get("file"), str)
                                                 for e in entries):
        raise DataError(f"read_manifest: expected {path} to hold an object whose 'utterances' are objects naming "
                        f"a 'file', received {type(doc).__name__}; {hint}")
    return entries


def synthesize_digits(n: int, out_dir: str | Path | None = None, seed: int = 0,
                      max_digits: int = 5, progress: bool = False) -> tuple[list[np.ndarray], list[str]]:
    """Spoken digit strings ("three one four") from ``espeak-ng``, cached on disk, as log-mel features.

    Utterance ``i`` (its digits, voice, speed ``-s`` 130-199 wpm, pitch ``-p`` 20-79) depends only
    on ``seed`` and ``i``; WAVs (22,050 Hz) and ``manifest.json`` (one entry per file) live in
    ``out_dir`` and are re-synthesised only when missing or when their entry changed.

    Args:
        n: utterances.
        out_dir: the cache folder (default ``<data dir>/spoken_digits-<seed>``, see ``data_dirs``).
        seed: chooses the texts and the voices.
        max_digits: the longest digit string.
        progress: tqdm bars over the utterances synthesized (those not cached) and then featurized.

    Returns:
        ``(features, transcripts)``: float32 ``(T_i, 80)`` at 16 kHz, and the spoken texts.

    Raises:
        MissingDependencyError: ``espeak-ng`` is not installed. DataError: synthesis failed.

    Example:
        >>> feats, texts = synthesize_digits(3, "/tmp/digits")   # texts like ['three one four', ...]
    """
    folder = Path(out_dir) if out_dir is not None else data_dirs()[0] / f"spoken_digits-{seed}"
    folder.mkdir(parents=True, exist_ok=True)
    manifest_path = folder / "manifest.json"
    cached = {}
    if manifest_path.is_file():
        try:
            cached = {str(e["file"]): e for e in read_manifest(manifest_path)}
        except DataError:
            cached = {}  # a damaged cache: every utterance is synthesized again and the manifest rewritten
    specs = digit_utterances(n, seed, espeak_voices(), max_digits)
    missing = [s for s in specs if not (cached.get(s["file"]) == s and (folder / str(s["file"])).is_file())]
    for spec in _bar(missing, progress, "synthesizing"):
        wav = folder / str(spec["file"])
        cmd = ["espeak-ng", "-v", str(spec["voice"]), "-s", str(spec["speed"]), "-p", str(spec["pitch"]),
               "-w", str(wav), str(spec["text"])]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if done.returncode != 0 or not wav.is_file():
            raise DataError(f"synthesize_digits: expected espeak-ng to write {wav}, received exit code "
                            f"{done.returncode}: {done.stderr.strip()[:200]}")
        cached[str(spec["file"])] = spec
    entries = sorted(cached.values(), key=lambda e: str(e["file"]))
    tmp = manifest_path.with_suffix(".tmp")
    tmp.write_text(json.dumps({"seed": seed, "utterances": entries}, indent=1))
    os.replace(tmp, manifest_path)
    features = [wav_features(folder / str(s["file"])) for s in _bar(specs, progress, "features")]
    return features, [str(s["text"]) for s in specs]


def _bar(items: list[dict[str, object]], progress: bool, desc: str) -> Any:
    """``items``, wrapped in a tqdm bar over utterances when ``progress`` (and there is work to show)."""
    if not progress or not items:
        return items
    from tqdm import tqdm

    return tqdm(items, desc=desc, unit="utterance", file=sys.stderr, dynamic_ncols=True)
