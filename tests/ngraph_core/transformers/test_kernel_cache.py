"""The kernel cache is used only while private (``transformers/numpy/kernel_cache.py``): numba reads it back with
pickle, so a cache another user can write would run their code here. Fresh levels are made 0700; a cache
writable by a group or others, or owned by another user, is refused with a warning, and kernels then
compile in a private temporary directory, still correct, removed at exit."""

from __future__ import annotations

import os
import stat
import subprocess
import sys
import textwrap
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from ngraph_core.transformers.numpy import kernel_cache
from ngraph_core.transformers.numpy.kernel_cache import KernelCacheWarning, cache_dir, kernel_dir, unsafe_reason
from ngraph_core.transformers.numpy.numba_loader import HAVE_NUMBA, load_kernel

needs_numba = pytest.mark.skipif(not HAVE_NUMBA, reason="numba is not installed")
OTHER_UID = 65534  # nobody


@pytest.fixture(autouse=True)
def fresh_verdicts(monkeypatch: pytest.MonkeyPatch) -> Iterator[None]:
    """Each test decides afresh (verdicts are kept per process and configured directory)."""
    monkeypatch.setattr(kernel_cache, "_chosen", {})
    yield


def mode(path: Path) -> int:
    return stat.S_IMODE(path.stat().st_mode)


def owned_by_another_user(path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """``path`` owned by another uid: chown to nobody as root (CI), else this process pretends to be another uid."""
    if os.geteuid() == 0:
        os.chown(path, OTHER_UID, OTHER_UID)
    else:
        uid = os.geteuid() + 1
        monkeypatch.setattr(kernel_cache.os, "geteuid", lambda: uid)


def unique_kernel() -> tuple[str, float]:
    """A kernel source no earlier test loaded (``load_kernel`` keeps dispatchers in-process by source), and
    its x=2 value."""
    offset = float(uuid.uuid4().int % 1000)
    return f"from numba import njit\n\n\n@njit(cache=True)\ndef k(x):\n    return x * 3.0 + {offset!r}\n", 6.0 + offset


def test_a_fresh_cache_is_created_private_at_every_level(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NG_CACHE_DIR", str(tmp_path / "made" / "ngraph"))
    previous = os.umask(0o002)  # a umask that would leave directories group-writable
    try:
        chosen = kernel_dir()
    finally:
        os.umask(previous)
    assert chosen == cache_dir() == tmp_path / "made" / "ngraph" / "kernels"
    for level in (tmp_path / "made", tmp_path / "made" / "ngraph", chosen, chosen / "__pycache__"):
        assert mode(level) == 0o700, level


@pytest.mark.parametrize("bits", [0o777, 0o770, 0o757])
def test_a_cache_others_can_write_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, bits: int) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, bits)
    monkeypatch.setenv("NG_CACHE_DIR", str(shared))
    with pytest.warns(KernelCacheWarning, match=rf"kernel cache {shared}/kernels not used: {shared} is writable by "
                                                r".*expected a directory only this user can write.*hint: chmod 700"):
        chosen = kernel_dir()
    assert chosen != cache_dir() and mode(chosen) == 0o700 and chosen.stat().st_uid == os.geteuid()
    assert not (shared / "kernels").exists()  # nothing is created inside a refused cache


@needs_numba
def test_kernels_from_the_fallback_are_correct(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    monkeypatch.setenv("NG_CACHE_DIR", str(shared))
    source, want = unique_kernel()
    with pytest.warns(KernelCacheWarning):
        kernel = load_kernel(source)
    assert kernel(2.0) == want
    assert list(shared.iterdir()) == []
    assert any(kernel_dir().glob("k_*.py"))


def test_a_cache_owned_by_another_user_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    theirs = tmp_path / "theirs"
    theirs.mkdir(mode=0o755)
    owned_by_another_user(theirs, monkeypatch)
    monkeypatch.setenv("NG_CACHE_DIR", str(theirs))
    with pytest.warns(KernelCacheWarning, match=r"is owned by uid \d+, not by this process's user"):
        assert kernel_dir() != cache_dir()


@pytest.mark.skipif(os.geteuid() != 0, reason="chown of one file needs root (CI runs the tests as root)")
def test_a_cache_file_owned_by_another_user_is_refused(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NG_CACHE_DIR", str(tmp_path / "cache"))
    assert kernel_dir() == cache_dir()
    planted = cache_dir() / "__pycache__" / "k_0.k-1.py311.nbi"
    planted.write_bytes(b"")
    os.chown(planted, OTHER_UID, OTHER_UID)
    assert unsafe_reason(cache_dir()) == f"{planted} is owned by uid {OTHER_UID}, not by this process's user (uid 0)"


def test_a_writable_file_matters_only_where_others_can_reach_it(tmp_path: Path) -> None:
    directory = tmp_path / "cache" / "kernels"
    kernel_cache.make_private(directory / "__pycache__")
    index = directory / "__pycache__" / "k_0.k-1.py311.nbi"
    index.write_bytes(b"")
    os.chmod(index, 0o666)
    assert unsafe_reason(directory) is None  # in a 0700 folder nobody else can open it
    os.chmod(directory / "__pycache__", 0o755)
    assert unsafe_reason(directory) == f"{index} is writable by its group and other users (mode 0o666)"


def test_a_folder_above_the_cache_that_others_can_rename_in_is_refused(tmp_path: Path) -> None:
    above = tmp_path / "open"
    kernel_cache.make_private(above / "cache" / "kernels" / "__pycache__")
    os.chmod(above, 0o777)
    reason = unsafe_reason(above / "cache" / "kernels")
    assert reason is not None and reason.startswith(f"{above}, above the cache, is writable by its group and other "
                                                    "users without the sticky bit")
    os.chmod(above, 0o1777)  # sticky, as /tmp: others cannot rename what is ours
    assert unsafe_reason(above / "cache" / "kernels") is None


@needs_numba
def test_a_refused_cache_compiles_in_a_temporary_directory_removed_at_exit(tmp_path: Path) -> None:
    shared = tmp_path / "shared"
    shared.mkdir()
    os.chmod(shared, 0o777)
    script = textwrap.dedent("""
        import numpy as np
        import ngraph_core as ng
        from ngraph_core.transformers.numpy.kernel_cache import kernel_dir
        H, E = ng.make_axis(3, name="H"), ng.make_axis(11, name="E")
        x = ng.placeholder([H, E])
        with ng.transformers.make_transformer() as t:
            f = t.computation(ng.relu(x * 3.0 - 1.0) * x + 0.5, x)
            print(float(f(np.ones((3, 11), dtype=np.float32)).sum()))
        print(kernel_dir(), len(list(kernel_dir().glob("k_*.py"))))
    """)
    env = {**os.environ, "NG_CACHE_DIR": str(shared), "NG_KERNELS": "numba"}
    done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
    assert done.returncode == 0, done.stderr
    total, line = done.stdout.splitlines()
    temporary, kernels = line.rsplit(" ", 1)
    assert float(total) == 33 * 2.5 and int(kernels) >= 1
    assert "KernelCacheWarning" in done.stderr and f"kernel cache {shared}/kernels not used" in done.stderr
    assert not Path(temporary).exists()  # removed at exit
    assert list(shared.iterdir()) == []
