"""The one ``OpType`` enum and the groups (``OpGroup``) that passes, selectors and tests read.

Adding an op is one member here plus one entry in each table keyed by ``OpType``:
``ir/infer.py`` (axes and dtype), ``autodiff/rules.py`` (gradient, when differentiable)
and ``transformers/kernels`` (the NumPy/CuPy kernel). ``tests/ngraph_core/test_tables.py``
fails when a table misses a member.
"""

from __future__ import annotations

from enum import Enum


class OpType(Enum):
    """Every kind of node in the IR, grouped by kind. The value is the printed name."""

    # leaves: data that enters the graph
    CONSTANT = "constant"
    VARIABLE = "variable"
    PLACEHOLDER = "placeholder"
    # random tensors, fresh on every execution
    UNIFORM = "uniform"
    NORMAL = "normal"
    # element-wise unary
    NEG = "neg"
    ABS = "abs"
    EXP = "exp"
    LOG = "log"
    LOG1P = "log1p"
    SQRT = "sqrt"
    RSQRT = "rsqrt"
    SQUARE = "square"
    RECIPROCAL = "reciprocal"
    TANH = "tanh"
    SIGMOID = "sigmoid"
    RELU = "relu"
    SIGN = "sign"
    SIN = "sin"
    COS = "cos"
    # element-wise unary for the ONNX operator set: rounding (round: half to even), erf, inverse and
    # hyperbolic trigonometry; then tests giving bool (isinf arg: ir/logical.py InfFlags) and bit ops
    FLOOR = "floor"
    CEIL = "ceil"
    ROUND = "round"
    ERF = "erf"
    TAN = "tan"
    ASIN = "asin"
    ACOS = "acos"
    ATAN = "atan"
    SINH = "sinh"
    COSH = "cosh"
    ASINH = "asinh"
    ACOSH = "acosh"
    ATANH = "atanh"
    ISNAN = "isnan"
    ISINF = "isinf"
    LOGICAL_NOT = "logical_not"
    BITWISE_NOT = "bitwise_not"
    STOP_GRADIENT = "stop_gradient"
    CAST = "cast"
    # element-wise binary
    ADD = "add"
    SUB = "sub"
    MUL = "mul"
    DIV = "div"
    POW = "pow"
    MAXIMUM = "maximum"
    MINIMUM = "minimum"
    MOD = "mod"  # the divisor's sign (Python %, ONNX Mod fmod=0)
    FMOD = "fmod"  # the dividend's sign (C fmod, ONNX Mod fmod=1)
    LOGICAL_AND = "logical_and"  # logical ops: bool in, bool out
    LOGICAL_OR = "logical_or"
    LOGICAL_XOR = "logical_xor"
    BITWISE_AND = "bitwise_and"  # bit ops: integers
    BITWISE_OR = "bitwise_or"
    BITWISE_XOR = "bitwise_xor"
    BIT_SHIFT = "bit_shift"  # arg: ir/logical.py ShiftDirection ("left" | "right")
    # comparisons (0/1 in the operands' dtype)
    EQUAL = "equal"
    NOT_EQUAL = "not_equal"
    LESS = "less"
    LESS_EQUAL = "less_equal"
    GREATER = "greater"
    GREATER_EQUAL = "greater_equal"
    # element-wise ternary
    WHERE = "where"
    # reductions (arg: none; the op's axes are the kept axes, in output order)
    SUM = "sum"
    MAX = "max"
    MIN = "min"
    PROD = "prod"
    ARGMAX = "argmax"
    ARGMIN = "argmin"
    # movement and views
    BROADCAST = "broadcast"
    CAST_AXES = "cast_axes"
    RESHAPE = "reshape"
    SLICE = "slice"
    PAD = "pad"
    CONCAT = "concat"
    # row lookup along a named axis (arg: the axis name): gather reads rows of a table at integer
    # ids, scatter_add (gather's adjoint) sums rows into a zero table at ids; ids out of range
    # read zeros / are dropped
    GATHER = "gather"
    SCATTER_ADD = "scatter_add"
    # positional indexing along axes (ONNX semantics; args in ir/indexing.py): running sums and products,
    # the int64 positions of the k largest (or smallest) values, and element / index-tuple gathers and scatters
    CUMSUM = "cumsum"
    CUMPROD = "cumprod"
    TOPK = "topk"
    GATHER_ELEMENTS = "gather_elements"
    SCATTER_ELEMENTS = "scatter_elements"
    GATHER_ND = "gather_nd"
    SCATTER_ND = "scatter_nd"
    # contraction
    DOT = "dot"
    BATCH_DOT = "batch_dot"  # a dot that keeps some shared axes (the batch); the output axes say which
    # neural-network ops over [C, *spatial, N] activations (arg: ir/conv.py ConvArg / PoolArg)
    CONV = "conv"
    CONV_BPROP_DATA = "conv_bprop_data"
    CONV_BPROP_FILTER = "conv_bprop_filter"
    POOL = "pool"
    POOL_BPROP = "pool_bprop"
    # normalization statistics (axes [moments:2, *kept]): mean and biased variance over the
    # other axes; and the two sums batch norm's gradient needs, sum(dy) and sum(dy * (x - mean))
    MOMENTS = "moments"
    CENTERED_SUMS = "centered_sums"
    # connectionist temporal classification over logits [C, REC, N] (arg: ir/ctc.py CTCArg): the
    # per-example negative log-likelihood [N], and its gradient d sum(ctc) / d logits
    CTC = "ctc"
    CTC_GRAD = "ctc_grad"
    # control and side effects
    ASSIGN = "assign"
    SEQUENTIAL = "sequential"
    DOALL = "doall"
    CUSTOM_GRADIENT = "custom_gradient"
    CALL = "call"  # apply a sub-graph (arg: ir/graph.py CallArg) to the sources
    SCAN = "scan"  # loop a body sub-graph over a recurrent axis (arg: ir/scan.py ScanArg); packs its results
    SCAN_RESULT = "scan_result"  # one result of a scan, a view into its pack (arg: the result index)
    # collectives across the ranks of a data-parallel run (ir/collective.py; a size-1 world is the identity)
    ALLREDUCE = "allreduce"  # every rank's x reduced ("mean" | "sum"), on every rank (arg: AllreduceArg)
    BROADCAST_FROM = "broadcast_from"  # rank root's x on every rank (arg: the root rank)
    # made by the compiler only (never by users, never differentiated)
    FUSED = "fused"
    ALLREDUCE_START = "allreduce_start"  # a bucket of allreduces, flattened and started (passes/allreduce.py)
    ALLREDUCE_WAIT = "allreduce_wait"  # its reduced flat value, once the bucket's request completed
    FUSED_ATTENTION = "fused_attention"  # attention in one tiled kernel (ir/attention.py; passes/attention.py)

    def __repr__(self) -> str:
        return f"OpType.{self.name}"


class OpGroup:
    """Sets of ``OpType`` by kind, read by the tables, passes and tests."""

    LEAF = frozenset({OpType.CONSTANT, OpType.VARIABLE, OpType.PLACEHOLDER})
    RANDOM = frozenset({OpType.UNIFORM, OpType.NORMAL})
    UNARY = frozenset({
        OpType.NEG, OpType.ABS, OpType.EXP, OpType.LOG, OpType.LOG1P, OpType.SQRT, OpType.RSQRT,
        OpType.SQUARE, OpType.RECIPROCAL, OpType.TANH, OpType.SIGMOID, OpType.RELU, OpType.SIGN,
        OpType.SIN, OpType.COS, OpType.STOP_GRADIENT, OpType.CAST,
        OpType.FLOOR, OpType.CEIL, OpType.ROUND, OpType.ERF, OpType.TAN, OpType.ASIN, OpType.ACOS, OpType.ATAN,
        OpType.SINH, OpType.COSH, OpType.ASINH, OpType.ACOSH, OpType.ATANH, OpType.ISNAN, OpType.ISINF,
        OpType.LOGICAL_NOT, OpType.BITWISE_NOT,
    })
    BINARY = frozenset({
        OpType.ADD, OpType.SUB, OpType.MUL, OpType.DIV, OpType.POW, OpType.MAXIMUM, OpType.MINIMUM,
        OpType.MOD, OpType.FMOD, OpType.LOGICAL_AND, OpType.LOGICAL_OR, OpType.LOGICAL_XOR, OpType.BITWISE_AND,
        OpType.BITWISE_OR, OpType.BITWISE_XOR, OpType.BIT_SHIFT,
    })
    COMPARISON = frozenset({
        OpType.EQUAL, OpType.NOT_EQUAL, OpType.LESS, OpType.LESS_EQUAL, OpType.GREATER,
        OpType.GREATER_EQUAL,
    })
    TERNARY = frozenset({OpType.WHERE})
    ELEMENTWISE = UNARY | BINARY | COMPARISON | TERNARY
    REDUCE = frozenset({OpType.SUM, OpType.MAX, OpType.MIN, OpType.PROD, OpType.ARGMAX, OpType.ARGMIN})
    MOVEMENT = frozenset({
        OpType.BROADCAST, OpType.CAST_AXES, OpType.RESHAPE, OpType.SLICE, OpType.PAD, OpType.CONCAT,
        OpType.GATHER, OpType.SCATTER_ADD, OpType.CUMSUM, OpType.CUMPROD, OpType.TOPK, OpType.GATHER_ELEMENTS,
        OpType.SCATTER_ELEMENTS, OpType.GATHER_ND, OpType.SCATTER_ND,
    })
    # element-wise ops giving bool (tests, logic) and integer bit ops: never float, so never fused
    # nor differentiated
    LOGICAL = frozenset({
        OpType.ISNAN, OpType.ISINF, OpType.LOGICAL_NOT, OpType.LOGICAL_AND, OpType.LOGICAL_OR, OpType.LOGICAL_XOR,
        OpType.BITWISE_NOT, OpType.BITWISE_AND, OpType.BITWISE_OR, OpType.BITWISE_XOR, OpType.BIT_SHIFT,
    })
    CONTRACTION = frozenset({OpType.DOT, OpType.BATCH_DOT})
    # convolution (its data and filter gradients; the data gradient is also the transposed
    # convolution) and pooling. They own their buffers and never run in place: a window reads
    # inputs around the position it writes.
    NN = frozenset({
        OpType.CONV, OpType.CONV_BPROP_DATA, OpType.CONV_BPROP_FILTER, OpType.POOL, OpType.POOL_BPROP,
        OpType.MOMENTS, OpType.CENTERED_SUMS, OpType.CTC, OpType.CTC_GRAD,
    })
    CONTROL = frozenset({OpType.ASSIGN, OpType.SEQUENTIAL, OpType.DOALL, OpType.CUSTOM_GRADIENT, OpType.CALL,
                         OpType.SCAN, OpType.SCAN_RESULT})
    # communication between the ranks of a data-parallel run
    COLLECTIVE = frozenset({OpType.ALLREDUCE, OpType.BROADCAST_FROM})
    COMPILED = frozenset({OpType.FUSED, OpType.ALLREDUCE_START, OpType.ALLREDUCE_WAIT, OpType.FUSED_ATTENTION})
    # ops that talk to other ranks: never folded, merged or evaluated at compile time
    COMMUNICATING = COLLECTIVE | {OpType.ALLREDUCE_START, OpType.ALLREDUCE_WAIT}
    # ops whose output never carries a gradient back to any input
    NON_DIFFERENTIABLE = (
        LEAF | RANDOM | COMPARISON | COMPILED
        | {OpType.SIGN, OpType.STOP_GRADIENT, OpType.ARGMAX, OpType.ARGMIN, OpType.ASSIGN, OpType.DOALL,
           OpType.BROADCAST_FROM, OpType.FLOOR, OpType.CEIL, OpType.ROUND, OpType.TOPK}
        | LOGICAL
    )

    # ops whose value is a view of (or the same array as) a source: they own no buffer
    VIEW = frozenset({
        OpType.BROADCAST, OpType.CAST_AXES, OpType.RESHAPE, OpType.SLICE, OpType.STOP_GRADIENT,
        OpType.SEQUENTIAL, OpType.CUSTOM_GRADIENT, OpType.SCAN_RESULT,
    })
    # ops that need no buffer from a computation's arena (views, persistent or external data)
    NO_BUFFER = VIEW | {OpType.VARIABLE, OpType.PLACEHOLDER, OpType.CONSTANT, OpType.ASSIGN, OpType.DOALL}
    # ops that may write their output over a dying source's buffer (position-wise computation)
    IN_PLACE = ELEMENTWISE - {OpType.STOP_GRADIENT} | {OpType.FUSED}


OP_BY_NAME: dict[str, OpType] = {t.value: t for t in OpType}
