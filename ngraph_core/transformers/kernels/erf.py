"""The error function ``erf`` on whole arrays, written against ``xp`` (NumPy has no ``erf``).

W. J. Cody's rational Chebyshev approximations (Math. Comp. 23, 1969; the ``CALERF``
routine of netlib's SPECFUN), the algorithm behind most libm ``erf``s, accurate to about
1e-16 relative in float64 (the tests bound the error against ``math.erf`` by 1e-15 absolute
on [-6, 6]). Three ranges of ``y = |x|``:

* ``y <= 0.46875``: ``erf(x) = x * P(y^2) / Q(y^2)``;
* ``0.46875 < y <= 4``: ``erfc(y) = exp(-y^2) * P(y) / Q(y)``;
* ``y > 4``: ``erfc(y) = exp(-y^2) / y * (1/sqrt(pi) + R(1/y^2) / (y^2 S(1/y^2)))``;

then ``erf(x) = sign(x) (1 - erfc(y))``. ``exp(-y^2)`` is taken as ``exp(-z^2) exp(-(y-z)(y+z))``
with ``z`` = y rounded down to a multiple of 1/16, which keeps the relative error of the
exponent small for large y. Each range is evaluated over the whole array (a few dozen passes,
no branches, so CuPy runs the same code), and ``where`` picks per element. NaN stays NaN,
``erf(+-inf) = +-1``. Float32 inputs are computed in float32.
"""

from __future__ import annotations

from typing import Any

SMALL = 0.46875
MIDDLE_END = 4.0
LARGE_END = 10.0  # erfc(10) = 2e-45: erf is exactly 1 in float64 beyond, so larger y are capped here
INV_SQRT_PI = 5.6418958354775628695e-1

_A = (3.16112374387056560e00, 1.13864154151050156e02, 3.77485237685302021e02, 3.20937758913846947e03,
      1.85777706184603153e-1)
_B = (2.36012909523441209e01, 2.44024637934444173e02, 1.28261652607737228e03, 2.84423683343917062e03)
_C = (5.64188496988670089e-1, 8.88314979438837594e00, 6.61191906371416295e01, 2.98635138197400131e02,
      8.81952221241769090e02, 1.71204761263407058e03, 2.05107837782607147e03, 1.23033935479799725e03,
      2.15311535474403846e-8)
_D = (1.57449261107098347e01, 1.17693950891312499e02, 5.37181101862009858e02, 1.62138957456669019e03,
      3.29079923573345963e03, 4.36261909014324716e03, 3.43936767414372164e03, 1.23033935480374942e03)
_P = (3.05326634961232344e-1, 3.60344899949804439e-1, 1.25781726111229246e-1, 1.60837851487422766e-2,
      6.58749161529837803e-4, 1.63153871373020978e-2)
_Q = (2.56852019228982242e00, 1.87295284992346725e00, 5.27905102951428412e-1, 6.05183413124413191e-2,
      2.33520497626869185e-3)


def _exp_minus_square(xp: Any, y: Any) -> Any:
    """``exp(-y*y)`` with the square split at a multiple of 1/16 (Cody's trick for large y)."""
    z = xp.trunc(y * 16.0) / 16.0
    return xp.exp(-z * z) * xp.exp(-(y - z) * (y + z))


def _small(xp: Any, x: Any) -> Any:
    """erf(x) for |x| <= 0.46875: x P(x^2) / Q(x^2)."""
    t = x * x
    num, den = _A[4] * t, t
    for i in range(3):
        num, den = (num + _A[i]) * t, (den + _B[i]) * t
    return x * (num + _A[3]) / (den + _B[3])


def _middle(xp: Any, y: Any) -> Any:
    """erfc(y) for 0.46875 <= y <= 4."""
    num, den = _C[8] * y, y
    for i in range(7):
        num, den = (num + _C[i]) * y, (den + _D[i]) * y
    return _exp_minus_square(xp, y) * (num + _C[7]) / (den + _D[7])


def _large(xp: Any, y: Any) -> Any:
    """erfc(y) for 4 <= y <= 10."""
    t = 1.0 / (y * y)
    num, den = _P[5] * t, t
    for i in range(4):
        num, den = (num + _P[i]) * t, (den + _Q[i]) * t
    r = t * (num + _P[4]) / (den + _Q[4])
    return _exp_minus_square(xp, y) * (INV_SQRT_PI - r) / y


def erf_into(xp: Any, out: Any, x: Any) -> Any:
    """Write ``erf(x)`` into ``out`` (which may be ``x``'s own buffer: x is read before out is written).

    Args:
        xp: the array module (NumPy or CuPy).
        out: the float output array, shaped like ``x``.
        x: float input array.

    Returns:
        ``out``.

    Example:
        >>> erf_into(xp, xp.empty(3), xp.asarray([-1.0, 0.0, 2.0]))  # [-0.8427..., 0., 0.9953...]
    """
    y = xp.abs(x)
    small = _small(xp, xp.clip(x, -SMALL, SMALL))
    erfc = xp.where(y <= MIDDLE_END, _middle(xp, xp.clip(y, SMALL, MIDDLE_END)),
                    _large(xp, xp.clip(y, MIDDLE_END, LARGE_END)))
    big = xp.copysign(1.0 - erfc, x)
    result = xp.where(y <= SMALL, small, big)
    xp.copyto(out, xp.where(xp.isnan(x), x, result), casting="unsafe")
    return out
