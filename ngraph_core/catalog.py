"""The op catalog: one row per ``OpType`` saying, for each capability, whether the op has it.

An op's capabilities live in many tables (inference in ``ir/``, kernels in ``transformers/kernels/``,
gradients in ``autodiff/``, the backends' compiled fast paths, the ONNX importer and exporter). ``ROWS``
states them all in one place, one line per op; ``tests/ngraph_core/test_catalog.py`` fails, naming the file
and the line to add, when a row is missing, a cell is empty, or a cell disagrees with the table that
implements it. Read it as the op x capability matrix (``table()``: the docs page "Ops", ``ngraph ops``).

Capabilities (the columns; ``CAPABILITIES`` says where each lives and what to add):

* ``inference`` — an axes/dtype rule and an arity (``ir/infer.py`` ``INFER``, ``ARITY``); every op has one.
* ``kernel`` — a kernel written against ``xp`` (``transformers/kernels`` ``KERNELS``), or ``bound``: the
  executor binds the op's storage (variables, placeholders).
* ``gradient`` — a rule in ``autodiff/rules.py`` ``RULES``; ``-`` exactly for ``OpGroup.NON_DIFFERENTIABLE``.
* ``decomposition`` — a rule in ``passes/decompose.py`` rewriting the op into others for a backend
  without its kernel (optional: an op every backend runs needs none).
* ``numba`` — the NumPy backend's compiled path: a step of its numba fused loops
  (``numpy/numba_kernels.py`` ``SUPPORTED``) or a kernel of its own (``NumpyTransformer.kernel_overrides``).
  Optional: without it the shared kernel runs.
* ``cuda`` — the CuPy backend's own path: a step of its generated CUDA kernels (``cupy/elementwise.py``
  ``SUPPORTED``) or a kernel of its own (``CupyTransformer.kernel_overrides``: fused programs, CTC). Optional.
* ``onnx_import`` — the ONNX operators whose node imports as this op (comma-separated; checked against the
  importer's converter registry). Operators that import as compositions (``Softmax``, ``LSTM``) are not
  listed: they have no op of their own.
* ``onnx_export`` — a converter in ``frontends/onnx/export_ops.py`` ``CONVERTERS``.

Every ``-`` says why: a reason in ``WHY_NOT``, or the default for the op's kind (``reason``).

Example:
    >>> from ngraph_core import catalog
    >>> catalog.capabilities("tanh")["numba"]
    'yes'
    >>> catalog.reason("bit_shift", "gradient")
    'integer bits: no gradient'
"""

from __future__ import annotations

from dataclasses import dataclass

from .errors import NgraphError
from .ir import OpGroup, OpType
from .ir.ops import OP_BY_NAME

ROWS = """
op                 inference  kernel  gradient  decomposition  numba  cuda  onnx_import              onnx_export
constant           yes        yes     -         -              -      -     Constant                 yes
variable           yes        bound   -         -              -      -     -                        yes
placeholder        yes        bound   -         -              -      -     -                        yes
uniform            yes        yes     -         -              -      -     -                        -
normal             yes        yes     -         -              -      -     -                        -
neg                yes        yes     yes       yes            yes    yes   Neg                      yes
abs                yes        yes     yes       yes            yes    yes   Abs                      yes
exp                yes        yes     yes       -              yes    yes   Exp                      yes
log                yes        yes     yes       -              yes    yes   Log                      yes
log1p              yes        yes     yes       yes            yes    yes   -                        yes
sqrt               yes        yes     yes       -              yes    yes   Sqrt                     yes
rsqrt              yes        yes     yes       yes            yes    yes   -                        yes
square             yes        yes     yes       yes            yes    yes   -                        yes
reciprocal         yes        yes     yes       yes            yes    yes   Reciprocal               yes
tanh               yes        yes     yes       yes            yes    yes   Tanh                     yes
sigmoid            yes        yes     yes       yes            yes    yes   Sigmoid                  yes
relu               yes        yes     yes       yes            yes    yes   Relu                     yes
sign               yes        yes     -         -              yes    yes   Sign                     yes
sin                yes        yes     yes       -              yes    yes   Sin                      yes
cos                yes        yes     yes       -              yes    yes   Cos                      yes
floor              yes        yes     -         -              -      yes   Floor                    yes
ceil               yes        yes     -         -              -      yes   Ceil                     yes
round              yes        yes     -         -              -      yes   Round                    yes
erf                yes        yes     yes       -              -      yes   Erf                      yes
tan                yes        yes     yes       -              -      yes   Tan                      yes
asin               yes        yes     yes       -              -      yes   Asin                     yes
acos               yes        yes     yes       -              -      yes   Acos                     yes
atan               yes        yes     yes       -              -      yes   Atan                     yes
sinh               yes        yes     yes       -              -      yes   Sinh                     yes
cosh               yes        yes     yes       -              -      yes   Cosh                     yes
asinh              yes        yes     yes       -              -      yes   Asinh                    yes
acosh              yes        yes     yes       -              -      yes   Acosh                    yes
atanh              yes        yes     yes       -              -      yes   Atanh                    yes
isnan              yes        yes     -         -              -      -     IsNaN                    yes
isinf              yes        yes     -         -              -      -     IsInf                    yes
logical_not        yes        yes     -         -              -      -     Not                      yes
bitwise_not        yes        yes     -         -              -      -     BitwiseNot               yes
stop_gradient      yes        yes     -         -              -      -     -                        yes
cast               yes        yes     yes       -              yes    -     Cast,CastLike            yes
add                yes        yes     yes       -              yes    yes   Add,Sum                  yes
sub                yes        yes     yes       yes            yes    yes   Sub                      yes
mul                yes        yes     yes       -              yes    yes   Mul                      yes
div                yes        yes     yes       -              yes    yes   Div                      yes
pow                yes        yes     yes       -              yes    yes   Pow                      yes
maximum            yes        yes     yes       -              yes    yes   Max                      yes
minimum            yes        yes     yes       -              yes    yes   Min                      yes
mod                yes        yes     yes       -              -      yes   Mod                      yes
fmod               yes        yes     yes       -              -      yes   Mod                      yes
logical_and        yes        yes     -         -              -      -     And                      yes
logical_or         yes        yes     -         -              -      -     Or                       yes
logical_xor        yes        yes     -         -              -      -     Xor                      yes
bitwise_and        yes        yes     -         -              -      -     BitwiseAnd               yes
bitwise_or         yes        yes     -         -              -      -     BitwiseOr                yes
bitwise_xor        yes        yes     -         -              -      -     BitwiseXor               yes
bit_shift          yes        yes     -         -              -      -     BitShift                 -
equal              yes        yes     -         -              yes    yes   Equal                    yes
not_equal          yes        yes     -         -              yes    yes   -                        yes
less               yes        yes     -         -              yes    yes   Less                     yes
less_equal         yes        yes     -         -              yes    yes   LessOrEqual              yes
greater            yes        yes     -         -              yes    yes   Greater                  yes
greater_equal      yes        yes     -         -              yes    yes   GreaterOrEqual           yes
where              yes        yes     yes       -              yes    yes   Where                    yes
sum                yes        yes     yes       -              -      -     ReduceSum                yes
max                yes        yes     yes       -              -      -     ReduceMax                yes
min                yes        yes     yes       -              -      -     ReduceMin                yes
prod               yes        yes     yes       -              -      -     ReduceProd               yes
argmax             yes        yes     -         -              -      -     ArgMax                   yes
argmin             yes        yes     -         -              -      -     ArgMin                   yes
broadcast          yes        yes     yes       -              -      -     Expand                   yes
cast_axes          yes        yes     yes       -              -      -     -                        yes
reshape            yes        yes     yes       -              -      -     Reshape,Flatten          yes
slice              yes        yes     yes       -              -      -     Slice,Split              yes
pad                yes        yes     yes       -              -      -     Pad                      yes
concat             yes        yes     yes       -              -      -     Concat                   yes
gather             yes        yes     yes       -              -      -     Gather                   yes
scatter_add        yes        yes     yes       -              -      -     -                        -
cumsum             yes        yes     yes       -              -      -     CumSum                   yes
cumprod            yes        yes     yes       -              -      -     CumProd                  -
topk               yes        yes     -         -              -      -     TopK                     yes
gather_elements    yes        yes     yes       -              -      -     GatherElements           -
scatter_elements   yes        yes     yes       -              -      -     ScatterElements,Scatter  -
gather_nd          yes        yes     yes       -              -      -     GatherND                 -
scatter_nd         yes        yes     yes       -              -      -     ScatterND                -
dot                yes        yes     yes       -              -      -     MatMul,Gemm              yes
batch_dot          yes        yes     yes       -              -      -     -                        yes
conv               yes        yes     yes       -              -      -     Conv                     yes
conv_bprop_data    yes        yes     yes       -              -      -     ConvTranspose            yes
conv_bprop_filter  yes        yes     yes       -              -      -     -                        -
pool               yes        yes     yes       -              yes    -     MaxPool,AveragePool      yes
pool_bprop         yes        yes     yes       -              yes    -     -                        -
moments            yes        yes     yes       -              -      -     -                        yes
centered_sums      yes        yes     yes       -              -      -     -                        -
ctc                yes        yes     yes       -              -      yes   -                        -
ctc_grad           yes        yes     yes       -              -      yes   -                        -
assign             yes        yes     -         -              -      -     -                        -
sequential         yes        yes     yes       -              -      -     -                        yes
doall              yes        yes     -         -              -      -     -                        -
custom_gradient    yes        yes     yes       -              -      -     -                        yes
call               yes        yes     yes       -              -      -     -                        yes
scan               yes        yes     yes       -              yes    -     Scan,Loop                yes
scan_result        yes        yes     yes       -              -      -     -                        yes
allreduce          yes        yes     yes       -              -      -     -                        -
broadcast_from     yes        yes     -         -              -      -     -                        -
fused              yes        yes     -         -              yes    yes   -                        -
allreduce_start    yes        yes     -         -              -      -     -                        -
allreduce_wait     yes        yes     -         -              -      -     -                        -
fused_attention    yes        yes     -         -              yes    -     -                        -
"""
"""The catalog: one line per ``OpType``, a cell per capability: ``yes`` (``bound``: storage the executor binds),
ONNX operator names, or ``-`` (why: ``WHY_NOT``). Columns are separated by spaces and need not line up."""

WHY_NOT: dict[str, dict[str, str]] = {  # capability -> {ops (space-separated): why they lack it}
    "gradient": {
        "constant variable placeholder": "a leaf: the reverse walk ends there",
        "uniform normal": "a fresh random sample, not a function of its sources",
        "sign floor ceil round": "piecewise constant: the gradient is zero almost everywhere",
        "stop_gradient": "stops the gradient, by definition",
        "isnan isinf logical_not logical_and logical_or logical_xor": "gives bool: no gradient",
        "bitwise_not bitwise_and bitwise_or bitwise_xor bit_shift": "integer bits: no gradient",
        "equal not_equal less less_equal greater greater_equal": "gives 0/1: zero gradient almost everywhere",
        "argmax argmin topk": "gives integer positions",
        "assign doall": "a side effect: its value is never differentiated",
        "broadcast_from": "sets every rank to the root's value (initial weights), off the differentiated path",
    },
    "numba": {
        "floor ceil round erf tan asin acos atan sinh cosh asinh acosh atanh mod fmod":
            "no numba expression yet: a fused program with this step runs the NumPy kernel",
        "isnan isinf logical_not logical_and logical_or logical_xor bitwise_not bitwise_and bitwise_or bitwise_xor "
        "bit_shift": "bool or integer: never a step of a fused (float) program",
        "stop_gradient": "a view: never a fused step",
        "conv conv_bprop_data conv_bprop_filter": "the shared kernel, whose conv_variant hook picks Winograd, "
                                                  "channels-last or im2col per layer (numpy/conv_choice.py)",
    },
    "cuda": {
        "isnan isinf logical_not logical_and logical_or logical_xor bitwise_not bitwise_and bitwise_or bitwise_xor "
        "bit_shift": "bool or integer: generated kernels compute float32/float64",
        "cast": "changes the dtype: a generated kernel computes in one dtype",
        "stop_gradient": "a view: never a fused step",
        "conv conv_bprop_data conv_bprop_filter": "the shared kernel, whose conv_variant hook runs cuDNN when "
                                                  "NG_CUDNN=1 (cupy/cudnn.py)",
    },
    "onnx_import": {
        "variable": "a float initializer imports as a variable (import_model(initializers='variables'))",
        "placeholder": "a graph input imports as a placeholder",
        "uniform normal": "RandomUniform and RandomNormal have no converter (an inference graph holds no random op)",
        "log1p rsqrt square": "no ONNX operator of its own",
        "stop_gradient": "Identity imports as its input itself",
        "not_equal": "ONNX has no NotEqual (Not of Equal imports as logical_not)",
        "cast_axes": "renames axes: ONNX dims have positions, not names",
        "scatter_add": "no ONNX operator of its own (MaxUnpool imports through it)",
        "moments": "no ONNX operator of its own (the normalizations import through it)",
        "conv_bprop_filter pool_bprop centered_sums ctc_grad": "a gradient: ONNX models hold no gradients",
        "ctc": "ONNX has no CTC loss",
        "batch_dot": "a batched MatMul imports as one grouped 1x1 convolution (frontends/onnx/tensor.py batched)",
        "assign doall sequential": "a training side effect: ONNX graphs hold none",
        "custom_gradient": "a gradient override: ONNX models hold no gradients",
        "call": "applies a sub-graph: ONNX sub-graphs (If, Loop, Scan) import as where and scan",
        "scan_result": "one result of a scan: Scan and Loop import through it",
    },
    "onnx_export": {
        "uniform normal": "random: no deterministic ONNX form (export the inference graph)",
        "assign doall": "a training side effect: export the inference graph",
        "ctc": "a loss: export the logits and decode outside the graph",
        "bit_shift scatter_add cumprod gather_elements scatter_elements gather_nd scatter_nd": "no converter yet",
        "conv_bprop_filter pool_bprop centered_sums ctc_grad": "a gradient: export the inference graph",
    },
}
"""Why an op lacks a capability, where its kind does not say (``reason`` gives the default for the kind)."""


@dataclass(frozen=True)
class Capability:
    """One column of the catalog: where its table lives and what to add there for an op.

    Attributes:
        name: the column (``"gradient"``).
        where: the file holding the implementing table.
        add: the entry to add there, a template of ``{OP}`` (``TANH``) and ``{op}`` (``tanh``).
    """

    name: str
    where: str
    add: str


CAPABILITIES = (
    Capability("inference", "ngraph_core/ir/infer.py",
               "OpType.{OP}: <axes/dtype rule> in INFER and OpType.{OP}: <number of sources> in ARITY "
               "(element-wise ops get their rule through their OpGroup)"),
    Capability("kernel", "ngraph_core/transformers/kernels/<kind>.py",
               "OpType.{OP}: <factory (op, ctx) -> kernel> in that module's KERNELS (an element-wise op with a "
               'NumPy ufunc: OpType.{OP}: "<ufunc>" in elementwise.py\'s _UFUNCS)'),
    Capability("gradient", "ngraph_core/autodiff/rules.py",
               "OpType.{OP}: lambda ctx, op: (<gradient of each source>,) in RULES; or, where no gradient flows, "
               "OpType.{OP} in OpGroup.NON_DIFFERENTIABLE (ngraph_core/ir/ops.py)"),
    Capability("decomposition", "ngraph_core/passes/decompose.py",
               "(pat(T.{OP}, fx), lambda x: <the same value from other ops>),  # {op}(x) -> ... in RULES"),
    Capability("numba", "ngraph_core/transformers/numpy/numba_kernels.py",
               'OpType.{OP}: "<numba expression of {{0}} (and {{1}})>" in _UNARY (or _BINARY); a kernel of its '
               "own: OpType.{OP} in NumpyTransformer.kernel_overrides (numpy/transformer.py)"),
    Capability("cuda", "ngraph_core/transformers/cupy/elementwise.py",
               'OpType.{OP}: "<C function>" in _FUNCTIONS, or a C expression of {{0}}, {{1}} in _EXPRESSIONS; a '
               "kernel of its own: OpType.{OP} in CupyTransformer.kernel_overrides (cupy/transformer.py)"),
    Capability("onnx_import", "ngraph_core/frontends/onnx/ops_<kind>.py",
               '@converter("<OnnxName>", since=<opset>) on a converter building api.{op} (element-wise: '
               '"<OnnxName>": api.{op} in ops_math.py\'s _UNARY)'),
    Capability("onnx_export", "ngraph_core/frontends/onnx/export_ops.py",
               'T.{OP}: "<OnnxName>" in _UNARY or _BINARY, or OpType.{OP}: <converter> in CONVERTERS'),
)
"""The columns, in order."""

NAMES = tuple(c.name for c in CAPABILITIES)
_BY_NAME = {c.name: c for c in CAPABILITIES}
_HEADER = ("op", *NAMES)


def _parse() -> dict[str, list[str]]:
    """op name -> its cells as written (a malformed row keeps what it has: ``check`` reports it)."""
    lines = [line.split() for line in ROWS.strip().splitlines()]
    assert tuple(lines[0]) == _HEADER, f"ROWS' header is {lines[0]}, expected {_HEADER}"
    return {cells[0]: cells[1:] for cells in lines[1:]}


_ROWS = _parse()


def _op_type(op: OpType | str) -> OpType:
    if isinstance(op, OpType):
        return op
    found = OP_BY_NAME.get(op)
    if found is None:
        raise NgraphError(f"catalog: expected an OpType or an op name such as 'tanh', received {op!r}; "
                          "hint: the names are the OpType values (ngraph_core/ir/ops.py)")
    return found


def capabilities(op: OpType | str) -> dict[str, str]:
    """The row of ``op``: capability -> ``"yes"``, ``"bound"``, ONNX operator names or ``"-"``.

    Args:
        op: an ``OpType`` or its name (``"tanh"``).

    Returns:
        one entry per capability, in ``NAMES`` order.

    Raises:
        NgraphError: an unknown op name, or an op whose row is missing or has the wrong number of cells.

    Example:
        >>> capabilities(OpType.TANH)["onnx_import"]
        'Tanh'
    """
    kind = _op_type(op)
    cells = _ROWS.get(kind.value)
    if cells is None or len(cells) != len(NAMES):
        raise NgraphError(f"catalog: expected a row of {len(NAMES)} cells for {kind.value}, received "
                          f"{'none' if cells is None else len(cells)}; hint: {_row_hint(kind)}")
    return dict(zip(NAMES, cells))


def _kind_reason(op: OpType, capability: str) -> str | None:
    """Why ``op`` lacks ``capability`` when its kind says it."""
    if capability == "decomposition":
        return "every backend has its kernel: none needs a rule"
    if capability == "gradient" and op in OpGroup.COMPILED:
        return "compiler-made, after autodiff"
    if capability in ("numba", "cuda") and op not in OpGroup.ELEMENTWISE:
        return "not element-wise: the shared kernel runs"
    if capability.startswith("onnx") and op in OpGroup.COMPILED:
        return "compiler-made: it never reaches an ONNX graph"
    if capability.startswith("onnx") and op in OpGroup.COLLECTIVE:
        return "distributed training: ONNX has no collectives"
    return None


def reason(op: OpType | str, capability: str) -> str | None:
    """Why ``op`` lacks ``capability``: its ``WHY_NOT`` entry, else the default for its kind (None: none given).

    Example:
        >>> reason("fused", "onnx_export")
        'compiler-made: it never reaches an ONNX graph'
    """
    kind = _op_type(op)
    for ops, why in WHY_NOT.get(capability, {}).items():
        if kind.value in ops.split():
            return why
    return _kind_reason(kind, capability)


# -- what the implementing tables say ---------------------------------------------------------------------


def _fast_paths(backend: str) -> frozenset[OpType]:
    from .transformers.registry import transformer_factory  # the class attributes only: no backend is built

    cls = transformer_factory(backend)
    return frozenset(cls.compiled_elementwise) | frozenset(cls.kernel_overrides)


def _onnx_names() -> set[str]:
    from .frontends.onnx.registry import supported_ops  # importing registers every converter (needs onnx)

    return set(supported_ops())


def _same_name(op: OpType, names: set[str]) -> str:
    """The registered ONNX operator spelled like ``op`` (``Tanh``, ``GatherND``, ``BitShift``), or ``"-"``."""
    return next((n for n in sorted(names) if n.lower() == op.value.replace("_", "")), "-")


def found(op: OpType, capability: str) -> str:
    """The cell the implementing table gives ``op`` (for ``onnx_import``: the same-named ONNX operator, if any).

    Example:
        >>> found(OpType.PLACEHOLDER, "kernel")
        'bound'
    """
    if capability == "inference":
        from .ir.infer import ARITY, INFER
        return "yes" if op in INFER and op in ARITY else "-"
    if capability == "kernel":
        from .transformers.kernels import BOUND_BY_EXECUTOR, KERNELS
        return "yes" if op in KERNELS else "bound" if op in BOUND_BY_EXECUTOR else "-"
    if capability == "gradient":
        from .autodiff import RULES
        return "yes" if op in RULES else "-"
    if capability == "decomposition":
        from .passes.decompose import DECOMPOSE
        return "yes" if any(op in (rule[0].ops or ()) for rule in DECOMPOSE.rules) else "-"
    if capability in ("numba", "cuda"):
        return "yes" if op in _fast_paths("numpy" if capability == "numba" else "cupy") else "-"
    if capability == "onnx_import":
        return _same_name(op, _onnx_names())
    if capability == "onnx_export":
        from .frontends.onnx.export_ops import CONVERTERS
        return "yes" if op in CONVERTERS else "-"
    raise NgraphError(f"catalog: expected a capability among {NAMES}, received {capability!r}")


def _row_hint(op: OpType) -> str:
    try:
        cells = [found(op, c) for c in NAMES]
    except ImportError:  # no onnx: the row without its ONNX cells
        cells = [found(op, c) if not c.startswith("onnx") else "?" for c in NAMES]
    return f"add the line `{op.value}  {'  '.join(cells)}` to ROWS in ngraph_core/catalog.py (what the tables say now)"


def check(op: OpType | str, capability: str) -> str | None:
    """What is wrong with ``op``'s ``capability`` cell (None: it agrees with the implementing table).

    The message names the op, the capability, the file to edit and the entry to add there (``hint:``).

    Example:
        >>> check("tanh", "numba") is None
        True
    """
    kind = _op_type(op)
    what = f"catalog: {kind.value}, {capability}"
    try:
        cell = capabilities(kind)[capability]
    except NgraphError as exc:
        return f"{what}: {exc}"
    cap = _BY_NAME[capability]
    add = f"in {cap.where}, add {cap.add.format(OP=kind.name, op=kind.value)}"
    in_row = f"{kind.value}'s {capability} cell of ROWS in ngraph_core/catalog.py"
    if cell == "-" and reason(kind, capability) is None:
        return (f"{what}: says '-' without a reason; hint: {add}, or say why not in "
                f"WHY_NOT[{capability!r}] in ngraph_core/catalog.py")
    if cell != "-" and any(kind.value in ops.split() for ops in WHY_NOT.get(capability, {})):
        return f"{what}: says {cell!r} but WHY_NOT[{capability!r}] gives a reason it lacks it; hint: drop the reason"
    if capability == "onnx_import":
        return _check_import(kind, cell, what, add, in_row)
    actual = found(kind, capability)
    if cell == actual:
        return None
    if actual == "-":
        return f"{what}: the catalog says {cell!r}, but {cap.where} lacks it; hint: {add}, or write - in {in_row}"
    return (f"{what}: {cap.where} has it ({actual!r}), but the catalog says {cell!r}; hint: write {actual} in "
            f"{in_row} (and drop its WHY_NOT reason)")


def _check_import(op: OpType, cell: str, what: str, add: str, in_row: str) -> str | None:
    registered = _onnx_names()
    listed = {name for cells in _ROWS.values() if len(cells) == len(NAMES)
              for name in cells[NAMES.index("onnx_import")].split(",") if name != "-"}
    unknown = [n for n in cell.split(",") if n != "-" and n not in registered]
    if unknown:
        return (f"{what}: names {unknown}, which the ONNX importer has no converter for; hint: {add}, or drop "
                f"the name from {in_row}")
    same = _same_name(op, registered)
    if same != "-" and same not in listed:
        return (f"{what}: the ONNX importer converts {same!r}, which no row lists; hint: write {same} in {in_row} "
                "(or in the onnx_import cell of the op it imports as)")
    return None


def table() -> str:
    """The whole catalog as Markdown: the op x capability matrix, then why each ``-`` is one.

    Example:
        >>> print(table().splitlines()[0])
        | op | kind | inference | kernel | gradient | decomposition | numba | cuda | onnx_import | onnx_export |
    """
    kinds = ("LEAF", "RANDOM", "UNARY", "BINARY", "COMPARISON", "TERNARY", "REDUCE", "MOVEMENT", "CONTRACTION",
             "NN", "CONTROL", "COLLECTIVE", "COMPILED")
    lines = [f"| op | kind | {' | '.join(NAMES)} |", "|---" * (len(NAMES) + 2) + "|"]
    for op in OpType:
        kind = next(k.lower() for k in kinds if op in getattr(OpGroup, k))
        row = capabilities(op)
        lines.append(f"| `{op.value}` | {kind} | " + " | ".join(row[c].replace(",", ", ") for c in NAMES) + " |")
    lines += ["", "### Why not", ""]
    for capability in NAMES:
        by_reason: dict[str, list[str]] = {}
        for op in OpType:
            if capabilities(op)[capability] == "-":
                by_reason.setdefault(reason(op, capability) or "(no reason given)", []).append(f"`{op.value}`")
        if by_reason:
            lines += [f"**{capability}**", ""]
            # a long list of the same kind reason reads as a count: the matrix above names them
            lines += [f"- {', '.join(ops) if len(ops) <= 12 else f'the {len(ops)} other ops'}: {why}"
                      for why, ops in sorted(by_reason.items(), key=lambda item: len(item[1]))]
            lines.append("")
    return "\n".join(lines).rstrip() + "\n"
