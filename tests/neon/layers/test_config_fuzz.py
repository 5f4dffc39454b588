"""Fuzzing ``deserialize_layer``: mutated layer configs and arbitrary JSON end in a layer or a ``LayerError``.

The seeds are configs of real models: a ``Sequential`` of ``Conv``/``Pool``/``BatchNorm``/
``Affine``, and containers nesting each other (``MergeSum``, ``MergeBroadcast``, ``Tree`` with a
shared ``BranchNode``, ``ResidualBlock``). The mutations replace a value by another JSON value,
delete or add a key or element, duplicate an element or bury a value under nesting; arbitrary
JSON trees and ``{"class_name": <a real class>, "config": <anything>}`` are tried too. The
contract (``tests/fuzzing.py``): the result is a ``Layer`` whose config serializes again, or the
error is an ``ng.NgraphError``; anything else fails, and so does an input slower than
``HANG_SECONDS``. Inputs that once broke the decoder live in ``tests/fuzz_corpus/layer_config``.

Size fields (``nout``, ``fshape``, ``strides``, ``padding``, ``vocab_size``...) of two saved models
(a CNN, a token LSTM) are also mutated to edge values and loaded whole with ``load_model``: the
load gives exactly the stored weights, or a typed error with a hint, within ``HANG_SECONDS`` and
``SIZE_MEMORY_BOUND`` of traced allocations (``tests/fuzz_corpus/load_model`` holds past failures).
"""

from __future__ import annotations

import copy
import functools
import json
import tempfile
import time
import tracemalloc
from pathlib import Path
from typing import Any

import numpy as np
import pytest
from fuzzing import HANG_SECONDS, corpus, fuzz_settings, mutate_json
from hypothesis import given
from hypothesis import strategies as st

import ngraph_core as ng
from neon.containers import BranchNode, MergeBroadcast, MergeSum, Sequential, Tree
from neon.layers import (
    LSTM,
    Affine,
    BatchNorm,
    Conv,
    Dropout,
    Flatten,
    Layer,
    LayerError,
    LookupTable,
    Pool,
    RecurrentSum,
    ResidualBlock,
    Unflatten,
    deserialize_layer,
    layer_classes,
    serialize_layer,
)
from neon.layers.serialization import short_repr
from neon.model import Model
from neon.saving import CheckpointData, load_model, read_checkpoint, write_checkpoint


def _seeds() -> list[dict]:
    fork = BranchNode()
    models = [
        Sequential([Conv((3, 3, 8), padding=1, activation="relu"), Pool(2), BatchNorm(), Dropout(0.5), Flatten(),
                    Affine(10, activation="softmax")]),
        Sequential([MergeSum([[Affine(4, activation="relu"), Affine(4)], []]),
                    MergeBroadcast([[Affine(3)], [Affine(2), Affine(2)]], merge="concat"),
                    Tree([[Affine(4), fork, Affine(2)], [fork, Affine(3)]], alphas=[1.0, 0.3])]),
        Sequential([ResidualBlock([Conv((3, 3, 4), padding=1), BatchNorm()], shortcut="B"), Pool(2, op="avg")]),
    ]
    return [json.loads(json.dumps(serialize_layer(m))) for m in models]


SEEDS = _seeds()
CLASS_NAMES = sorted(layer_classes())
EDGE_VALUES = st.sampled_from([None, True, False, 0, -1, 1, 2**31, 10**40, 1e308, -0.0, float("inf"), 0.5, "",
                               "relu", "max", "concat", "A", "Affine_0", "x" * 300, "\u0000", [], {}, [[]],
                               [3, 3, 8], {"class_name": "Affine", "config": {}}, *CLASS_NAMES])
JSON_VALUES = st.recursive(
    EDGE_VALUES | st.integers() | st.floats(allow_nan=False) | st.text(max_size=8),
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.text(max_size=8) | EDGE_VALUES.filter(
        lambda v: isinstance(v, str)), inner, max_size=4),
    max_leaves=12).map(copy.deepcopy)  # a fresh copy: mutations must not edit the strategy's constants


def check_contract(data: Any) -> str:
    """Decode ``data`` once: ``"ok"`` (a layer that serializes again) or ``"typed"``; fail on anything else."""
    start = time.perf_counter()
    try:
        layer = deserialize_layer(data)
        assert isinstance(layer, Layer), type(layer)
        assert isinstance(serialize_layer(layer), dict)
        outcome = "ok"
    except ng.NgraphError as exc:
        assert "expected" in str(exc), exc
        outcome = "typed"
    assert time.perf_counter() - start < HANG_SECONDS, repr(data)[:300]
    return outcome


def mutate(doc: Any, draw: st.DrawFn) -> Any:
    """One mutation of a layer config (nesting wraps nodes in Sequential configs)."""
    return mutate_json(doc, draw, JSON_VALUES, ["name", "layers", "branches", "config"],
                       lambda n: {"class_name": "Sequential", "config": {"layers": [n]}}, depths=(1, 8, 120),
                       deeper=4)


@st.composite
def mutants(draw: st.DrawFn) -> Any:
    doc = copy.deepcopy(draw(st.sampled_from(SEEDS)))
    for _ in range(draw(st.integers(1, 3))):
        doc = mutate(doc, draw)
    return doc


@pytest.mark.fuzz
@fuzz_settings(250)
@given(data=mutants())
def test_mutated_configs_end_in_a_layer_or_a_typed_error(data: Any) -> None:
    check_contract(data)


@pytest.mark.fuzz
@fuzz_settings(100)
@given(data=JSON_VALUES | st.fixed_dictionaries({"class_name": st.sampled_from(CLASS_NAMES), "config": JSON_VALUES}))
def test_any_json_ends_in_a_layer_or_a_typed_error(data: Any) -> None:
    check_contract(data)


def test_every_seed_round_trips() -> None:
    assert all(check_contract(seed) == "ok" for seed in SEEDS)


def test_hostile_structures_are_refused_without_recursion() -> None:
    deep: Any = {"class_name": "Affine", "config": {"nout": 3}}
    for _ in range(5_000):
        deep = {"class_name": "Sequential", "config": {"layers": [deep]}}
    with pytest.raises(LayerError, match="nesting at most 100 deep"):
        deserialize_layer(deep)
    cycle: dict = {"class_name": "Sequential", "config": {"layers": []}}
    cycle["config"]["layers"].append(cycle)
    with pytest.raises(LayerError, match="refers to itself"):
        deserialize_layer(cycle)
    wide = {"class_name": "Sequential", "config": {"layers": [[0] * 1000] * 1001}}
    with pytest.raises(LayerError, match="at most 1000000 values"):
        deserialize_layer(wide)


@pytest.mark.parametrize(("data", "message"), [
    ({"class_name": ["Affine"], "config": {}}, "expected {'class_name': str"),
    ({"class_name": "Affine", "config": {"nout": 3, "name": ["x"]}}, "whose name is a string or null"),
    ({"class_name": "Sequential", "config": {"layers": {"a": 1}}}, "'layers' as a list of layer configs"),
    ({"class_name": "Sequential", "config": {"layers": [], "extra": 1}}, "keys among"),
    ({"class_name": "MergeSum", "config": {"branches": [{}]}}, "a list of branches"),
    ({"class_name": "Tree", "config": {"name": "t"}}, "a dict with 'branches'"),
])
def test_malformed_container_configs_say_what_was_expected(data: dict, message: str) -> None:
    with pytest.raises(LayerError, match=message):
        deserialize_layer(data)


def test_arguments_are_checked() -> None:
    good = SEEDS[0]
    with pytest.raises(LayerError, match="custom_objects as"):
        deserialize_layer(good, custom_objects=["Affine"])  # type: ignore[arg-type]
    with pytest.raises(LayerError, match="memo as a dict"):
        deserialize_layer(good, memo=[])  # type: ignore[arg-type]


@pytest.mark.parametrize("path", corpus("layer_config"), ids=lambda p: p.name)
def test_saved_inputs_that_once_broke_the_decoder(path: Path) -> None:
    assert check_contract(json.loads(path.read_text(encoding="utf-8"))) == "typed"


# -- size fields through load_model: a correct load or a typed error, in bounded memory -----------------------
SIZE_FIELDS = ("nout", "fshape", "strides", "padding", "dilation", "vocab_size", "embedding_dim", "shape", "groups")
SIZE_VALUES = st.sampled_from([0, -1, 1, 2, 3, 4, 5, 7, 8, 20, 2**20, 2**24, 2**30, 2**31, 2**31 + 1, 2**32,
                               2**62, 10**30, [3, 3, 2**30], [2**31, 1], [[0, 2**40]], [1, 1], "same", 1.5, None,
                               True, [], {}]) | st.integers(-5, 40) | st.integers(0, 2**70)
SIZE_MEMORY_BOUND = 64 << 20  # traced by tracemalloc over one load_model: the seeds' weights are a few KiB


@functools.lru_cache(maxsize=1)
def saved_models() -> list[tuple[CheckpointData, dict[str, np.ndarray]]]:
    """Two real checkpoints (a CNN, a token LSTM), read back: their data and weights."""
    seeds = [(Model([Conv((3, 3, 4), padding=1, activation="relu"), Pool(2), BatchNorm(), Flatten(),
                     Unflatten((4, 4, 4)), Affine(5, activation="softmax")]), (1, 8, 8), "dense"),
             (Model([LookupTable(20, 8), LSTM(6, return_sequence=True), RecurrentSum(), Affine(2)]), (7,), "tokens")]
    out = []
    with tempfile.TemporaryDirectory() as folder:
        for k, (model, shape, kind) in enumerate(seeds):
            model.build(shape, kind=kind)
            model.save_params(Path(folder) / f"seed{k}.h5")
            data = read_checkpoint(Path(folder) / f"seed{k}.h5")
            out.append((data, dict(data.params)))
    return out


def size_slots(node: Any) -> list[tuple[dict, str]]:
    """Every (layer config, size field) in a layer config tree, present fields and absent ones."""
    slots, stack = [], [node]
    while stack:
        item = stack.pop()
        if isinstance(item, list):
            stack.extend(item)
        elif isinstance(item, dict):
            stack.extend(item.values())
            if isinstance(item.get("class_name"), str) and isinstance(item.get("config"), dict) and \
                    item["class_name"] in CLASS_NAMES:
                slots += [(item["config"], field) for field in SIZE_FIELDS]
    return slots


@pytest.mark.fuzz
@fuzz_settings(30)
@given(data=st.data())
def test_mutated_size_fields_through_load_model_load_or_raise_typed_errors(data: st.DataObject) -> None:
    saved, weights = data.draw(st.sampled_from(saved_models()))
    saved = copy.deepcopy(saved)
    for _ in range(data.draw(st.integers(1, 2))):
        config, field = data.draw(st.sampled_from(size_slots(saved.model[0])))
        config[field] = data.draw(SIZE_VALUES)
    with tempfile.TemporaryDirectory() as folder:
        path = Path(folder) / "mutant.h5"
        write_checkpoint(path, saved)
        start = time.perf_counter()
        tracemalloc.start()
        try:
            model = load_model(path)
            for key, var in model.checkpoint_keys()[0].items():  # a load is correct: the stored weights, all of them
                np.testing.assert_array_equal(model.transformer.read_variable(var), weights[key])
            assert set(model.checkpoint_keys()[0]) == set(weights)
        except ng.NgraphError as exc:
            assert "expected" in str(exc) and "hint:" in str(exc), exc
        finally:
            peak = tracemalloc.get_traced_memory()[1]
            tracemalloc.stop()
    assert time.perf_counter() - start < HANG_SECONDS, short_repr(saved.model)
    assert peak < SIZE_MEMORY_BOUND, (peak, short_repr(saved.model))
