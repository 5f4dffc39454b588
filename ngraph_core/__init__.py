"""ngraph_core: a graph compiler for deep learning over named axes.

``import ngraph_core as ng`` gives the whole public API: axes and tensors, math,
shape, neural-network composites, side effects, autodiff, graph queries,
serialization and transformers.

Example:
    >>> import ngraph_core as ng
    >>> C, N = ng.make_axis(4, name="C"), ng.make_axis(32, name="N")
    >>> X = ng.placeholder([C, N]); W = ng.variable([C], initial_value=0)
    >>> with ng.transformers.make_transformer() as t:
    ...     f = t.computation(ng.dot(W, X), X)
"""

from . import distributed, inference, transformers, viz
from .api import *  # noqa: F403 - the API package defines __all__
from .api import __all__ as _api_all
from .autodiff import custom_gradient, deriv, gradients
from .errors import (
    AxesError,
    BackendUnavailableError,
    DistributedError,
    DistributedTimeoutError,
    DTypeError,
    FeedError,
    GraphError,
    IndexRangeError,
    InvalidNameError,
    MemoryBudgetError,
    NgraphError,
    PipelineError,
    SelectorError,
    SelectorWarning,
    SerializationError,
    UnsupportedOpError,
    VerifyError,
)
from .ir import Axes, Axis, Op, OpGroup, OpType, format_graph, meta_generation, name_scope, update_meta, verify
from .ir import toposort as ordered_ops
from .ir.names import check_name
from .selectors import ScopeMatch, Selection, select
from .serialize import deserialize, serialize

__version__ = "0.1.0"

__all__ = [
    *_api_all,
    "distributed", "inference", "transformers", "viz", "custom_gradient", "deriv", "gradients",
    "AxesError", "BackendUnavailableError", "DTypeError", "FeedError", "GraphError", "InvalidNameError",
    "DistributedError", "DistributedTimeoutError", "IndexRangeError", "MemoryBudgetError",
    "NgraphError", "PipelineError", "SelectorError", "SelectorWarning", "SerializationError", "UnsupportedOpError",
    "VerifyError",
    "Axes", "Axis", "Op", "OpGroup", "OpType", "format_graph", "name_scope", "verify", "ordered_ops",
    "check_name", "update_meta", "meta_generation",
    "serialize", "deserialize", "select", "Selection", "ScopeMatch",
    "__version__",
]
