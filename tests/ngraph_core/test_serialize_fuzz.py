"""Fuzzing ``ng.deserialize``: mutated graph documents end in a verified graph or a ``SerializationError``.

The seeds are the documents of ``test_serialize.GRAPHS`` (a graph per ``OpType``). The
mutations act on the JSON (a value replaced by another JSON value, a key or element deleted
or added, an op record duplicated, a value buried under deep nesting) and on the raw text (cut,
spliced, characters flipped). The contract (``tests/fuzzing.py``): success gives ops that pass
``ng.verify``, failure is a ``SerializationError``; anything else fails, and so does an input
slower than ``HANG_SECONDS`` or using more than 64 bytes of Python memory per character of text
plus 4 MiB. Also here: the size, depth and op-count limits, and replays of
``tests/fuzz_corpus/graph_json``.
"""

from __future__ import annotations

import copy
import json
import time
import tracemalloc
from pathlib import Path
from typing import Any

import pytest
from fuzzing import HANG_SECONDS, corpus, fuzz_settings, mutate_json
from hypothesis import given
from hypothesis import strategies as st
from test_serialize import GOOD, GRAPHS

import ngraph_core as ng
from ngraph_core.errors import SerializationError

SEEDS = [ng.serialize([*results, *placeholders]) for results, placeholders in (build() for build in GRAPHS.values())]
EDGE_VALUES = st.sampled_from([None, True, 0, -1, 1, 2**31, 2**63, 10**40, -(10**40), 1e308, -0.0, 0.5, "", "nan",
                               "inf", "x" * 300, "\u0000", "add", "float32", [], {}, [[]], {"": None}])
JSON_VALUES = st.recursive(
    EDGE_VALUES | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=6), inner, max_size=4),
    max_leaves=12).map(copy.deepcopy)  # a fresh copy: mutations must not edit the strategy's constants


def check_contract(text: str) -> str:
    """Decode ``text`` once: ``"ok"`` (verified ops) or ``"typed"``; fail the test on anything else."""
    tracemalloc.start()
    start = time.perf_counter()
    try:
        roots = ng.deserialize(text)
        assert roots and all(isinstance(r, ng.Op) for r in roots) or roots == []
        ng.verify(roots)
        outcome = "ok"
    except SerializationError as exc:
        assert "expected" in str(exc) and "received" in str(exc), exc
        outcome = "typed"
    finally:
        elapsed = time.perf_counter() - start
        peak = tracemalloc.get_traced_memory()[1]
        tracemalloc.stop()
    assert elapsed < HANG_SECONDS, f"{elapsed:.1f} s on {text[:200]!r}"
    assert peak <= 64 * len(text) + (4 << 20), f"{peak} bytes on {len(text)} characters"
    return outcome


def mutate_doc(doc: Any, draw: st.DrawFn) -> Any:
    """One mutation of a graph document (nesting wraps nodes in ``{"arg": ...}``)."""
    return mutate_json(doc, draw, JSON_VALUES, ["arg", "src", "name", "attrs"], lambda n: {"arg": n})


def mutate_text(text: str, draw: st.DrawFn) -> str:
    """``text`` cut, spliced or with characters flipped."""
    at = draw(st.integers(0, len(text)))
    kind = draw(st.sampled_from(["cut", "splice", "flip"]))
    if kind == "cut":
        return text[:at]
    if kind == "splice":
        return text[:at] + draw(st.text(alphabet='{}[]",:0123456789.eE-+ \\utrfn', max_size=12)) + text[at:]
    return text[:at] + draw(st.characters(max_codepoint=0x7F)) + text[at + 1:]


@st.composite
def mutants(draw: st.DrawFn) -> str:
    text = draw(st.sampled_from(SEEDS))
    if draw(st.booleans()):
        doc = json.loads(text)
        for _ in range(draw(st.integers(1, 3))):
            doc = mutate_doc(doc, draw)
        return json.dumps(doc)
    for _ in range(draw(st.integers(1, 3))):
        text = mutate_text(text, draw)
    return text


@pytest.mark.fuzz
@fuzz_settings(250)
@given(text=mutants())
def test_mutated_documents_end_in_a_graph_or_a_serialization_error(text: str) -> None:
    check_contract(text)


@pytest.mark.fuzz
@fuzz_settings(100)
@given(value=JSON_VALUES)
def test_any_json_value_ends_in_a_graph_or_a_serialization_error(value: Any) -> None:
    check_contract(json.dumps(value))


def test_every_seed_loads() -> None:
    assert all(check_contract(text) == "ok" for text in SEEDS)


@pytest.mark.parametrize("text", ["[" * 100_000 + "]" * 100_000, '{"a": ' * 100_000 + "1" + "}" * 100_000,
                                  "[" * 1_000_000, '{"ops": [' + "{" * 65],
                         ids=["arrays 100k deep", "objects 100k deep", "1M unclosed", "65 deep"])
def test_deep_nesting_is_refused_quickly(text: str) -> None:
    start = time.perf_counter()
    with pytest.raises(SerializationError, match=r"expected at most max_depth=64 levels of nesting, received \d+"):
        ng.deserialize(text)
    assert time.perf_counter() - start < 0.5


def test_brackets_in_strings_do_not_count_and_limits_are_keywords() -> None:
    doc = json.loads(GOOD)
    doc["ops"][0]["meta"]["name"] = "[[[[" * 40 + '\\"{{'
    assert check_contract(json.dumps(doc)) == "ok"  # 160 brackets inside a string are not nesting
    with pytest.raises(SerializationError, match="at most max_depth=3 levels"):
        ng.deserialize(GOOD, max_depth=3)
    with pytest.raises(SerializationError, match=f"at most max_chars=100 characters, received {len(GOOD)}"):
        ng.deserialize(GOOD, max_chars=100)
    with pytest.raises(SerializationError, match="at most max_ops=2 op records, received"):
        ng.deserialize(GOOD, max_ops=2)
    with pytest.raises(SerializationError, match="JSON numbers of at most 4,300 digits"):
        ng.deserialize('{"format_version": ' + "1" * 5000 + "}")


@pytest.mark.parametrize("path", corpus("graph_json"), ids=lambda p: p.name)
def test_saved_inputs_that_once_broke_the_decoder(path: Path) -> None:
    assert check_contract(path.read_text(encoding="utf-8")) == "typed"
