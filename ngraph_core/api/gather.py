"""Row lookup by integer ids: ``gather`` (embeddings) and its adjoint ``scatter_add``."""

from __future__ import annotations

from typing import Any

from ..errors import AxesError, NgraphError
from ..ir import Axis, Op, OpType, make
from ..ir.indexing import LookupArg
from .tensors import AxesLike, as_op, make_axes


def _axis_name(axis: Axis | str, where: str) -> str:
    if isinstance(axis, Axis):
        return axis.name
    if isinstance(axis, str):
        return axis
    raise AxesError(
        f"{where}: expected the looked-up axis as an Axis or its name, received {type(axis).__name__}; "
        "hint: pass the table's axis, e.g. V of a table [E, V]"
    )


def gather(table: Any, ids: Any, axis: Axis | str, out_of_range: str = "zero") -> Op:
    """Rows of ``table`` along ``axis`` picked by integer ``ids``: ``table[..., ids, ...]`` with named axes.

    The result has the table's other axes, in order, followed by the ids' axes. By default
    (``out_of_range="zero"``, neon's ``LookupTable``) an id outside ``[0, axis.length)`` gives a
    zero row, what ``one_hot`` followed by ``dot`` gives. With ``out_of_range="raise"`` (ONNX
    ``Gather``, ``np.take``) ids lie in ``[-length, length)``, negative ones counting from the end,
    and any other id raises ``IndexRangeError`` when the graph runs, naming the op, the id and the
    range (one check over the ids per call). The cost is O(ids x row), where
    ``dot(table, one_hot(ids, axis))`` costs O(ids x row x length). The gradient flows to ``table``
    (a ``scatter_add`` of the upstream gradient), none to ``ids``.

    Args:
        table: the op to read rows from; it has ``axis``.
        ids: an integer op with any axes whose names differ from the table's other axes.
        axis: the table axis the ids index (an ``Axis`` or its name).
        out_of_range: ``"zero"`` (zero rows) or ``"raise"`` (``IndexRangeError`` at run time).

    Returns:
        An op with axes ``table.axes - [axis] + ids.axes`` and the table's dtype.

    Raises:
        AxesError: the table has no such axis, or the ids share an axis name with the table's other axes.
        DTypeError: the ids are not integers (bool and floats included).
        NgraphError: an ``out_of_range`` other than ``"zero"`` or ``"raise"``.

    Example:
        >>> W = ng.variable([E, V], initial_value=0.1)  # an embedding table
        >>> ids = ng.placeholder([REC, N], dtype="int64")
        >>> vectors = ng.gather(W, ids, V)  # [E, REC, N]
    """
    table, ids = as_op(table, where="gather"), as_op(ids, where="gather")
    name = _axis_name(axis, "gather")
    if out_of_range not in ("zero", "raise"):
        raise NgraphError(f"gather: expected out_of_range 'zero' or 'raise', received {out_of_range!r}; hint: 'raise' "
                          "makes ids outside the axis an IndexRangeError when the graph runs")
    return make(OpType.GATHER, [table, ids], arg=name if out_of_range == "zero" else LookupArg(name))


def scatter_add(updates: Any, ids: Any, axes: AxesLike, axis: Axis | str) -> Op:
    """A zero table with axes ``axes`` plus, at each id along ``axis``, the row of ``updates`` for that id.

    The adjoint of ``gather``: repeated ids accumulate, ids outside ``[0, axis.length)`` are
    dropped. ``gather``'s gradient with respect to its table is this op.

    Args:
        updates: rows to add, with the axes ``gather(table, ids, axis)`` would have.
        ids: an integer op, as for ``gather``.
        axes: the axes of the table (the result); they include ``axis``.
        axis: the table axis the ids index (an ``Axis`` or its name).

    Returns:
        An op with axes ``axes`` and the updates' dtype.

    Raises:
        AxesError: ``axes`` lacks ``axis``, or the updates do not have gather's axes.
        DTypeError: the ids are not integers.

    Example:
        >>> dW = ng.scatter_add(d_vectors, ids, [E, V], V)  # d_vectors [E, REC, N] -> [E, V]
    """
    updates, ids = as_op(updates, where="scatter_add"), as_op(ids, where="scatter_add")
    return make(OpType.SCATTER_ADD, [updates, ids], arg=_axis_name(axis, "scatter_add"), axes=make_axes(axes))
