"""Decomposition: rewrite ops a backend has no kernel for into ops it has.

``DECOMPOSE`` holds one rule per decomposable op; ``make_decompose(supported)``
gives the pass for one backend, which applies only the rules for ops *not* in
``supported``. A decomposition may use ops that are decomposed in turn (``tanh``
uses ``sub``, which a backend without ``sub`` gets as ``add`` and ``mul``); the
rules form no cycle, and they bottom out in ``add``, ``mul``, ``div``, ``exp``,
``log``, ``sqrt`` and ``maximum``. An op with no rule stays as it is: the
transformer then reports the missing kernel by name.

Accuracy: ``log1p(x) -> log(1 + x)`` loses the small-``x`` precision ``log1p`` exists
for, and ``tanh(x) -> 1 - 2/(exp(2x)+1)`` is accurate to one ulp *of 1* (not of
``tanh(x)``) near 0. Both ``sigmoid`` and ``tanh`` saturate correctly (``exp`` may
overflow to ``inf``, and ``1/inf`` is the right limit).
"""

from __future__ import annotations

from collections.abc import Callable

from .. import api
from ..ir import Op, OpType, make
from ..ir.dtypes import FLOAT_DTYPES
from ..pattern import Pat, PatternMatcher, graph_rewrite, pat, type_preserving

T = OpType
SIGNED_DTYPES = FLOAT_DTYPES + ("int8", "int16", "int32", "int64")  # where x*-1 is -x
x, fx, sx = Pat.var("x"), Pat.var("x", dtype=FLOAT_DTYPES), Pat.var("x", dtype=SIGNED_DTYPES)


def _neg(x: Op) -> Op:
    return x * -1


RULES = [
    (pat(T.RSQRT, fx), lambda x: make(T.RECIPROCAL, [make(T.SQRT, [x])])),  # rsqrt(x) -> reciprocal(sqrt(x))
    (pat(T.RECIPROCAL, fx), lambda x: 1 / x),  # reciprocal(x) -> 1/x
    (pat(T.SQUARE, x), lambda x: x * x),  # square(x) -> x*x
    (pat(T.SIGMOID, fx), lambda x: 1 / (1 + make(T.EXP, [make(T.NEG, [x])]))),  # sigmoid(x) -> 1/(1+exp(-x))
    (pat(T.TANH, fx), lambda x: 1 - 2 / (make(T.EXP, [2 * x]) + 1)),  # tanh(x) -> 1 - 2/(exp(2x)+1)
    (pat(T.LOG1P, fx), lambda x: make(T.LOG, [1 + x])),  # log1p(x) -> log(1+x)
    (pat(T.RELU, x), lambda x: make(T.MAXIMUM, [x, api.fill_like(x, 0)])),  # relu(x) -> maximum(x, 0)
    (pat(T.ABS, sx), lambda x: make(T.MAXIMUM, [x, make(T.NEG, [x])])),  # abs(x) -> maximum(x, -x)
    (pat(T.NEG, sx), _neg),  # -x -> x*-1
    (pat(T.SUB, Pat.var("a"), Pat.var("b", dtype=SIGNED_DTYPES)), lambda a, b: a + _neg(b)),  # a-b -> a + b*-1
]

DECOMPOSE = PatternMatcher(type_preserving(RULES))


def make_decompose(supported: frozenset[OpType]) -> Callable[[list[Op]], list[Op]]:
    """The decomposition pass for a backend with kernels for ``supported``.

    Example:
        >>> cpu_pass = make_decompose(frozenset(OpType) - {OpType.RSQRT})
        >>> (y,) = cpu_pass([ng.rsqrt(x)])  # reciprocal(sqrt(x))
    """
    rules = PatternMatcher([rule for rule in DECOMPOSE.rules if not rule[0].ops <= supported])

    def decompose_unsupported(roots: list[Op]) -> list[Op]:
        return graph_rewrite(roots, rules, name="decompose") if len(rules) else list(roots)

    return decompose_unsupported


def decompose(roots: list[Op], supported: frozenset[OpType]) -> list[Op]:
    """The graph below ``roots`` with every op outside ``supported`` that has a rule decomposed.

    Args:
        roots: the results of a computation.
        supported: the op types the backend has kernels for.

    Returns:
        the roots, computing the same values with supported ops where a rule exists.

    Example:
        >>> (y,) = decompose([ng.square(x)], frozenset(OpType) - {OpType.SQUARE})  # x*x
    """
    return make_decompose(supported)(roots)
