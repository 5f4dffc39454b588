"""The layout of an exported model's inputs and outputs: ONNX's batch-first convention, or ours.

Inside a graph the batch axis ``N`` is last (``[F, N]``, ``[C, H, W, N]``, ``[F, REC, N]``);
onnxruntime users, and the models other exporters write, put it first. ``layout="onnx"`` (the
default of ``export``) writes every graph input and output that has ``N`` batch first, then the
recurrent axis, then the other axes in the graph's order; a Transpose at each input brings it
to the graph's order and one at each output takes it back, so the graph between is as built:

    [F, N]          -> [N, F]
    [C, H, W, N]    -> [N, C, H, W]
    [F, REC, N]     -> [N, T, F]   frames, as torch.onnx exports an nn.LSTM(batch_first=True)
    [REC, N]        -> [N, T]      token ids, as torch.onnx exports an embedding model
    [N] or [C]      -> unchanged   (valid lengths; tensors without a batch axis)

Sequences are batch first too (not ONNX's ``LSTM``-op ``[T, N, F]``): one rule for every input,
and the layout of the token-id and ``batch_first`` models users feed onnxruntime. ``layout=
"native"`` writes the graph's own order (batch last) with no Transposes. The choice is recorded
in the model's metadata (``ngraph.layout``), which ``ngraph run`` reads to word its errors.

Example:
    >>> onnx_order(Axes([C, H, W, N]))
    [3, 0, 1, 2]
"""

from __future__ import annotations

from typing import Any

from ...ir import Axes

__all__ = ["LAYOUTS", "LAYOUT_KEY", "describe_layout", "io_order", "model_layout", "onnx_order"]

LAYOUTS = ("onnx", "native")
LAYOUT_KEY = "ngraph.layout"
"""The model metadata key holding the layout an ngraph export wrote (``"onnx"`` or ``"native"``)."""


def onnx_order(axes: Axes) -> list[int]:
    """Positions of ``axes`` in ONNX order: the batch axis, the recurrent axis, then the rest as they are.

    Example:
        >>> onnx_order(Axes([F, REC, N]))  # [N, T, F]
        [2, 1, 0]
    """
    if axes.batch_axis is None:
        return list(range(len(axes)))
    lead = [axes.index(a) for a in (axes.batch_axis, axes.recurrent_axis) if a is not None]
    return lead + [i for i in range(len(axes)) if i not in lead]


def io_order(axes: Axes, layout: str) -> list[int]:
    """Positions of ``axes`` as a graph input or output written in ``layout`` (``"onnx"`` or ``"native"``)."""
    return onnx_order(axes) if layout == "onnx" else list(range(len(axes)))


def model_layout(model: Any) -> str | None:
    """The layout an ngraph export recorded in ``model`` (an ``onnx.ModelProto``), or None for other models."""
    found = next((p.value for p in model.metadata_props if p.key == LAYOUT_KEY), None)
    return found if found in LAYOUTS else None


def describe_layout(layout: str | None) -> str:
    """Words for a layout, as errors say it.

    Example:
        >>> describe_layout("onnx")
        'batch first, ONNX layout'
    """
    return {"onnx": "batch first, ONNX layout", "native": "batch last, ngraph's native layout"}.get(
        layout or "", "as the model declares it")
