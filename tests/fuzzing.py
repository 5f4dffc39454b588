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

import copy
import os
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

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


def _children(node: Any) -> list:
    return list(node) if isinstance(node, dict) else list(range(len(node))) if isinstance(node, list) else []


def mutate_json(doc: Any, draw: Any, values: Any, keys: Sequence[str], wrap: Callable[[Any], Any],
                depths: Sequence[int] = (1, 8, 70), deeper: int = 3) -> Any:
    """``doc`` (a JSON tree, edited in place) with one node, reached by a random walk from the root,
    replaced, deleted, given a sibling, duplicated or nested ``depths`` deep.

    Args:
        doc: the tree to mutate.
        draw: hypothesis' ``draw`` (inside an ``st.composite``).
        values: a strategy of JSON values for replacements and additions (fresh objects each draw).
        keys: keys worth adding to objects besides random text (the format's own field names).
        wrap: one level of nesting around a node (``lambda n: {"arg": n}``); a list is used half the time.
        depths: how many levels a nesting adds.
        deeper: the walk goes one level deeper ``deeper`` times in ``deeper + 1``.
    """
    from hypothesis import strategies as st

    parent, key, node = None, None, doc
    while _children(node) and draw(st.integers(0, deeper)):
        parent, key = node, draw(st.sampled_from(_children(node)))
        node = node[key]
    kind = draw(st.sampled_from(["replace", "delete", "add", "duplicate", "nest"]))
    if kind == "replace" or parent is None:
        new = draw(values)
    elif kind == "delete":
        del parent[key]
        return doc
    elif kind == "add" and isinstance(node, (dict, list)):
        if isinstance(node, dict):
            node[draw(st.text(max_size=6) | st.sampled_from(list(keys)))] = draw(values)
        else:
            node.insert(draw(st.integers(0, len(node))), draw(values))
        return doc
    elif kind == "duplicate" and isinstance(parent, list):
        parent.insert(draw(st.integers(0, len(parent))), copy.deepcopy(node))
        return doc
    else:
        new = node
        for _ in range(draw(st.sampled_from(list(depths)))):
            new = [new] if draw(st.booleans()) else wrap(new)
    if parent is None:
        return new
    parent[key] = new
    return doc
