"""``FusedProgram``: the ``arg`` of a ``fused`` op — a straight-line element-wise program.

The fusion pass turns a chain of element-wise ops into one ``fused`` op whose
sources are the chain's external inputs. Each step applies one element-wise
``OpType`` to references:

* ``("in", i)``: the fused op's i-th source (sources 0 and 1 are the head's operands, if any);
* ``("t", j)``: the value of step j;
* ``("c", value)``: a scalar constant;
* ``("d",)``: the value of the optional head (sources 0 and 1): a ``dot`` product, or a
  ``conv`` of activation 0 by filter 1 with the program's ``conv`` arg.

The last step is the op's value. Programs are hashable, so equal fusions hash-cons.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from .codec import CompilerMadeArg, wrong_arg
from .conv import ConvArg
from .ops import OpType

if TYPE_CHECKING:
    from .node import Op

Ref = tuple


@dataclass(frozen=True)
class FusedProgram(CompilerMadeArg):
    """A fused element-wise program (see the module docstring).

    Attributes:
        steps: ``(OpType, (ref, ...))`` per step.
        dot: True when sources 0 and 1 are ``dot`` operands whose product is ``("d",)``.
        conv: the convolution's arg when sources 0 and 1 are a ``conv``'s activation and
            filter whose output is ``("d",)`` (a conv head).
    """

    steps: tuple[tuple[OpType, tuple[Ref, ...]], ...]
    dot: bool = False
    conv: ConvArg | None = None

    @property
    def head(self) -> str | None:
        """The head's kind: ``"dot"``, ``"conv"``, or None (a purely element-wise program)."""
        return "dot" if self.dot else "conv" if self.conv is not None else None

    def expression(self) -> str:
        """The program as one readable expression, e.g. ``relu(add(conv(x0, x1), x2))`` (xi: source i)."""
        texts: list[str] = []
        for kind, refs in self.steps:
            args = ", ".join(_ref_text(r, texts, self.head) for r in refs)
            texts.append(f"{kind.value}({args})")
        return texts[-1] if texts else ""

    def __repr__(self) -> str:
        return self.expression()

    # -- as an op's arg (the protocol of ir/args.py): checked, never written ---------------------
    @staticmethod
    def check(op: Op) -> str | None:
        """A message when ``op.arg`` is not a FusedProgram, else None."""
        return None if isinstance(op.arg, FusedProgram) else wrong_arg(op, "a FusedProgram")


def _ref_text(ref: Ref, texts: list[str], head: str | None) -> str:
    tag = ref[0]
    if tag == "in":
        return f"x{ref[1]}"
    if tag == "t":
        return texts[ref[1]]
    if tag == "c":
        return f"{ref[1]:g}"
    return f"{head}(x0, x1)"
