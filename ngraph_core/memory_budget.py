"""The memory budget: the most bytes one tensor may take, checked before anything is allocated.

A graph document or an ONNX model declares its sizes for free: 230 characters of JSON declare a
variable of ``2**40`` elements, 78 bytes of ONNX a ``ConstantOfShape [2**29]``. Without a
budget the decoder, the importer or the transformer allocates what they declare (gigabytes, or a
raw ``MemoryError``). Every place that turns a declared size into memory checks it here first:

* ``ng.deserialize``: each op's axes times its dtype's item size (``SerializationError``);
* ``import_model`` (ONNX): each node's outputs, each constant computed at import time, and the
  total of those constants (``OnnxBudgetError``);
* transformers, when a computation is compiled: each variable, temporary and result
  (``MemoryBudgetError``), and the arena plus new variables against the machine's memory.

The budget is ``DEFAULT_MAX_BYTES`` (1 GiB); ``NG_MAX_BYTES`` in the environment replaces the
default (bytes, or with a binary suffix: ``NG_MAX_BYTES=4GiB``), and each function's
``max_bytes`` keyword replaces both. The largest tensors of the repository's models, tests and
benchmarks are tens of MB, so the default leaves them a margin of ten and more.

Example:
    >>> check_bytes(tensor_bytes((2**40,), "float32"), resolve_max_bytes(None), "variable 'v'")
    MemoryBudgetError: variable 'v': expected at most 1.0 GiB (max_bytes=1,073,741,824), received 4.0 TiB ...
"""

from __future__ import annotations

import os
import re
from collections.abc import Iterable, Iterator
from contextlib import contextmanager

import numpy as np

from .errors import MemoryBudgetError, NgraphError

DEFAULT_MAX_BYTES = 1 << 30
ENV_VAR = "NG_MAX_BYTES"
HINT = (f"hint: is the input damaged? If the size is meant, raise the budget: the max_bytes keyword, or "
        f"{ENV_VAR} in the environment (e.g. {ENV_VAR}=4GiB)")
_UNITS = {"": 1, "k": 1 << 10, "m": 1 << 20, "g": 1 << 30, "t": 1 << 40}
_SIZE = re.compile(r"\s*(\d+)\s*([kmgt]?)(?:i?b)?\s*", re.IGNORECASE)


def parse_bytes(text: str, where: str = ENV_VAR) -> int:
    """A byte count written as digits with an optional binary suffix (``"1073741824"``, ``"512MiB"``, ``"4g"``).

    Raises:
        NgraphError: text that is not such a count, or zero.
    """
    match = _SIZE.fullmatch(text)
    value = int(match.group(1)) * _UNITS[match.group(2).lower()] if match else 0
    if value <= 0:
        raise NgraphError(f"{where}: expected a positive byte count such as 1073741824 or 4GiB, received {text!r}; "
                          f"hint: unset {ENV_VAR} for the default of {format_bytes(DEFAULT_MAX_BYTES)}")
    return value


def resolve_max_bytes(max_bytes: int | None = None, where: str = "max_bytes") -> int:
    """The budget in force: ``max_bytes`` when given, else ``NG_MAX_BYTES``, else ``DEFAULT_MAX_BYTES``.

    Raises:
        NgraphError: a ``max_bytes`` that is not a positive int, or a malformed ``NG_MAX_BYTES``.

    Example:
        >>> resolve_max_bytes(None)   # 1073741824 unless NG_MAX_BYTES says otherwise
    """
    if max_bytes is not None:
        if type(max_bytes) is not int or max_bytes <= 0:
            raise NgraphError(f"{where}: expected a positive int number of bytes, received {max_bytes!r}; "
                              f"hint: e.g. max_bytes=4 << 30 for 4 GiB")
        return max_bytes
    text = os.environ.get(ENV_VAR, "").strip()
    return parse_bytes(text) if text else DEFAULT_MAX_BYTES


def tensor_bytes(lengths: Iterable[int], dtype: str | np.dtype) -> int:
    """The bytes a dense tensor of these axis lengths and dtype is charged against the budget (Python ints: no
    overflow): its size, an empty axis counted as length 1. An empty tensor takes no memory, but NumPy cannot even
    describe one whose other axes span more than its index range (``np.empty((2**62, 0))`` raises), and no
    model needs an axis of ``2**40`` beside an empty one."""
    count = 1
    for n in lengths:
        count *= max(int(n), 1)
    return count * np.dtype(dtype).itemsize


def format_bytes(n: int) -> str:
    """``n`` in the largest binary unit that keeps it >= 1 (``"1.0 GiB"``); bytes below 1 KiB, and past 1024 EiB
    (``"1.6e+31 B"``)."""
    if n >= 1 << 70:
        return f"{n:.2g} B"
    for unit, size in (("EiB", 1 << 60), ("PiB", 1 << 50), ("TiB", 1 << 40), ("GiB", 1 << 30), ("MiB", 1 << 20),
                       ("KiB", 1 << 10)):
        if n >= size:
            return f"{n / size:.1f} {unit}"
    return f"{n} B"


def budget_message(nbytes: int, max_bytes: int, detail: str = "") -> tuple[str, str]:
    """The ``(expected, received)`` halves of an over-budget message (for errors built by ``fail``)."""
    return (f"at most {format_bytes(max_bytes)} (max_bytes={max_bytes:,})",
            f"{format_bytes(nbytes)} ({nbytes:,} bytes{', ' + detail if detail else ''})")


def check_bytes(nbytes: int, max_bytes: int, what: str, detail: str = "",
                error: type[Exception] = MemoryBudgetError, hint: str = HINT) -> None:
    """Raise ``error`` naming ``what`` when ``nbytes`` is over ``max_bytes``.

    Args:
        nbytes: the bytes about to be allocated; max_bytes: the budget (``resolve_max_bytes``).
        what: where (``"variable 'W'"``, ``"ConstantOfShape node 'c'"``); detail: e.g. the shape and dtype.
        error: the error class (a ``MemoryBudgetError`` subclass, or ``SerializationError``...).
        hint: the message's last part, saying what to do.
    """
    if nbytes > max_bytes:
        expected, received = budget_message(nbytes, max_bytes, detail)
        raise error(f"{what}: expected {expected}, received {received}; {hint}")


def physical_memory() -> int | None:
    """The machine's physical memory in bytes, or None where the OS does not say."""
    try:
        return os.sysconf("SC_PAGE_SIZE") * os.sysconf("SC_PHYS_PAGES")
    except (AttributeError, ValueError, OSError):
        return None


@contextmanager
def typed_out_of_memory(what: str, hint: str = "hint: free memory, or make the tensors smaller") -> Iterator[None]:
    """Turn a raw ``MemoryError`` (an allocation the machine or a ulimit refused) into ``MemoryBudgetError``.

    Example:
        >>> with typed_out_of_memory("variable 'W': allocating 4.0 GiB"):
        ...     storage = np.empty(shape)
    """
    try:
        yield
    except MemoryBudgetError:
        raise
    except MemoryError as exc:
        raise MemoryBudgetError(f"{what}: out of memory ({exc or 'no message'}); {hint}") from None
