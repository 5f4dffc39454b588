"""Linearization: the order in which a computation's ops run (an analysis: graph -> list).

Rules (documented for users in ``api/control.py``):

1. An op runs after its sources.
2. ``sequential([s1, ..., sk])``: the ops only ``s_i`` needs (not needed by an
   earlier element) run after ``s_(i-1)`` — a control dependency.
3. An ``assign`` to a variable runs after every op that reads the variable's old value
   (reads it, or a view of it, without depending on that assign) — an anti-dependency.
   So gradients read the weights from before the update, and assignments run in the
   depth-first order of the results (a ``doall``'s in list order).

Under rule 3 each update runs as soon as its gradient is ready, so its temporaries die
early (this is what keeps a training step's arena small). When anti-dependencies form a
cycle — ``doall([assign(a, b), assign(b, a)])`` reads each variable before the other's
assign — the order falls back to *phases*: every op that does not depend on an assign
first, then the rest, and the executor copies the early values a late op would
otherwise see overwritten (``snapshot_reads``).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from ..errors import NgraphError
from ..ir import Op, OpGroup, OpType, format_op, toposort

Deps = Callable[[Op], Sequence[Op]]


class OrderCycle(NgraphError):
    """The ordering constraints of a graph contradict each other."""


def control_dependencies(ops: Sequence[Op]) -> dict[Op, list[Op]]:
    """For each op with one, the ops that must run before it besides its sources (rule 2)."""
    control: dict[Op, list[Op]] = {}
    for op in ops:
        if op.op is not OpType.SEQUENTIAL:
            continue
        seen = set(toposort([op.src[0]]))
        for i, cur in enumerate(op.src[1:], start=1):
            for o in toposort([cur]):
                if o in seen:
                    continue
                seen.add(o)
                if o.src:
                    # after every earlier element, not just the previous one: a leaf or an
                    # already computed element must not break the chain
                    control.setdefault(o, []).extend(op.src[:i])
    return control


def _depth_first(results: Sequence[Op], deps: Deps) -> list[Op]:
    """Ops in depth-first post-order over ``deps``; raises ``OrderCycle`` on a cycle."""
    order: list[Op] = []
    placed: set[Op] = set()
    started: set[Op] = set()
    stack = [(r, 0) for r in reversed(results)]
    while stack:
        op, i = stack.pop()
        if op in placed:
            continue
        if i == 0:
            if op in started:  # its own frame is still below: it depends on itself
                raise OrderCycle(f"ordering cycle through {format_op(op)}")
            started.add(op)
        d = deps(op)
        if i < len(d):
            stack.append((op, i + 1))
            stack.append((d[i], 0))
        else:
            placed.add(op)
            order.append(op)
    return order


def anti_dependencies(order: Sequence[Op], deps: Deps) -> dict[Op, list[Op]]:
    """For each ``assign``, the ops that must run first: readers of its variable's old value
    (rule 3), and the earlier assigns to the same variable (they keep their order)."""
    bit: dict[Op, int] = {}
    after: dict[Op, int] = {}  # bitmask of the assigns each op depends on
    readers: dict[Op, list[Op]] = {}
    for op in order:
        mask = 0
        for d in deps(op):
            mask |= after[d] | bit.get(d, 0)
        after[op] = mask
        if op.op is OpType.ASSIGN:
            bit[op] = 1 << len(bit)
        for s in op.src[1:] if op.op is OpType.ASSIGN else op.src:
            var = viewed_variable(s)
            if var is not None and s.op is not OpType.ASSIGN:
                readers.setdefault(var, []).append(op)
    earlier: dict[Op, list[Op]] = {}
    for a in bit:
        earlier.setdefault(a.src[0], []).append(a)
    return {a: [r for r in readers.get(a.src[0], ()) if r is not a and not after[r] & bit[a]]
            + [e for e in earlier[a.src[0]] if bit[e] < bit[a]] for a in bit}


def linearize(results: Sequence[Op], control: dict[Op, list[Op]] | None = None) -> list[Op]:
    """Every op the ``results`` need, in execution order (see the module docstring).

    Raises:
        NgraphError: ``sequential`` orders that contradict each other.
    """
    control = control_dependencies(toposort(results)) if control is None else control

    def deps(op: Op) -> tuple[Op, ...]:
        return op.src + tuple(control.get(op, ()))

    try:
        order = _depth_first(results, deps)
    except OrderCycle as exc:
        raise NgraphError(
            f"linearize: the sequential orders of this graph contradict each other ({exc}); "
            "hint: one sequential([a, b]) and another sequential([b, a]) cannot both hold"
        ) from None
    anti = anti_dependencies(order, deps)
    try:
        return _depth_first(results, lambda op: deps(op) + tuple(anti.get(op, ())))
    except OrderCycle:
        pass
    # phases: ops that do not depend on an assign, then the rest (early ops never depend on late ones)
    late: set[Op] = set()
    for op in order:
        if op.op is OpType.ASSIGN or any(d in late for d in deps(op)):
            late.add(op)
    return [op for op in order if op not in late] + [op for op in order if op in late]


def viewed_variable(op: Op) -> Op | None:
    """The variable whose storage ``op``'s value may share (the variable itself, or a view of it)."""
    while op.op in OpGroup.VIEW or op.op in (OpType.VARIABLE, OpType.ASSIGN):
        if op.op is OpType.VARIABLE:
            return op
        op = op.src[-1] if op.op is OpType.SEQUENTIAL else op.src[0]
    return None


def snapshot_reads(order: Sequence[Op], control: dict[Op, list[Op]]) -> set[Op]:
    """Early values that a late op reads after an assign overwrote the variable they view.

    By rule 3 such a value means the variable *before* the update (``doall([assign(a, b),
    assign(b, a)])`` swaps), unless the reader is ordered after that assign by data or by
    ``sequential`` (then it means the new contents). The executor copies these values
    when they are computed, for their late readers.
    """
    after: dict[Op, set[Op]] = {}  # the assigns each op is ordered after
    assigns_so_far: list[Op] = []
    late = False
    needed: set[Op] = set()
    for op in order:
        deps = op.src + tuple(control.get(op, ()))
        after[op] = set().union(*(after[d] | ({d} if d.op is OpType.ASSIGN else set()) for d in deps)) if deps \
            else set()
        late = late or op.op is OpType.ASSIGN
        if late:
            for s in op.src[1:] if op.op is OpType.ASSIGN else op.src:
                var = viewed_variable(s)
                if var is None or s.op is OpType.ASSIGN:
                    continue
                if any(a.src[0] is var and a not in after[op] for a in assigns_so_far):
                    needed.add(s)
        if op.op is OpType.ASSIGN:
            assigns_so_far.append(op)
    return needed


def values_into_variables(order: Sequence[Op], results: Sequence[Op],
                          may_run_in_place: Callable[[Op], bool]) -> dict[Op, Op]:
    """``assign`` values that may be computed straight into their variable's storage: value -> variable.

    A value qualifies when it runs just before its assign (so every reader of the old
    contents has already run), nothing else reads it, it is not a result, it owns a
    buffer, and it reads the variable only position by position (``may_run_in_place``)
    and only directly — never through a view such as a transpose. The assign then has
    nothing left to copy.
    """
    users: dict[Op, int] = {}
    for op in order:
        for s in set(op.src):
            users[s] = users.get(s, 0) + 1
    results = set(results)
    into: dict[Op, Op] = {}
    for prev, op in zip(order, order[1:]):
        if op.op is not OpType.ASSIGN or op.src[1] is not prev:
            continue
        var, value = op.src
        if value in results or users.get(value) != 1 or value.op in OpGroup.NO_BUFFER or value.dtype != var.dtype:
            continue
        reads = [s for s in value.src if viewed_variable(s) is var]
        if reads and (not may_run_in_place(value) or any(s is not var for s in reads)):
            continue
        into[value] = var
    return into
