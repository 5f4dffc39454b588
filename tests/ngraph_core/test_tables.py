"""Every ``OpType`` has an entry in every table keyed by ``OpType``, and a test in ``test_ops.py``."""

from __future__ import annotations

import pytest
import test_ops

from ngraph_core import OpGroup, OpType
from ngraph_core.autodiff import RULES
from ngraph_core.ir.infer import ARITY, INFER
from ngraph_core.transformers.kernels import BOUND_BY_EXECUTOR, KERNELS

ALL = list(OpType)
KINDS = ("LEAF", "RANDOM", "ELEMENTWISE", "REDUCE", "MOVEMENT", "CONTRACTION", "NN", "CONTROL", "COMPILED")


@pytest.mark.parametrize("op", ALL, ids=lambda t: t.value)
def test_inference_rule(op: OpType) -> None:
    assert op in INFER, f"{op.value}: no axes/dtype rule; hint: add one to ngraph_core/ir/infer.py INFER"
    assert op in ARITY, f"{op.value}: no arity; hint: add one to ngraph_core/ir/infer.py ARITY"


@pytest.mark.parametrize("op", ALL, ids=lambda t: t.value)
def test_kernel(op: OpType) -> None:
    if op in BOUND_BY_EXECUTOR:
        assert op in OpGroup.LEAF, f"{op.value}: only leaves may be bound by the executor"
        return
    assert op in KERNELS, f"{op.value}: no kernel; hint: add one in ngraph_core/transformers/kernels/"


@pytest.mark.parametrize("op", ALL, ids=lambda t: t.value)
def test_gradient_rule(op: OpType) -> None:
    if op in OpGroup.NON_DIFFERENTIABLE:
        # autodiff never calls a rule for these: one would be dead code that looks trusted
        assert op not in RULES, f"{op.value} is non-differentiable but has a gradient rule"
    else:
        assert op in RULES, (
            f"{op.value}: no gradient rule; hint: add one to ngraph_core/autodiff/rules.py, "
            "or put it in OpGroup.NON_DIFFERENTIABLE"
        )


@pytest.mark.parametrize("op", ALL, ids=lambda t: t.value)
def test_in_one_kind_group(op: OpType) -> None:
    kinds = [k for k in KINDS if op in getattr(OpGroup, k, ())]
    assert len(kinds) == 1, f"{op.value} is in kind groups {kinds}; expected exactly one of {KINDS}"


@pytest.mark.parametrize("op", ALL, ids=lambda t: t.value)
def test_op_is_tested(op: OpType) -> None:
    names = test_ops.COVERAGE.get(op)
    assert names, f"{op.value}: no case in tests/ngraph_core/test_ops.py CASES (nor a dedicated test)"
    for name in names:
        base = name.split("[")[0]
        assert callable(getattr(test_ops, base, None)), f"{op.value}: test_ops has no test {base!r}"


def test_case_ids_unique() -> None:
    ids = [c.id for c in test_ops.CASES]
    assert len(ids) == len(set(ids)), sorted(i for i in ids if ids.count(i) > 1)


def test_tables_hold_only_op_types() -> None:
    for name, table in (("INFER", INFER), ("KERNELS", KERNELS), ("RULES", RULES), ("ARITY", ARITY)):
        extra = [k for k in table if not isinstance(k, OpType)]
        assert not extra, f"{name} has keys that are not OpType members: {extra}"
