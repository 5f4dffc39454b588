"""Every ``OpType`` has a row in ``ngraph_core/catalog.py``, and every cell agrees with the table implementing it.

Adding an op: ``.venv/bin/python -m pytest -q tests/ngraph_core/test_catalog.py -k myop`` lists what is missing,
each failure naming the capability, the file to edit and the entry to add (docs/architecture.md, "How to add an
op"). ``test_tables.py`` checks the tables themselves (every op has inference, a kernel, an arg class, a test).
"""

from __future__ import annotations

import pytest

from ngraph_core import OpType, catalog
from ngraph_core.errors import NgraphError
from ngraph_core.ir.ops import OP_BY_NAME

ALL = list(OpType)


@pytest.mark.parametrize("capability", catalog.NAMES)
@pytest.mark.parametrize("op", ALL, ids=lambda t: t.value)
def test_cell_agrees_with_its_table(op: OpType, capability: str) -> None:
    if capability.startswith("onnx"):
        pytest.importorskip("onnx", reason="the ONNX frontend's tables need onnx")
    problem = catalog.check(op, capability)
    assert problem is None, problem


def test_rows_name_only_op_types_once() -> None:
    names = [line.split()[0] for line in catalog.ROWS.strip().splitlines()[1:]]
    unknown = [n for n in names if n not in OP_BY_NAME]
    assert not unknown, f"ROWS in ngraph_core/catalog.py names ops that are not OpType values: {unknown}"
    twice = sorted({n for n in names if names.count(n) > 1})
    assert not twice, f"ROWS in ngraph_core/catalog.py has two rows for {twice}; hint: keep one"


def test_every_reason_names_ops_lacking_the_capability() -> None:
    for capability, reasons in catalog.WHY_NOT.items():
        assert capability in catalog.NAMES, f"WHY_NOT has reasons for {capability!r}, not a capability"
        for ops, why in reasons.items():
            assert why.strip(), f"WHY_NOT[{capability!r}][{ops!r}] is empty"
            for name in ops.split():
                assert name in OP_BY_NAME, f"WHY_NOT[{capability!r}] names {name!r}, not an op"
                assert catalog.capabilities(name)[capability] == "-", (
                    f"WHY_NOT[{capability!r}] says why {name} lacks it, but its row says it has it; hint: drop "
                    "the reason")


def test_a_missing_row_or_cell_is_reported_with_the_line_to_add(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("onnx")
    rows = {k: v for k, v in catalog._ROWS.items() if k != "tanh"}
    monkeypatch.setattr(catalog, "_ROWS", rows)
    problem = catalog.check(OpType.TANH, "gradient")
    assert "received none" in problem and "`tanh  yes  yes  yes  yes  yes  yes  Tanh  yes`" in problem
    monkeypatch.setattr(catalog, "_ROWS", {**rows, "tanh": ["yes", "yes", "yes"]})
    assert "expected a row of 8 cells for tanh, received 3" in catalog.check(OpType.TANH, "kernel")
    with pytest.raises(NgraphError, match="received 3"):
        catalog.capabilities("tanh")


def test_a_disagreeing_cell_names_the_file_and_the_entry(monkeypatch: pytest.MonkeyPatch) -> None:
    cells = catalog._ROWS["floor"]
    numba = catalog.NAMES.index("numba")
    monkeypatch.setitem(catalog._ROWS, "floor", [*cells[:numba], "yes", *cells[numba + 1:]])
    monkeypatch.setitem(catalog.WHY_NOT, "numba", {})
    problem = catalog.check("floor", "numba")
    assert "ngraph_core/transformers/numpy/numba_kernels.py lacks it" in problem
    assert 'OpType.FLOOR: "<numba expression' in problem
    monkeypatch.setitem(catalog._ROWS, "tanh", [*cells[:numba], "-", *cells[numba + 1:]])
    assert "say why not in WHY_NOT['numba']" in catalog.check("tanh", "numba")
    monkeypatch.setitem(catalog.WHY_NOT, "numba", {"tanh": "a reason"})
    assert "write yes in tanh's numba cell" in catalog.check("tanh", "numba")


def test_onnx_import_names_are_registered_converters(monkeypatch: pytest.MonkeyPatch) -> None:
    pytest.importorskip("onnx")
    column = catalog.NAMES.index("onnx_import")
    cells = catalog._ROWS["tanh"]
    monkeypatch.setitem(catalog._ROWS, "tanh", [*cells[:column], "Tanh,Tahn", *cells[column + 1:]])
    assert "['Tahn'], which the ONNX importer has no converter for" in catalog.check("tanh", "onnx_import")
    monkeypatch.setitem(catalog._ROWS, "tanh", [*cells[:column], "-", *cells[column + 1:]])
    monkeypatch.setitem(catalog.WHY_NOT, "onnx_import", {"tanh": "a reason"})
    assert "converts 'Tanh', which no row lists" in catalog.check("tanh", "onnx_import")


def test_capabilities_and_the_table() -> None:
    assert catalog.capabilities(OpType.PLACEHOLDER)["kernel"] == "bound"
    assert catalog.capabilities("where")["onnx_import"] == "Where"
    with pytest.raises(NgraphError, match="expected an OpType or an op name such as 'tanh', received 'tahn'"):
        catalog.capabilities("tahn")
    text = catalog.table()
    for op in ALL:
        assert f"| `{op.value}` |" in text
    assert "### Why not" in text and "(no reason given)" not in text
