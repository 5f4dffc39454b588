"""A check both compiled-kernel test files share: a second process reuses the on-disk kernel cache."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path


def run_twice(script: str, env: dict[str, str], cache: Path) -> tuple[str, list[str]]:
    """Run ``script`` in two fresh processes with ``NG_CACHE_DIR=cache``; assert the second printed the
    same and left every file under ``cache/kernels`` untouched (nothing recompiled or rewritten).

    Returns:
        The first process's output, and the suffixes of the cached files.
    """
    env = {**os.environ, **env, "NG_CACHE_DIR": str(cache)}

    def run() -> str:
        done = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, timeout=300)
        assert done.returncode == 0, done.stderr
        return done.stdout

    def files() -> dict[Path, int]:
        return {p: p.stat().st_mtime_ns for p in (cache / "kernels").rglob("*") if p.is_file()}

    first = run()
    cached = files()
    assert run() == first
    assert files() == cached
    return first, [p.suffix for p in cached]
