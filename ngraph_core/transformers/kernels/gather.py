"""Row lookup kernels: ``gather`` (read rows of a table at ids) and ``scatter_add`` (its adjoint).

Both see the table as ``[*before, V, *after]`` (``V`` the looked-up axis) and the ids
flattened to ``T`` entries; the other side is ``[*before, *after, *ids]``, viewed as
``[*before, *after, T]``. The work is O(ids x row), never O(ids x V x row).

An id outside ``[0, V)`` reads a zero row and scatters nothing, which is what ``one_hot``
followed by ``dot`` gives. A gather built with ``out_of_range="raise"`` (arg ``LookupArg``: ONNX
Gather) reads ids in ``[-V, V)`` as ``take`` does and raises ``IndexRangeError`` on any other,
naming the op, the id, its position and the range: one reduction over the ids per call (on a GPU,
one host sync). The kernels use only ``take``, ``where``, ``copyto``, ``moveaxis``, ``argmax`` and
``add.at``, which NumPy and CuPy share.
"""

from __future__ import annotations

from typing import Any

from ...errors import IndexRangeError
from ...ir import ArrayValue, Op, OpType
from ...ir.indexing import LookupArg, lookup_name
from .context import Kernel, KernelContext


def _layout(table: Op, name: str) -> tuple[int, int, tuple[int, ...]]:
    """(index of the looked-up axis, its length, the shape of the table's other axes in order)."""
    k = table.axes.index(name)
    rest = tuple(n for i, n in enumerate(table.axes.lengths) if i != k)
    return k, table.axes.lengths[k], rest


def _valid_ids(xp: Any, ids: Any, length: int) -> tuple[Any, Any]:
    """The ids flattened, with out-of-range ones replaced by 0, and the mask of the in-range ones."""
    flat = ids.reshape(-1)
    valid = (flat >= 0) & (flat < length)
    return xp.where(valid, flat, 0), valid


def _constant_id(op: Op) -> int | None:
    """The one id of a ``constant`` ids operand (read from the graph at compile time, on the host), or
    None: not a constant, not one id, or not an integer."""
    ids = op.src[1]
    if ids.op is not OpType.CONSTANT or ids.axes.size != 1 or not ids.dtype.startswith(("int", "uint")):
        return None
    value = ids.arg.array.reshape(-1)[0] if isinstance(ids.arg, ArrayValue) else ids.arg
    return int(value)


def out_of_range(op: Op, index: int, position: tuple[int, ...], length: int) -> IndexRangeError:
    """The error of a ``raise`` gather given ``index`` (at ``position`` in its ids) for an axis of ``length``."""
    scope = "/".join(s.name for s in op.meta.scope)  # an imported ONNX node's name
    return IndexRangeError(
        f"gather {op.name!r}{f' (in {scope})' if scope else ''}: index {index} at position {position} of its ids "
        f"is out of range for axis {lookup_name(op.arg)} of length {length}; expected indices in [{-length}, "
        f"{length}); hint: check the ids fed to the graph (an ONNX Gather raises for them too)")


def _position(flat_index: int, shape: tuple[int, ...]) -> tuple[int, ...]:
    """The position in an array of ``shape`` of its C-order ``flat_index`` (host arithmetic, any backend)."""
    position = []
    for length in reversed(shape):
        flat_index, i = divmod(flat_index, length)
        position.append(i)
    return tuple(reversed(position))


def _checked_gather(op: Op, kc: KernelContext, k: int, length: int, rest: tuple[int, ...]) -> Kernel:
    """The kernel of a ``raise`` gather: ids in ``[-length, length)`` (as ``take`` reads them), any other an error."""
    xp = kc.xp
    one = _constant_id(op)
    if one is not None:  # a constant index: checked now, a basic-index copy when run
        if not -length <= one < length:
            raise out_of_range(op, one, (0,) * len(op.src[1].axes), length)
        index = (slice(None),) * k + (one,)

        def gather_one_checked(out, values, ids):
            xp.copyto(out.reshape(rest), values[index], casting="unsafe")
            return out

        return gather_one_checked

    def gather_checked(out, values, ids):
        flat = ids.reshape(-1)
        bad = (flat < -length) | (flat >= length)
        if bool(bad.any()):
            at = int(xp.argmax(bad))
            raise out_of_range(op, int(flat[at]), _position(at, ids.shape), length)
        rows = xp.moveaxis(xp.take(values, flat, axis=k), k, -1)  # [*rest, T]; take counts negative ids from the end
        xp.copyto(out.reshape(rest + (flat.size,)), rows, casting="unsafe")
        return out

    return gather_checked


def gather(op: Op, kc: KernelContext) -> Kernel:
    xp, (table, _) = kc.xp, op.src
    k, length, rest = _layout(table, lookup_name(op.arg))
    if isinstance(op.arg, LookupArg):
        return _checked_gather(op, kc, k, length, rest)
    one = _constant_id(op)
    if one is not None:  # a constant index (the last step of a sequence): a basic-index copy, 13 us -> 1 us
        index = (slice(None),) * k + (one,)

        def gather_one(out, values, ids):
            view = out.reshape(rest)
            if 0 <= one < length:
                xp.copyto(view, values[index], casting="unsafe")
            else:
                xp.copyto(view, 0)
            return out

        return gather_one

    def gather_kernel(out, values, ids):
        safe, valid = _valid_ids(xp, ids, length)
        rows = xp.moveaxis(xp.take(values, safe, axis=k), k, -1)  # [*rest, T]
        view = out.reshape(rest + (safe.size,))  # out is C-contiguous: a view
        xp.copyto(view, rows, casting="unsafe")
        # zero rows for ids out of range (copyto, not a product: a row 0 holding inf or nan stays out)
        xp.copyto(view, 0, where=~valid)
        return out

    return gather_kernel


def scatter_add(op: Op, kc: KernelContext) -> Kernel:
    xp = kc.xp
    k, length, rest = _layout(op, op.arg)
    index_before = (slice(None),) * k

    def scatter_add_kernel(out, updates, ids):
        safe, valid = _valid_ids(xp, ids, length)
        rows = xp.moveaxis(updates.reshape(rest + (safe.size,)), -1, k)  # [*before, T, *after]
        if not bool(valid.all()):  # drop out-of-range ids (rare: one host sync on a GPU)
            safe = safe[valid]
            rows = xp.take(rows, xp.nonzero(valid)[0], axis=k)
        # zero every call: the buffer may be shared with other ops between calls
        xp.copyto(out, 0)
        xp.add.at(out, index_before + (safe,), rows.astype(out.dtype, copy=False))
        return out

    return scatter_add_kernel


KERNELS = {
    OpType.GATHER: gather,
    OpType.SCATTER_ADD: scatter_add,
}
