"""Shared settings for the property-based fuzz tests (hypothesis).

Every fuzz test asserts one contract: a loader or decoder given hostile bytes ends with a
result or a typed error from the project's hierarchy — never a crash, a raw exception, a
hang past ``HANG_SECONDS`` or memory past a stated bound.

In CI they run with a small fixed budget and a fixed seed (``derandomize``), so the suite
stays fast and deterministic; ``make fuzz`` raises the budget (``NG_FUZZ_EXAMPLES``) and
runs only them (``-m fuzz``). Inputs that once failed live in ``tests/fuzz_corpus/<target>/``
and are replayed by the tests as regression cases (``corpus``).
"""

from __future__ import annotations

import os
from pathlib import Path

from hypothesis import HealthCheck, settings

CORPUS = Path(__file__).resolve().parent / "fuzz_corpus"
HANG_SECONDS = 15.0


def budget(default: int = 60) -> int:
    """Examples per fuzz test: ``NG_FUZZ_EXAMPLES`` when set (``make fuzz``), else ``default``."""
    value = os.environ.get("NG_FUZZ_EXAMPLES", "")
    return int(value) if value.isdigit() else default


def fuzz_settings(default: int = 60) -> settings:
    """Hypothesis settings for a fuzz test: the budget, a fixed seed unless fuzzing for real, no deadline."""
    deep = bool(os.environ.get("NG_FUZZ_EXAMPLES"))
    return settings(max_examples=budget(default), derandomize=not deep, deadline=None, database=None,
                    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])


def corpus(target: str) -> list[Path]:
    """The saved inputs that once broke ``target`` (files under ``tests/fuzz_corpus/<target>/``)."""
    folder = CORPUS / target
    return sorted(p for p in folder.iterdir() if p.is_file()) if folder.is_dir() else []
