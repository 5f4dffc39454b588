"""``FusedProgram``: the ``arg`` of a ``fused`` op — a straight-line element-wise program.

The fusion pass turns a chain of element-wise ops into one ``fused`` op whose
sources are the chain's external inputs. Each step applies one element-wise
``OpType`` to references:

* ``("in", i)``: the fused op's i-th source (sources 0 and 1 are the ``dot`` operands, if any);
* ``("t", j)``: the value of step j;
* ``("c", value)``: a scalar constant;
* ``("d",)``: the product of the optional ``dot`` head (sources 0 and 1).

The last step is the op's value. Programs are hashable, so equal fusions hash-cons.
"""

from __future__ import annotations

from dataclasses import dataclass

from .ops import OpType

Ref = tuple


@dataclass(frozen=True)
class FusedProgram:
    """A fused element-wise program (see the module docstring).

    Attributes:
        steps: ``(OpType, (ref, ...))`` per step.
        dot: True when sources 0 and 1 are ``dot`` operands whose product is ``("d",)``.
    """

    steps: tuple[tuple[OpType, tuple[Ref, ...]], ...]
    dot: bool = False

    def expression(self) -> str:
        """The program as one readable expression, e.g. ``relu(add(dot(x0, x1), x2))`` (xi: source i)."""
        texts: list[str] = []
        for kind, refs in self.steps:
            args = ", ".join(_ref_text(r, texts) for r in refs)
            texts.append(f"{kind.value}({args})")
        return texts[-1] if texts else ""

    def __repr__(self) -> str:
        return self.expression()


def _ref_text(ref: Ref, texts: list[str]) -> str:
    tag = ref[0]
    if tag == "in":
        return f"x{ref[1]}"
    if tag == "t":
        return texts[ref[1]]
    if tag == "c":
        return f"{ref[1]:g}"
    return "dot(x0, x1)"
