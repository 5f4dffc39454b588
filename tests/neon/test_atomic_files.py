"""``atomic_path`` gives the saved file the mode a plain ``open()`` would, without touching the process-wide
umask: a thread creating files while saves run never gets a world-writable one.

The race itself is rarely caught (the old ``os.umask(0)`` window was two C calls long), so the first test
is the deterministic one: ``os.umask`` is never called by a save."""

from __future__ import annotations

import os
import stat
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from neon import atomic_files
from neon.atomic_files import atomic_path, current_umask


@pytest.fixture
def umask_022() -> Iterator[None]:
    previous = os.umask(0o022)  # set here, before any thread starts
    try:
        yield
    finally:
        os.umask(previous)


def plain_open_mode(path: Path) -> int:
    path.write_bytes(b"")
    return stat.S_IMODE(path.stat().st_mode)


def test_the_umask_is_read_not_set(tmp_path: Path, umask_022: None, monkeypatch: pytest.MonkeyPatch) -> None:
    assert current_umask() == 0o022

    def refuse(mask: int) -> int:
        raise AssertionError(f"os.umask({mask:#o}) called: it changes the mask of every thread")

    monkeypatch.setattr(os, "umask", refuse)
    with atomic_path(tmp_path / "a.json") as tmp:
        tmp.write_text("{}")
    assert (tmp_path / "a.json").read_text() == "{}"


@pytest.mark.parametrize("mask", [0o022, 0o077, 0o002])
def test_the_saved_file_has_the_mode_a_plain_open_gives(tmp_path: Path, mask: int) -> None:
    if atomic_files._umask_from_proc() is None and mask != atomic_files._IMPORT_UMASK:
        pytest.skip("no /proc/self/status Umask line: the umask is read once, at import")
    previous = os.umask(mask)
    try:
        with atomic_path(tmp_path / "saved.bin") as tmp:
            tmp.write_bytes(b"x")
        expected = plain_open_mode(tmp_path / "plain.bin")
    finally:
        os.umask(previous)
    assert expected == 0o666 & ~mask
    assert stat.S_IMODE((tmp_path / "saved.bin").stat().st_mode) == expected


def test_a_thread_creating_files_during_saves_never_gets_a_world_writable_one(tmp_path: Path,
                                                                             umask_022: None) -> None:
    (tmp_path / "saves").mkdir()
    (tmp_path / "created").mkdir()
    stop, modes = threading.Event(), []

    def create() -> None:
        n = 0
        while not stop.is_set():
            path = tmp_path / "created" / f"f{n % 50}"
            with open(path, "w"):
                pass
            modes.append(stat.S_IMODE(path.stat().st_mode))
            path.unlink()
            n += 1

    creator = threading.Thread(target=create)
    creator.start()
    try:
        for n in range(60):
            with atomic_path(tmp_path / "saves" / f"s{n % 5}.json") as tmp:
                tmp.write_text("{}")
    finally:
        stop.set()
        creator.join()
    assert modes and all(mode & stat.S_IWOTH == 0 for mode in modes), sorted({oct(m) for m in modes})
    assert {stat.S_IMODE(p.stat().st_mode) for p in (tmp_path / "saves").iterdir()} == {0o644}
