"""Atomic file writes: a temporary file beside the target, renamed over it once complete.

A save that fails or is killed leaves the previous file untouched. Temporary files are named
``.<target name>.<host>-<pid>-<random>.tmp``, so a later save can tell the ones left by killed
processes (a dead pid on this host, or older than ``STALE_SECONDS``) and remove them; a file
being written by a live process is never touched.

The saved file gets the mode a plain ``open()`` would give it (``0o666`` less the umask). The umask
is read without changing it (``/proc/self/status`` on Linux): setting it, even for a moment, is
process-wide, and a file another thread created meanwhile would get a world-writable mode.

Example:
    >>> with atomic_path("out/curve.png") as tmp:
    ...     figure.savefig(tmp, format="png")
"""

from __future__ import annotations

import os
import re
import socket
import tempfile
import time
import zlib
from collections.abc import Iterator
from contextlib import contextmanager, suppress
from pathlib import Path

STALE_SECONDS = 600.0  # a temporary file of another host (or of an older neon) this old is abandoned
HOST = f"{zlib.crc32(socket.gethostname().encode()):08x}"
_OURS = re.compile(r"([0-9a-f]{8})-(\d+)-\w+")
_MKSTEMP = re.compile(r"\w{8}")  # temporary files of earlier neon versions: .<name>.<8 random chars>.tmp


def _umask_from_proc() -> int | None:
    """The process's umask from ``/proc/self/status`` (Linux 4.7+), or None where that line is missing."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("Umask:"):
                    return int(line.split()[1], 8)
    except (OSError, ValueError, IndexError):
        pass
    return None


def _umask_once() -> int:
    """The umask where /proc cannot tell it: set and restored once, at import (the main thread, before
    the program starts the threads that save)."""
    mask = os.umask(0o022)
    os.umask(mask)
    return mask


_IMPORT_UMASK = _umask_from_proc()
if _IMPORT_UMASK is None:
    _IMPORT_UMASK = _umask_once()


def current_umask() -> int:
    """The process's umask, read without changing it (a umask set after import is seen on Linux only).

    Example:
        >>> oct(current_umask())
        '0o22'
    """
    mask = _umask_from_proc()
    return _IMPORT_UMASK if mask is None else mask


def pid_alive(pid: int) -> bool:
    """Whether a process ``pid`` exists on this host (one owned by another user counts)."""
    try:
        os.kill(pid, 0)
    except ProcessLookupError:
        return False
    except (PermissionError, OverflowError):
        return True
    return True


def stale_temporaries(path: str | Path, now: float | None = None) -> list[Path]:
    """The temporary files of ``path`` left by saves that were killed.

    Returns:
        those of a dead process on this host, and those of unknown owners (another host, an
        older neon) not modified for ``STALE_SECONDS``.

    Example:
        >>> stale_temporaries("out/model.h5")
        [PosixPath('out/.model.h5.1a2b3c4d-4242-k3j_x9qa.tmp')]
    """
    path = Path(path)
    prefix, now = f".{path.name}.", time.time() if now is None else now
    found = []
    if not path.parent.is_dir():
        return found
    for entry in path.parent.iterdir():
        name = entry.name
        if not (name.startswith(prefix) and name.endswith(".tmp")) or not entry.is_file():
            continue
        middle = name[len(prefix):-len(".tmp")]
        ours = _OURS.fullmatch(middle)
        if ours and ours[1] == HOST:
            if int(ours[2]) != os.getpid() and not pid_alive(int(ours[2])):
                found.append(entry)
        elif ours or _MKSTEMP.fullmatch(middle):
            with suppress(OSError):
                if now - entry.stat().st_mtime > STALE_SECONDS:
                    found.append(entry)
    return found


def remove_stale_temporaries(path: str | Path) -> list[Path]:
    """Remove ``stale_temporaries(path)``; the ones removed (a file that vanished meanwhile is skipped)."""
    removed = []
    for entry in stale_temporaries(path):
        with suppress(FileNotFoundError):
            entry.unlink()
            removed.append(entry)
    return removed


@contextmanager
def atomic_path(path: str | Path) -> Iterator[Path]:
    """Yield a temporary path next to ``path``; on success it replaces ``path``, on failure it is removed.

    Stale temporary files of ``path`` from killed saves are removed first.

    Raises:
        OSError: the directory cannot be made or written, or the data cannot reach the disk.

    Example:
        >>> with atomic_path("out/history.json") as tmp:
        ...     tmp.write_text("{}")
    """
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    remove_stale_temporaries(path)
    fd, tmp_name = tempfile.mkstemp(prefix=f".{path.name}.{HOST}-{os.getpid()}-", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp_name)
    try:
        os.chmod(tmp, 0o666 & ~current_umask())  # mkstemp makes the file private; give it open()'s mode
        yield tmp
        with open(tmp, "rb+") as f:  # the data is on disk before the rename makes it visible
            os.fsync(f.fileno())
        os.replace(tmp, path)
    except BaseException:
        tmp.unlink(missing_ok=True)
        raise
    with suppress(OSError):  # the rename itself reaches the disk (not possible on every file system)
        directory = os.open(path.parent, os.O_RDONLY)
        try:
            os.fsync(directory)
        finally:
            os.close(directory)
