"""neon training on another backend agrees with the NumPy reference, step by step (issue 14).

Each case builds the same model twice from the same initializer seed, trains it for a few
steps with ``Model.fit`` on the NumPy transformer and on the backend under test, and compares
the cost of every step and every variable at the end (weights, biases, BatchNorm running
averages). In float64 the two must agree to ~1e-8 relative: the backends run the same plan
with the same kernels, so only the array library's own reduction order may differ.

Backends:

* ``cupy`` (marked ``gpu``): the CuPy transformer on a GPU; skipped, with the reason, elsewhere.
* ``cupy_graphs`` (marked ``gpu``): the same with ``cuda_graphs=True``: from the second step on,
  each training step is one replayed CUDA graph (CTC's host-side label checks keep eager).
* ``cupy_surface``: a CPU transformer (``tests/ngraph_core/transformers/cupy_surface.py``) that
  runs the kernels on NumPy but fails on any array-module call CuPy 14 does not have, so a
  kernel reaching outside CuPy's API is caught on a machine without a GPU.
"""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from neon.activations import Softmax
from neon.callbacks import Callback
from neon.costs import CTC, CrossEntropyMulti, pack_ctc_targets
from neon.data import ArrayIterator, SequenceIterator
from neon.initializers import Constant, set_seed
from neon.layers import LSTM, Affine, BatchNorm, BiRNN, Conv, Pool
from neon.model import Model
from neon.optimizers import GradientDescentMomentum

SURFACE_DIR = Path(__file__).resolve().parents[1] / "ngraph_core" / "transformers"
BACKENDS = [pytest.param("cupy", marks=pytest.mark.gpu), pytest.param("cupy_graphs", marks=pytest.mark.gpu),
            "cupy_surface"]


@pytest.fixture(scope="module")
def surface_registered() -> bool:
    """Register the ``cupy_surface`` transformer from tests/ngraph_core/transformers (once per module)."""
    if str(SURFACE_DIR) not in sys.path:
        sys.path.insert(0, str(SURFACE_DIR))
    try:
        surface = importlib.import_module("cupy_surface")
    except ImportError as exc:
        pytest.skip(f"cupy_surface transformer not available ({exc}); it lives in {SURFACE_DIR / 'cupy_surface.py'}")
    surface.register()
    return True


@pytest.fixture(params=BACKENDS)
def backend(request: pytest.FixtureRequest) -> str:
    """The backend under test; ``cupy_surface`` is registered on first use."""
    if request.param == "cupy_surface":
        request.getfixturevalue("surface_registered")
    if request.param == "cupy_graphs":
        from ngraph_core.transformers import register_transformer
        from ngraph_core.transformers.cupy import CupyTransformer

        register_transformer("cupy_graphs", lambda **options: CupyTransformer(cuda_graphs=True, **options))
    return request.param


class StepCosts(Callback):
    """Records the cost of every training step (``fit``'s history keeps only epoch means)."""

    def __init__(self) -> None:
        self.costs: list[float] = []

    def on_minibatch_end(self, epoch: int, minibatch: int, logs: dict[str, Any]) -> None:
        self.costs.append(float(logs["cost"]))


def train(layers: Callable[[], list], data: Callable[[], Any], cost: Any, optimizer: Callable[[], Any],
          epochs: int, backend: str, float_dtype: str) -> tuple[list[float], list[np.ndarray]]:
    """Fit a fresh model (initializer seed 0) on ``backend``: (cost per step, every variable's final value)."""
    set_seed(0)
    model = Model(layers(), backend=backend, float_dtype=float_dtype)
    steps = StepCosts()
    model.fit(data(), cost, optimizer(), epochs, callbacks=[steps], progress=False)
    values = [model.transformer.read_variable(v) for v in model.variables]
    model.close()
    return steps.costs, values


def assert_same_training(case: tuple, backend: str, float_dtype: str = "float64", rtol: float = 1e-8,
                         atol: float = 1e-10) -> None:
    """The case trained on NumPy and on ``backend`` gives the same per-step costs and final variables."""
    ref_costs, ref_values = train(*case, backend="numpy", float_dtype=float_dtype)
    costs, values = train(*case, backend=backend, float_dtype=float_dtype)
    assert len(ref_costs) >= 3 and all(np.isfinite(ref_costs)), ref_costs
    assert ref_costs[-1] != ref_costs[0]  # the weights moved: the comparison is not of untrained models
    np.testing.assert_allclose(costs, ref_costs, rtol=rtol, atol=atol, err_msg=f"per-step costs on {backend}")
    assert len(values) == len(ref_values)
    for i, (got, want) in enumerate(zip(values, ref_values, strict=True)):
        assert got.shape == want.shape and got.dtype == want.dtype, (i, got.shape, want.shape, got.dtype)
        np.testing.assert_allclose(got, want, rtol=rtol, atol=atol, err_msg=f"variable {i} on {backend}")


def mlp_case() -> tuple:
    """Affine+ReLU, Affine+softmax on 48 samples of 10 features, batch 16, SGD momentum: 2 epochs = 6 steps."""
    rng = np.random.default_rng(0)
    X, y = rng.standard_normal((48, 10)), rng.integers(0, 4, 48)
    return (lambda: [Affine(16, bias=Constant(0.1), activation="relu"),
                     Affine(4, bias=Constant(0), activation=Softmax())],
            lambda: ArrayIterator(X, y, nclass=4, batch_size=16),
            CrossEntropyMulti(), lambda: GradientDescentMomentum(0.1, 0.9), 2)


def cnn_case() -> tuple:
    """Conv(3x3, 4)+BatchNorm+ReLU, max pool, Affine+softmax on 2x8x8 images, batch 8: 4 steps."""
    rng = np.random.default_rng(1)
    X, y = rng.standard_normal((16, 2, 8, 8)), rng.integers(0, 3, 16)
    return (lambda: [Conv((3, 3, 4), padding=1, activation="relu", batch_norm=True), Pool(2),
                     Conv((3, 3, 4), padding=1), BatchNorm(), Pool(2, op="avg"),
                     Affine(3, bias=Constant(0), activation=Softmax())],
            lambda: ArrayIterator(X, y, nclass=3, batch_size=8),
            CrossEntropyMulti(), lambda: GradientDescentMomentum(0.05, 0.9, wdecay=1e-3), 2)


def sign_sequences(n: int, seed: int) -> tuple[list[np.ndarray], np.ndarray]:
    """Sequences of 3-D frames, 3 to 7 steps; the label is the sign of the first feature's sum."""
    rng = np.random.default_rng(seed)
    seqs = [rng.standard_normal((int(rng.integers(3, 8)), 3)) for _ in range(n)]
    return seqs, np.array([int(s[:, 0].sum() > 0) for s in seqs])


def lstm_case() -> tuple:
    """LSTM(6) over variable-length frame sequences (masked past each length), Affine+softmax: 4 steps."""
    seqs, y = sign_sequences(16, seed=2)
    return (lambda: [LSTM(6), Affine(2, bias=Constant(0), activation=Softmax())],
            lambda: SequenceIterator(seqs, y, nclass=2, batch_size=8),
            CrossEntropyMulti(), lambda: GradientDescentMomentum(0.1, 0.9), 2)


def ctc_case() -> tuple:
    """BiRNN(5) per frame, Affine(4) logits, the CTC cost on packed label sequences: 4 steps."""
    rng = np.random.default_rng(3)
    labels = [list(rng.integers(1, 4, int(rng.integers(1, 3)))) for _ in range(16)]
    seqs = [rng.standard_normal((int(rng.integers(5, 9)), 4)) for _ in labels]
    targets = pack_ctc_targets(labels, [len(s) for s in seqs])
    return (lambda: [BiRNN(5, return_sequence=True), Affine(4)],
            lambda: SequenceIterator(seqs, targets, batch_size=8),
            CTC(blank=0), lambda: GradientDescentMomentum(0.05, 0.9), 2)


CASES = {"mlp": mlp_case, "cnn": cnn_case, "lstm": lstm_case, "ctc": ctc_case}


@pytest.mark.parametrize("model", sorted(CASES))
def test_float64_training_matches_numpy(model: str, backend: str) -> None:
    assert_same_training(CASES[model](), backend)


def test_float32_training_matches_numpy(backend: str) -> None:
    """float32 (the default): the GPU's BLAS and reductions round differently, so a looser bar."""
    assert_same_training(mlp_case(), backend, float_dtype="float32", rtol=2e-4, atol=1e-5)
    assert_same_training(cnn_case(), backend, float_dtype="float32", rtol=2e-3, atol=1e-4)


def test_the_reference_is_deterministic() -> None:
    """Two NumPy runs agree exactly: any difference found above comes from the backend, not the test."""
    case = mlp_case()
    (c1, v1), (c2, v2) = (train(*case, backend="numpy", float_dtype="float64") for _ in range(2))
    assert c1 == c2
    for a, b in zip(v1, v2, strict=True):
        np.testing.assert_array_equal(a, b)


@pytest.mark.parametrize("model", ["mlp", "cnn", "lstm"])
def test_training_reads_nothing_back_from_the_device(model: str, surface_registered: bool) -> None:
    """Host <-> device copies only at computation boundaries: training these models on the CuPy-surface
    checker never reads a device value on the host inside a plan (no ``get``, ``item``, ``bool`` of an
    array...): feeds go in, results come out, nothing else crosses (a GPU would sync at each read)."""
    import cupy_surface

    case = CASES[model]()
    before = cupy_surface.HOST_READS[0]
    costs, _ = train(*case, backend="cupy_surface", float_dtype="float32")
    assert len(costs) >= 3
    assert cupy_surface.HOST_READS[0] == before, f"{cupy_surface.HOST_READS[0] - before} host reads in {model}"


def test_ctc_reads_its_lengths_on_the_host(surface_registered: bool) -> None:
    """The exception, stated: the shared CTC kernel checks labels and lengths on the host (typed errors
    for bad data), so each CTC call reads device values; the counter sees it (it is not blind)."""
    import cupy_surface

    before = cupy_surface.HOST_READS[0]
    train(*ctc_case(), backend="cupy_surface", float_dtype="float32")
    assert cupy_surface.HOST_READS[0] > before
