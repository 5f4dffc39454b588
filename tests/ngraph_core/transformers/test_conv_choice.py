"""The measured convolution choice (``transformers/numpy/conv_choice.py``) and its one exception: a run of several
ranks never times, so every rank and every run takes the same kernel for a layer."""

from __future__ import annotations

import numpy as np
import pytest

import ngraph_core as ng
from ngraph_core.distributed import LocalCommunicator
from ngraph_core.transformers.numpy import conv_choice


class TwoRanks(LocalCommunicator):
    """Rank 0 of a world of two whose peer always holds the same values (the allreduce is the identity)."""

    def __init__(self) -> None:
        super().__init__(timeout=5.0)
        self.size = 2


@pytest.fixture(autouse=True)
def private_choices(tmp_path, monkeypatch):
    monkeypatch.setattr(conv_choice, "choices_path", lambda: tmp_path / "conv_choices.json")  # compiled kernels: shared
    monkeypatch.delenv("NG_CONV", raising=False)
    monkeypatch.setattr(conv_choice, "MEASURED", {})
    monkeypatch.setattr(conv_choice, "_DECIDED", {})
    monkeypatch.setattr(conv_choice, "_loaded", False)


def conv_step(communicator=None) -> list[np.ndarray]:
    """A 3x3 convolution's output and its data and filter gradients (each has a Winograd and an im2col kernel)."""
    rng = np.random.default_rng(0)
    C, H, W, N, K = (ng.make_axis(n, name) for n, name in ((4, "C"), (10, "H"), (10, "W"), (8, "N"), (6, "K")))
    x = ng.placeholder([C, H, W, N])
    w = ng.variable([C, ng.make_axis(3, "R"), ng.make_axis(3, "S"), K],
                    initial_value=rng.standard_normal((4, 3, 3, 6)).astype(np.float32))
    y = ng.convolution(x, w, padding=1)
    loss = ng.sum(y * y)
    with ng.transformers.make_transformer(communicator=communicator) as t:
        return [np.asarray(r) for r in t.computation([y, *ng.gradients(loss, [x, w])], x)(
            rng.standard_normal((4, 10, 10, 8)).astype(np.float32))]


def test_one_process_times_the_candidates():
    conv_step()
    assert {key.split("|")[0] for key in conv_choice._DECIDED} == {"conv", "bprop_data", "bprop_filter"}


def test_several_ranks_never_time_and_take_the_unmeasured_choice(monkeypatch):
    """Two ranks: no layer is timed, nothing is recorded, and every kernel is ``UNMEASURED_ORDER``'s first that
    applies (here Winograd everywhere), bit for bit, whatever the disk record says."""
    conv_choice.MEASURED.update({"poisoned": {"chosen": "im2col"}})  # a record is ignored, not read
    monkeypatch.setattr(conv_choice, "choose", lambda key, candidates: pytest.fail(f"timed {key} with ranks"))
    two_ranks = conv_step(TwoRanks())
    assert not conv_choice._DECIDED and not conv_choice.choices_path().exists()
    assert conv_choice.UNMEASURED_ORDER == ("winograd", "im2col")
    monkeypatch.setenv("NG_CONV", "winograd")
    for got, expected in zip(two_ranks, conv_step()):
        np.testing.assert_array_equal(got, expected)
