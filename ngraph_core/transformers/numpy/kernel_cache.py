"""The on-disk kernel cache, used only while no other user can write it.

Generated kernels (``numba_loader.load_kernel``) are written as ``k_<hash>.py`` under ``$NG_CACHE_DIR/kernels``
(default ``~/.cache/ngraph/kernels``) and imported, and numba keeps their machine code beside them in
``kernels/__pycache__`` (``*.nbi`` indexes and ``*.nbc`` code), which it reads back with ``pickle``. So
whoever can write those directories runs code in the next process that loads a kernel. The cache is
therefore used only when it is private:

* every directory level this module creates (``$NG_CACHE_DIR`` and its missing parents, ``kernels``,
  ``kernels/__pycache__``) is made 0700, whatever the umask;
* before a process loads its first kernel, ``$NG_CACHE_DIR``, ``kernels`` and ``kernels/__pycache__``
  must be directories owned by the current user and writable by no group or other user; every entry
  of the last two must be owned by the current user and not writable by a group or others that can
  reach it; and no directory above ``$NG_CACHE_DIR`` may let another user replace it (one owned by a
  user other than root or the current one, or writable by a group or others without the sticky bit,
  as ``/tmp`` has).

A cache that fails is not used: a ``KernelCacheWarning`` names the path and the reason, and this
process compiles its kernels in a private temporary directory (0700, removed at exit), so it runs as
it would, only the next process compiles again. ``chmod 700`` (or ``chown``) the directory named, or
point ``NG_CACHE_DIR`` at a private one. Where numba's own ``NUMBA_CACHE_DIR`` is set, numba keeps its
files there instead, and keeping that private is up to whoever set it. ``conv_choices.json`` (beside
``kernels``, ``conv_choice.py``) is JSON read as data, never executed. Without POSIX owners and modes
(Windows) the checks are skipped.

Example:
    >>> kernel_dir()  # PosixPath('/home/me/.cache/ngraph/kernels'), or a private temporary directory
"""

from __future__ import annotations

import atexit
import os
import shutil
import stat
import tempfile
import threading
import warnings
from pathlib import Path


class KernelCacheWarning(UserWarning):
    """The kernel cache directory is not private: this process compiles in a temporary directory instead."""


_chosen: dict[Path, Path] = {}  # the configured kernel directory -> the directory kernels go to
_fallback: Path | None = None
_lock = threading.Lock()


def cache_dir() -> Path:
    """Where generated kernel sources (and numba's cache files, in their ``__pycache__``) are configured to live.

    Returns:
        ``$NG_CACHE_DIR/kernels`` when ``NG_CACHE_DIR`` is set, else ``~/.cache/ngraph/kernels`` (used
        only when private: ``kernel_dir``).

    Example:
        >>> cache_dir().name  # 'kernels'
    """
    root = os.environ.get("NG_CACHE_DIR")
    base = Path(root) if root else Path.home() / ".cache" / "ngraph"
    return base / "kernels"


def make_private(path: Path) -> None:
    """Create the directory ``path`` and its missing parents, each mode 0700; existing ones are left as they are.

    Raises:
        OSError: a level cannot be created.

    Example:
        >>> make_private(Path("/tmp/mine/ngraph/kernels"))  # /tmp/mine, .../ngraph, .../kernels: 0700
    """
    missing = []
    while not os.path.lexists(path) and path.parent != path:
        missing.append(path)
        path = path.parent
    for level in reversed(missing):
        try:
            os.mkdir(level, 0o700)
        except FileExistsError:
            continue  # made meanwhile by another process: the checks decide whether it can be used
        os.chmod(level, 0o700)  # a umask such as 0o777 also takes the owner's bits


def _writers(mode: int) -> str:
    return "its group and other users" if mode & 0o022 == 0o022 else "its group" if mode & 0o020 else "other users"


def unsafe_reason(directory: Path) -> str | None:
    """Why the kernel directory ``directory`` (``<cache>/kernels``) must not be used, or None when it is private.

    See the module docstring for the rules: owners and write bits of the cache's own levels and files,
    and of every directory above it. Levels that do not exist yet pass (``kernel_dir`` checks, creates
    the missing ones 0700, and checks again).

    Raises:
        OSError: a level cannot be read (the caller treats it as unusable).

    Example:
        >>> unsafe_reason(Path("/tmp/shared/kernels"))
        '/tmp/shared is writable by other users (mode 0o777)'
    """
    if not hasattr(os, "geteuid"):
        return None  # no POSIX owners and modes to check
    uid = os.geteuid()
    pycache = directory / "__pycache__"
    levels = [level for level in (directory.parent, directory, pycache) if os.path.lexists(level)]
    for level in levels:
        info = os.stat(level)
        if not stat.S_ISDIR(info.st_mode):
            return f"{level} is not a directory"
        if info.st_uid != uid:
            return f"{level} is owned by uid {info.st_uid}, not by this process's user (uid {uid})"
        if info.st_mode & 0o022:
            return f"{level} is writable by {_writers(info.st_mode)} (mode {oct(stat.S_IMODE(info.st_mode))})"
    for folder in levels[1:]:
        reach = os.stat(folder).st_mode  # a group (others) can open a file only through a folder it may search
        with os.scandir(folder) as entries:
            for entry in entries:
                info = entry.stat(follow_symlinks=False)
                if info.st_uid != uid:
                    return f"{entry.path} is owned by uid {info.st_uid}, not by this process's user (uid {uid})"
                open_to = info.st_mode & ((0o020 if reach & 0o010 else 0) | (0o002 if reach & 0o001 else 0))
                if open_to and not stat.S_ISLNK(info.st_mode):
                    return f"{entry.path} is writable by {_writers(open_to)} (mode {oct(stat.S_IMODE(info.st_mode))})"
    base = directory.parent
    for above in dict.fromkeys([*base.absolute().parents, *base.resolve().parents]):
        if not os.path.exists(above):
            continue  # not made yet: make_private makes it 0700
        info = os.stat(above)
        if info.st_uid not in (0, uid):
            return f"{above}, above the cache, is owned by uid {info.st_uid}, who can replace the cache"
        if info.st_mode & 0o022 and not info.st_mode & stat.S_ISVTX:
            return (f"{above}, above the cache, is writable by {_writers(info.st_mode)} without the sticky bit "
                    f"(mode {oct(stat.S_IMODE(info.st_mode))}), who can replace the cache")
    return None


def _private_fallback() -> Path:
    """This process's private temporary kernel directory (0700, removed at exit), made on first use."""
    global _fallback
    if _fallback is None:
        _fallback = Path(tempfile.mkdtemp(prefix="ngraph-kernels-"))
        atexit.register(shutil.rmtree, _fallback, ignore_errors=True)
    return _fallback


def kernel_dir() -> Path:
    """The directory kernels are written to and imported from: ``cache_dir()`` when it is private (created
    0700 where missing), else this process's private temporary directory, with a ``KernelCacheWarning``.

    The verdict is kept per configured directory for the process (the checks read the cache once).

    Returns:
        the directory.

    Example:
        >>> kernel_dir() == cache_dir()  # True for a private cache
    """
    directory = cache_dir()
    chosen = _chosen.get(directory)
    if chosen is not None:
        return chosen
    with _lock:
        if directory not in _chosen:
            try:  # nothing is created inside a cache that is already refused
                reason = unsafe_reason(directory)
                if reason is None:
                    make_private(directory / "__pycache__")
                    reason = unsafe_reason(directory)
            except OSError as exc:
                reason = f"it cannot be created or read ({exc.strerror or exc}: {exc.filename or directory})"
            if reason is None:
                _chosen[directory] = directory
            else:
                _chosen[directory] = _private_fallback()
                warnings.warn(
                    f"kernel cache {directory} not used: {reason}; expected a directory only this user can write, "
                    f"because the cache holds code that is loaded and run. This process compiles its kernels in "
                    f"{_chosen[directory]} (private, removed at exit), so the next one compiles them again; "
                    f"hint: chmod 700 (or chown) the path named, or set NG_CACHE_DIR to a private directory",
                    KernelCacheWarning, stacklevel=3)
        return _chosen[directory]
