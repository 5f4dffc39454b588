"""Data-movement converters on a model exported by PyTorch: outputs equal PyTorch's.

``torch.onnx.export`` writes slicing, chunking, padding, interpolation, pixel shuffle,
index_select, topk, cumsum, tril, repeat and expand as ONNX Slice/Split/Pad/Resize/
DepthToSpace/Gather/TopK/CumSum/Trilu/Tile/Expand with shape arithmetic around them
(Shape -> Gather -> Concat), here with a dynamic batch dim: every output must match.
"""

from __future__ import annotations

import io
import warnings

import numpy as np
import pytest

torch = pytest.importorskip("torch")
F = torch.nn.functional

from ngraph_core.frontends.onnx import import_model  # noqa: E402


class Movement(torch.nn.Module):
    """One of each data-movement pattern PyTorch exports."""

    def forward(self, x, idx):
        a = x[:, 1:3, ::2]
        c0, c1 = torch.chunk(torch.cat([a, a.flip(1)], dim=1), 2, dim=2)
        values, positions = torch.topk(x.flatten(1), 3)
        return (c0, c1, F.pad(x, (1, 2, 2, 1), mode="reflect"), F.pad(x, (0, 1, 1, 0), value=-1.5),
                F.interpolate(x, scale_factor=2, mode="bilinear", align_corners=False),
                F.interpolate(x, size=(5, 7), mode="nearest"),
                F.interpolate(x, size=(3, 9), mode="bicubic", align_corners=True),
                F.pixel_shuffle(torch.cat([x, x], 1), 2), torch.index_select(x, 3, idx), values, positions,
                torch.cumsum(x, dim=-1), torch.tril(x, diagonal=1),
                x.repeat(1, 2, 1, 1).permute(0, 2, 3, 1).reshape(x.shape[0], -1), x[:, :1].expand(-1, 3, -1, -1))


@pytest.fixture(scope="module")
def exported() -> bytes:
    x, idx = torch.randn(2, 4, 6, 8), torch.tensor([7, 0, 3])
    buffer = io.BytesIO()
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        torch.onnx.export(Movement(), (x, idx), buffer, opset_version=17, dynamo=False, input_names=["x", "idx"],
                          dynamic_axes={"x": {0: "batch"}})
    return buffer.getvalue()


@pytest.mark.parametrize("batch", [1, 3])
def test_exported_movement_matches_pytorch(exported, batch):
    x, idx = torch.randn(batch, 4, 6, 8), torch.tensor([5, 5, 1])
    got = import_model(exported, dims={"batch": batch}).run({"x": x.numpy(), "idx": idx.numpy()})
    expected = [t.detach().numpy() for t in Movement()(x, idx)]
    assert len(got) == len(expected)
    for i, (g, e) in enumerate(zip(got, expected)):
        assert g.dtype == e.dtype and g.shape == e.shape, f"output {i}: {g.dtype}{g.shape} vs {e.dtype}{e.shape}"
        np.testing.assert_allclose(g, e, rtol=1e-5, atol=1e-5, err_msg=f"output {i}")
