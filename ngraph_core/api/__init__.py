"""User-facing op constructors (re-exported by ``ngraph_core``)."""

from .attention import scaled_dot_product_attention
from .control import assign, doall, sequential
from .conv import convolution, deconvolution, pooling
from .ctc import ctc_grad, ctc_loss
from .extra_math import (
    acos,
    acosh,
    asin,
    asinh,
    atan,
    atanh,
    bit_shift,
    bitwise_and,
    bitwise_not,
    bitwise_or,
    bitwise_xor,
    ceil,
    cosh,
    erf,
    floor,
    isinf,
    isnan,
    logical_and,
    logical_not,
    logical_or,
    logical_xor,
    mod,
    round,
    sinh,
    tan,
)
from .gather import gather, scatter_add
from .indexing import cumprod, cumsum, gather_elements, gather_nd, scatter_elements, scatter_nd, topk
from .math import (
    absolute,
    add,
    argmax,
    argmin,
    batch_dot,
    broadcast_to,
    cast,
    cos,
    divide,
    dot,
    equal,
    exp,
    fill_like,
    greater,
    greater_equal,
    less,
    less_equal,
    log,
    log1p,
    logsumexp,
    max,
    maximum,
    mean,
    min,
    minimum,
    multiply,
    negative,
    not_equal,
    power,
    prod,
    reciprocal,
    relu,
    rsqrt,
    sigmoid,
    sign,
    sin,
    sqrt,
    square,
    stop_gradient,
    subtract,
    sum,
    tanh,
    where,
)
from .nn import batch_size, cross_entropy_binary, cross_entropy_multi, gelu, log_softmax, softmax, softplus
from .norm import batch_norm, centered_sums, layer_norm, moments
from .scan import scan
from .shape import (
    axes_with_order,
    broadcast,
    cast_axes,
    concat_along_axis,
    expand_dims,
    flatten,
    one_hot,
    pad,
    slice_along_axis,
    stack,
    tensor_slice,
    unflatten,
)
from .subgraph import call, graph
from .tensors import as_op, constant, make_axes, make_axis, normal, placeholder, uniform, variable

abs = absolute  # noqa: A001 - ngraph-style name

__all__ = [
    "assign", "doall", "sequential", "convolution", "deconvolution", "pooling", "absolute", "abs", "add",
    "argmax", "argmin", "batch_dot", "broadcast_to", "cast", "cos", "divide", "dot", "equal", "exp", "fill_like",
    "greater",
    "greater_equal", "less", "less_equal",
    "log", "log1p", "logsumexp", "max", "maximum", "mean", "min", "minimum", "multiply", "negative",
    "not_equal", "power", "prod", "reciprocal", "relu", "rsqrt", "sigmoid", "sign", "sin", "sqrt", "square",
    "stop_gradient", "subtract", "sum", "tanh", "where", "batch_size", "cross_entropy_binary",
    "cross_entropy_multi", "gelu", "log_softmax", "softmax", "softplus", "axes_with_order", "broadcast",
    "cast_axes", "concat_along_axis", "expand_dims", "flatten", "one_hot", "pad", "slice_along_axis",
    "stack", "tensor_slice", "unflatten", "as_op", "constant", "make_axes", "make_axis", "normal",
    "placeholder", "uniform", "variable", "batch_norm", "centered_sums", "layer_norm", "moments", "call", "graph",
    "scan",
    "ctc_grad", "ctc_loss", "gather", "scatter_add", "scaled_dot_product_attention",
    "acos", "acosh", "asin", "asinh", "atan", "atanh", "bit_shift", "bitwise_and", "bitwise_not", "bitwise_or",
    "bitwise_xor", "ceil", "cosh", "erf", "floor", "isinf", "isnan", "logical_and", "logical_not", "logical_or",
    "logical_xor", "mod", "round", "sinh", "tan",
    "cumprod", "cumsum", "gather_elements", "gather_nd", "scatter_elements", "scatter_nd", "topk",
]
