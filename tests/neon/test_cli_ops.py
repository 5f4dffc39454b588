"""``ngraph ops``: the op catalog's rows, and why an op lacks a capability."""

from __future__ import annotations

import pytest

from neon.cli.ngraph_main import main
from neon.cli.op_catalog import op_rows
from ngraph_core import OpType, catalog


def test_every_op_has_a_row_under_the_header() -> None:
    lines = op_rows([])
    assert lines[0].split() == ["op", *catalog.NAMES]
    assert [line.split()[0] for line in lines[1:]] == [op.value for op in OpType]


def test_a_named_op_says_why_it_lacks_a_capability(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ops", "floor"]) == 0
    out = capsys.readouterr().out.splitlines()
    assert out[1].split()[:4] == ["floor", "yes", "yes", "-"]
    assert "  floor has no gradient: piecewise constant: the gradient is zero almost everywhere" in out


def test_an_unknown_name_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert main(["ops", "tahn"]) == 2
    assert "received 'tahn'" in capsys.readouterr().err
