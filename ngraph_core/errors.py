"""Typed errors raised to users of ngraph_core.

Every message says what was expected, what was received, where (which op or
placeholder) and ends with a ``hint:`` on how to fix it.
"""

from __future__ import annotations


class NgraphError(Exception):
    """Base class of every error ngraph_core raises for bad user input."""


class AxesError(NgraphError, ValueError):
    """Axes of an op's operands do not fit together (length clash, accidental outer product)."""


class DTypeError(NgraphError, TypeError):
    """An operand has a dtype the op cannot take."""


class UnsupportedOpError(NgraphError, NotImplementedError):
    """A backend or a pass has no rule for an OpType."""


class InvalidNameError(NgraphError, ValueError):
    """A name (of an op, axis, scope, label or layer) is empty, too long, or holds control characters."""


class GraphError(NgraphError, ValueError):
    """A sub-graph is malformed: a param that is not a placeholder, or a placeholder not among its params."""


class PipelineError(NgraphError, ValueError):
    """No pass pipeline for the asked backend or mode."""


class SelectorError(NgraphError, ValueError):
    """A selector query is malformed."""


class SelectorWarning(UserWarning):
    """A selector query names a layer type the graph does not have (a typo such as ``Afine``): it selects
    nothing there. ``select(..., unknown_types="error")`` makes it a ``SelectorError``."""


class SerializationError(NgraphError, ValueError):
    """A serialized graph or weight file is malformed, truncated or of an unknown version."""


class FeedError(NgraphError, ValueError):
    """A value fed to a placeholder does not match its axes or dtype."""


class BackendUnavailableError(NgraphError, RuntimeError):
    """A transformer backend cannot run here (e.g. CuPy without a GPU)."""


class VerifyError(NgraphError, AssertionError):
    """A graph breaks an IR validity rule (raised by ``verify``; a bug in a pass or a hand-built op)."""


class DistributedError(NgraphError, RuntimeError):
    """Data-parallel training cannot proceed: MPI missing, a collective refused, a bad rank or reduction."""


class DistributedTimeoutError(DistributedError, TimeoutError):
    """A collective did not complete within the timeout: another rank died or hangs."""


class MemoryBudgetError(NgraphError, MemoryError):
    """A tensor or an allocation would take more bytes than the memory budget (``ngraph_core/memory_budget.py``),
    or the allocation failed for lack of memory."""


class IndexRangeError(NgraphError, IndexError):
    """An index read at run time lies outside its axis (a ``gather`` built with ``out_of_range="raise"``)."""
