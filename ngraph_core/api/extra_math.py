"""More element-wise math: rounding, ``erf``, inverse and hyperbolic trigonometry, ``mod``, tests,
logic and bit ops (the ONNX operator set's element-wise ops beyond ``math.py``).

Binary operands are aligned by axis name exactly as ``ng.add`` aligns them. The float ops take
float inputs; ``isnan``/``isinf`` give bool; the logical ops take and give bool; the bit ops
take integers. Gradients: ``erf``, the trigonometric ones and ``mod`` have rules;
``floor``/``ceil``/``round`` have a zero gradient (like ``sign``); tests, logic and bit ops
give none.

Example:
    >>> y = ng.floor(ng.erf(x) * 3.0)  # one fused kernel on the NumPy transformer
"""

from __future__ import annotations

from typing import Any

from ..errors import DTypeError
from ..ir import Op, OpType, is_float, make
from ..ir.logical import InfFlags
from .math import align
from .tensors import as_op


def _float_unary(kind: OpType, x: Any) -> Op:
    x = as_op(x, where=kind.value)
    if not is_float(x.dtype):
        raise DTypeError(f"{kind.value}: expected a float input, received {x.dtype}; hint: ng.cast(x, 'float32') first")
    return make(kind, [x])


def _binary(kind: OpType, a: Any, b: Any, arg: Any = None) -> Op:
    like = next((v for v in (a, b) if isinstance(v, Op)), None)
    return make(kind, align([as_op(v, like, kind.value) for v in (a, b)], kind.value), arg=arg)


def floor(x: Any) -> Op:
    """The largest integer <= x, element-wise (float in, float out; zero gradient)."""
    return _float_unary(OpType.FLOOR, x)


def ceil(x: Any) -> Op:
    """The smallest integer >= x, element-wise (zero gradient)."""
    return _float_unary(OpType.CEIL, x)


def round(x: Any) -> Op:  # noqa: A001 - ONNX/NumPy name
    """x rounded to the nearest integer, halves to even (``round(2.5) = 2``, ONNX Round); zero gradient."""
    return _float_unary(OpType.ROUND, x)


def erf(x: Any) -> Op:
    """The error function ``2/sqrt(pi) * integral_0^x exp(-t^2) dt``, element-wise (about 1e-16 accurate)."""
    return _float_unary(OpType.ERF, x)


def tan(x: Any) -> Op:
    """Tangent element-wise."""
    return _float_unary(OpType.TAN, x)


def asin(x: Any) -> Op:
    """Arcsine element-wise (NaN outside [-1, 1])."""
    return _float_unary(OpType.ASIN, x)


def acos(x: Any) -> Op:
    """Arccosine element-wise (NaN outside [-1, 1])."""
    return _float_unary(OpType.ACOS, x)


def atan(x: Any) -> Op:
    """Arctangent element-wise."""
    return _float_unary(OpType.ATAN, x)


def sinh(x: Any) -> Op:
    """Hyperbolic sine element-wise."""
    return _float_unary(OpType.SINH, x)


def cosh(x: Any) -> Op:
    """Hyperbolic cosine element-wise."""
    return _float_unary(OpType.COSH, x)


def asinh(x: Any) -> Op:
    """Inverse hyperbolic sine element-wise."""
    return _float_unary(OpType.ASINH, x)


def acosh(x: Any) -> Op:
    """Inverse hyperbolic cosine element-wise (NaN below 1)."""
    return _float_unary(OpType.ACOSH, x)


def atanh(x: Any) -> Op:
    """Inverse hyperbolic tangent element-wise (+-inf at +-1, NaN beyond)."""
    return _float_unary(OpType.ATANH, x)


def isnan(x: Any) -> Op:
    """True where x is NaN (bool, x's axes).

    Raises:
        DTypeError: x is not float.

    Example:
        >>> clean = ng.where(ng.isnan(x), 0.0, x)
    """
    return make(OpType.ISNAN, [as_op(x, where="isnan")])


def isinf(x: Any, detect_positive: bool = True, detect_negative: bool = True) -> Op:
    """True where x is an infinity the flags count (ONNX IsInf).

    Args:
        x: a float op.
        detect_positive: ``+inf`` gives True.
        detect_negative: ``-inf`` gives True.

    Returns:
        A bool op with x's axes (all False when both flags are False).

    Raises:
        DTypeError: x is not float.

    Example:
        >>> overflow = ng.isinf(x, detect_negative=False)
    """
    flags = InfFlags(bool(detect_positive), bool(detect_negative))
    return make(OpType.ISINF, [as_op(x, where="isinf")], arg=flags)


def mod(a: Any, b: Any, fmod: bool = False) -> Op:
    """The remainder of ``a / b`` element-wise, operands aligned by axis name (ONNX Mod).

    Args:
        a: the dividend (an op or a number).
        b: the divisor.
        fmod: False: the remainder has the divisor's sign (Python ``%``, ``floor`` division;
            ONNX ``fmod=0``); True: the dividend's sign (C ``fmod``, truncating division).

    Returns:
        An op of the promoted dtype. Its gradient is ``1`` for ``a`` and ``-floor(a/b)``
        (``-trunc(a/b)`` with ``fmod``) for ``b``. An integer remainder by 0 gives 0.

    Raises:
        AxesError: the operands' axes cannot be aligned.

    Example:
        >>> ng.mod(x, -3)  # -5 % -3 = -2, 5 % -3 = -1; fmod=True: -5 -> -2, 5 -> 2
    """
    return _binary(OpType.FMOD if fmod else OpType.MOD, a, b)


def logical_not(x: Any) -> Op:
    """``not x`` element-wise on a bool op (raises ``DTypeError`` otherwise: compare first, ``x != 0``)."""
    return make(OpType.LOGICAL_NOT, [as_op(x, where="logical_not")])


def logical_and(a: Any, b: Any) -> Op:
    """``a and b`` element-wise on bool operands aligned by axis name."""
    return _binary(OpType.LOGICAL_AND, a, b)


def logical_or(a: Any, b: Any) -> Op:
    """``a or b`` element-wise on bool operands aligned by axis name."""
    return _binary(OpType.LOGICAL_OR, a, b)


def logical_xor(a: Any, b: Any) -> Op:
    """``a != b`` element-wise on bool operands aligned by axis name."""
    return _binary(OpType.LOGICAL_XOR, a, b)


def bitwise_not(x: Any) -> Op:
    """``~x`` element-wise on an integer op (two's complement: ``~5 = -6``, uint8 ``~5 = 250``)."""
    return make(OpType.BITWISE_NOT, [as_op(x, where="bitwise_not")])


def bitwise_and(a: Any, b: Any) -> Op:
    """``a & b`` element-wise on integer operands aligned by axis name."""
    return _binary(OpType.BITWISE_AND, a, b)


def bitwise_or(a: Any, b: Any) -> Op:
    """``a | b`` element-wise on integer operands aligned by axis name."""
    return _binary(OpType.BITWISE_OR, a, b)


def bitwise_xor(a: Any, b: Any) -> Op:
    """``a ^ b`` element-wise on integer operands aligned by axis name."""
    return _binary(OpType.BITWISE_XOR, a, b)


def bit_shift(a: Any, b: Any, direction: str = "left") -> Op:
    """``a << b`` or ``a >> b`` element-wise on integers aligned by axis name (ONNX BitShift).

    Args:
        a: the integers to shift (ONNX takes unsigned ones; a signed right shift keeps the sign).
        b: the shift amounts (non-negative, below the bit width).
        direction: ``"left"`` or ``"right"``.

    Returns:
        An op of the wider integer dtype.

    Raises:
        DTypeError: an operand is not an integer.
        AxesError: the direction is neither ``"left"`` nor ``"right"``, or the axes cannot be aligned.

    Example:
        >>> ng.bit_shift(x, 2, direction="right")  # uint8 16 -> 4
    """
    return _binary(OpType.BIT_SHIFT, a, b, arg=direction)
