"""The memory budget (``ngraph_core/memory_budget.py``): parsing, and the transformer's checks at compile and run time.

The decoder's and the ONNX importer's checks are tested with them (``test_serialize.py``,
``frontends/onnx/test_loader.py``); here: ``NG_MAX_BYTES`` and ``max_bytes``, a computation with a tensor over
the budget refused before anything is allocated, the arena against the machine's memory, and a raw
``MemoryError`` (an allocation the machine or a ulimit refused) turned into ``MemoryBudgetError``.
"""

from __future__ import annotations

import tracemalloc

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core import memory_budget
from ngraph_core.errors import MemoryBudgetError, NgraphError
from ngraph_core.memory_budget import DEFAULT_MAX_BYTES, format_bytes, parse_bytes, resolve_max_bytes, tensor_bytes
from ngraph_core.transformers import make_transformer


@pytest.mark.parametrize("text, value", [("1073741824", 1 << 30), ("512MiB", 512 << 20), ("4g", 4 << 30),
                                         (" 2 GB ", 2 << 30), ("64k", 64 << 10), ("1TiB", 1 << 40)])
def test_parse_bytes(text: str, value: int) -> None:
    assert parse_bytes(text) == value


@pytest.mark.parametrize("text", ["", "0", "-1", "1.5GiB", "lots", "4 PiB"])
def test_malformed_byte_counts_name_the_variable(text: str) -> None:
    with pytest.raises(NgraphError, match=rf"NG_MAX_BYTES: expected a positive byte count such as 1073741824 or "
                                          rf"4GiB, received {text!r}; hint: unset NG_MAX_BYTES"):
        parse_bytes(text)


def test_the_budget_is_the_keyword_else_the_environment_else_1_gib(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("NG_MAX_BYTES", raising=False)
    assert resolve_max_bytes() == DEFAULT_MAX_BYTES == 1 << 30
    monkeypatch.setenv("NG_MAX_BYTES", "2GiB")
    assert resolve_max_bytes() == 2 << 30 and resolve_max_bytes(5) == 5
    for bad in (0, -3, 1.5, True, "1GiB"):
        with pytest.raises(NgraphError, match="expected a positive int number of bytes"):
            resolve_max_bytes(bad)


def test_tensor_bytes_and_format_bytes() -> None:
    assert tensor_bytes((2**40,), "float32") == 4 << 40 and tensor_bytes((), "int8") == 1
    assert tensor_bytes((2**62, 0), "float32") == 2**64  # an empty axis counts as 1: NumPy could not make it
    assert [format_bytes(n) for n in (0, 1023, 1024, 3 << 29, 1 << 60, 2**64 * 2**40)] == [
        "0 B", "1023 B", "1.0 KiB", "1.5 GiB", "1.0 EiB", "2e+31 B"]


def test_a_tensor_over_the_budget_is_refused_at_compile_before_allocating() -> None:
    A, B = ng.make_axis(2**40, "A"), ng.make_axis(2**20, "B")
    v = ng.variable([A], 0.0, name="v")
    x = ng.placeholder([ng.make_axis(1, "O")], name="x")
    wide = ng.broadcast(x, [ng.make_axis(1, "O"), B]) * 2.0  # 4 MiB
    tracemalloc.start()
    with make_transformer() as t:
        with pytest.raises(MemoryBudgetError, match=r"numpy transformer: variable 'v': expected at most 1\.0 GiB "
                                                    r"\(max_bytes=1,073,741,824\), received 4\.0 TiB "
                                                    r"\(4,398,046,511,104 bytes, shape \(1099511627776,\) of "
                                                    r"float32\); hint: .*make_transformer\(max_bytes=\.\.\.\)"):
            t.computation(v + 1.0)
        with pytest.raises(MemoryBudgetError):
            t.read_variable(v)  # the variable's storage is checked too
    assert tracemalloc.get_traced_memory()[1] < 16 << 20
    tracemalloc.stop()
    with make_transformer(max_bytes=1 << 20) as t:
        with pytest.raises(MemoryBudgetError, match=r"expected at most 1\.0 MiB \(max_bytes=1,048,576\), received "
                                                    r"4\.0 MiB"):
            t.computation(wide, x)
    with make_transformer(max_bytes=8 << 20) as t:
        assert t.computation(wide, x)(np.ones(1, "float32")).shape == (1, 2**20)


def test_the_transformer_budget_reads_ng_max_bytes(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("NG_MAX_BYTES", "1KiB")
    x = ng.placeholder([ng.make_axis(1024, "K")], name="x")
    with make_transformer() as t, pytest.raises(MemoryBudgetError, match=r"max_bytes=1,024\)"):
        t.computation(x * 2.0, x)


def test_the_arena_and_new_variables_may_not_exceed_the_machine(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(memory_budget, "physical_memory", lambda: 1 << 20)
    monkeypatch.setattr("ngraph_core.transformers.base.physical_memory", lambda: 1 << 20)
    vs = [ng.variable([ng.make_axis(1 << 16, "K")], float(i), name=f"v{i}") for i in range(8)]  # 8 x 256 KiB
    step = ng.doall([ng.assign(v, v + 1.0) for v in vs])
    with make_transformer(max_bytes=1 << 19) as t, pytest.raises(
            MemoryBudgetError, match=r"the computation's arena and new variables: expected at most 1\.0 MiB \(the "
                                     r"machine's memory, or max_bytes if larger\), received 2\.\d MiB"):
        t.computation(step)
    with make_transformer() as t:  # a budget over the machine's memory is the user's word: max_bytes wins
        t.computation(step)()


def test_an_allocation_the_machine_refuses_is_a_memory_budget_error() -> None:
    x = ng.placeholder([ng.make_axis(4, "K")], name="x")
    with make_transformer() as t:
        f = t.computation(x * 2.0, x)

        def refuse(*values):
            raise MemoryError("Unable to allocate 2.00 GiB")

        f._fn = refuse
        with pytest.raises(MemoryBudgetError, match=r"computation: out of memory while running \(Unable to allocate "
                                                    r"2\.00 GiB\); hint: a smaller batch"):
            f(np.ones(4, "float32"))
    assert issubclass(MemoryBudgetError, MemoryError)  # callers that catch MemoryError still do
