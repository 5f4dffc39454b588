"""ResidualBlock: the layer helper, finite differences, PyTorch's basic block, ResNet-20's parameter count, errors."""

from __future__ import annotations

import numpy as np
import pytest
from layer_helper import (
    axis,
    check_layer_gradients,
    feature_major,
    random_input,
    random_weights,
    run_layer_test,
    torch_tensor,
)

import ngraph_core as ng
from neon import Sequential
from neon.initializers import Uniform
from neon.layers import Affine, Conv, GlobalAvgPool, LayerError, Pool, ResidualBlock, training_mode


def image(c: int, h: int, w: int, n: int = 2) -> list[ng.Axis]:
    return [axis("C", c), axis("H", h), axis("W", w), axis("N", n)]


@pytest.mark.parametrize("factory, input_axes, out_lengths", [
    (lambda: ResidualBlock.basic(3), image(3, 5, 4), (3, 5, 4, 2)),
    (lambda: ResidualBlock.basic(4, strides=2, shortcut="A"), image(2, 6, 5), (4, 3, 3, 2)),
    (lambda: ResidualBlock.basic(4, strides=2, shortcut="B"), image(2, 6, 5), (4, 3, 3, 2)),
    (lambda: ResidualBlock.basic(2, shortcut="C"), image(2, 4, 4), (2, 4, 4, 2)),
    (lambda: ResidualBlock([Conv((3, 3, 4), strides=2, padding=1, bias=0.0)], shortcut=[Pool(2), Conv((1, 1, 4))],
                           activation="tanh"), image(2, 6, 6), (4, 3, 3, 2)),
    (lambda: ResidualBlock([Conv((3, 3, 2), padding=1, activation="relu")], shortcut=[], activation=None),
     image(2, 3, 3), (2, 3, 3, 2)),
], ids=["identity", "option-A", "option-B", "option-C", "custom-shortcut", "empty-shortcut-no-activation"])
def test_run_layer_test(factory, input_axes, out_lengths) -> None:
    run_layer_test(factory, input_axes, out_lengths)


@pytest.mark.parametrize("shortcut", ["A", "B"])
def test_gradients_match_finite_differences(shortcut) -> None:
    def block() -> ResidualBlock:
        return ResidualBlock([Conv((3, 3, 3), strides=2, padding=1, init=Uniform(-1, 1), batch_norm=True,
                                   activation="tanh"),
                              Conv((2, 2, 3), padding="same", init=Uniform(-1, 1), bias=Uniform(-1, 1))],
                             shortcut=shortcut, activation="logistic")
    check_layer_gradients(block, image(2, 4, 3, n=3))


def test_output_takes_the_branch_axes_and_the_block_owns_every_variable() -> None:
    block = ResidualBlock.basic(8, strides=2, shortcut="B", name="res")
    y = block(ng.placeholder(image(4, 8, 8)))
    assert y.axes.names == (block.branch[-1].name, "H", "W", "N") and y.axes.lengths == (8, 4, 4, 2)
    kinds = [type(layer).__name__ for layer in block.sublayers]
    assert kinds == ["Conv", "Conv", "Conv", "Activation"] and block.projection.name == "Projection_0"
    assert len(block.trainable_variables) == 3 * 3  # W, gamma, beta per conv
    w = block.projection.filter.W
    assert w.axes.lengths == (4, 1, 1, 8) and tuple(e.name for e in w.meta.scope)[:2] == ("res", "Projection_0")


# -- against PyTorch: the basic block as the usual CIFAR implementations write it -------------------------

def _torch_block(torch, cin: int, cout: int, stride: int, option: str):
    nn = torch.nn

    class Block(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
            self.bn1 = nn.BatchNorm2d(cout, eps=1e-3)
            self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
            self.bn2 = nn.BatchNorm2d(cout, eps=1e-3)
            self.project = None
            if option == "B" and (stride != 1 or cin != cout):
                self.project = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False),
                                             nn.BatchNorm2d(cout, eps=1e-3))

        def shortcut(self, x):
            if self.project is not None:
                return self.project(x)
            if stride == 1 and cin == cout:
                return x
            # option A: subsample, zero channels appended (He et al.; some implementations split them around)
            return nn.functional.pad(x[:, :, ::stride, ::stride], (0, 0, 0, 0, 0, cout - cin))

        def forward(self, x):
            h = torch.relu(self.bn1(self.conv1(x)))
            return torch.relu(self.bn2(self.conv2(h)) + self.shortcut(x))

    return Block().double()


@pytest.mark.parametrize("cin, cout, stride, shortcut", [(3, 3, 1, "A"), (2, 4, 2, "A"), (3, 6, 2, "B"),
                                                         (4, 4, 1, "B")],
                         ids=["identity", "A", "B", "B-identity"])
def test_basic_block_matches_torch(cin, cout, stride, shortcut) -> None:
    torch = pytest.importorskip("torch")
    x_axes = image(cin, 7, 6, n=3)
    block = ResidualBlock.basic(cout, strides=stride, shortcut=shortcut, init=Uniform(-0.5, 0.5))
    x = ng.placeholder(x_axes)
    with training_mode(True):
        out = block(x)
    R = random_weights(out.axes)
    filters = [c.filter.W for c in block.branch] + ([block.projection.filter.W] if block.projection else [])
    grads = ng.gradients(ng.sum(out * ng.constant(R, out.axes)), [x, *filters])
    x_value = random_input(x_axes)
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        weights = [t.read_variable(w) for w in filters]
        y, gx, *gw = t.computation([out, *grads], x)(x_value)

    module = _torch_block(torch, cin, cout, stride, shortcut)
    convs = [module.conv1, module.conv2] + ([module.project[0]] if module.project is not None else [])
    assert len(convs) == len(weights)
    for conv, w in zip(convs, weights):
        conv.weight = torch.nn.Parameter(torch.tensor(np.moveaxis(w, -1, 0).copy()))
    xt = torch_tensor(x_value, requires_grad=True)
    yt = module.train()(xt)
    (yt * torch_tensor(R)).sum().backward()
    np.testing.assert_allclose(y, feature_major(yt), rtol=1e-8, atol=1e-10)
    np.testing.assert_allclose(gx, feature_major(xt.grad), rtol=1e-7, atol=1e-9)
    for conv, g in zip(convs, gw):
        np.testing.assert_allclose(g, np.moveaxis(conv.weight.grad.numpy(), 0, -1), rtol=1e-7, atol=1e-9)


# -- ResNet-20 (He et al. 2016, section 4.2): 0.27M parameters -----------------------------------------------

def resnet20(shortcut: str) -> Sequential:
    """conv3x3(16)-BN-ReLU, 3 stages x 3 basic blocks (16, 32, 64 channels), global average pool, Affine(10)."""
    layers = [Conv((3, 3, 16), padding=1, batch_norm=True, activation="relu")]
    for stage, nout in enumerate((16, 32, 64)):
        layers += [ResidualBlock.basic(nout, strides=2 if stage and not i else 1, shortcut=shortcut) for i in range(3)]
    return Sequential([*layers, GlobalAvgPool(), Affine(10, bias=0.0, activation="softmax")])


def _torch_resnet20(torch, option: str):
    nn = torch.nn
    layers = [nn.Conv2d(3, 16, 3, padding=1, bias=False), nn.BatchNorm2d(16), nn.ReLU()]
    cin = 16
    for stage, cout in enumerate((16, 32, 64)):
        for i in range(3):
            layers.append(_torch_block(torch, cin, cout, 2 if stage and not i else 1, option))
            cin = cout
    return nn.Sequential(*layers, nn.AdaptiveAvgPool2d(1), nn.Flatten(), nn.Linear(64, 10))


# convs without bias: 432 + 6 * 2,304 + (4,608 + 5 * 9,216) + (18,432 + 5 * 36,864) = 267,696;
# BN gamma and beta: 2 * (16 + 6 * 16 + 6 * 32 + 6 * 64) = 1,376; Affine(10) with bias: 650.
# Option B adds two 1x1 projections with BN: 16 * 32 + 64 + 32 * 64 + 128 = 2,752.
@pytest.mark.parametrize("shortcut, expected", [("A", 269_722), ("B", 272_474)])
def test_resnet20_has_the_papers_parameter_count(shortcut, expected) -> None:
    net = resnet20(shortcut)
    with training_mode(True):
        y = net(ng.placeholder(image(3, 32, 32, n=2)))
    assert y.axes.lengths == (10, 2)
    count = sum(v.axes.size for v in net.trainable_variables)
    assert count == expected
    assert round(count / 1e6, 2) == 0.27  # "0.27M" in He et al.'s Table 6
    torch = pytest.importorskip("torch")
    assert sum(p.numel() for p in _torch_resnet20(torch, shortcut).parameters()) == expected


# -- errors ---------------------------------------------------------------------------------------------------

@pytest.mark.parametrize("make, pattern", [
    (lambda: ResidualBlock([Conv((3, 3, 2))], shortcut="D"), r"expected shortcut to be one of \('A', 'B', 'C'\).*'D'"),
    (lambda: ResidualBlock([]), r"expected a branch with at least one layer"),
    (lambda: ResidualBlock(["conv"]), r"expected branch as a list of layers"),
    (lambda: ResidualBlock([Conv((3, 3, 2))], shortcut=[3]), r"expected shortcut as a list of layers"),
])
def test_bad_configs_raise_layer_error(make, pattern) -> None:
    with pytest.raises(LayerError, match=pattern):
        make()


@pytest.mark.parametrize("make, x_axes, pattern", [
    (lambda: ResidualBlock([Conv((3, 3, 2), padding=1)], name="r"), image(4, 6, 6),
     r"r \(ResidualBlock\): expected a branch with at least the input's 4 channels.*received: 2 channels.*"
     r"hint: use shortcut='B'"),
    (lambda: ResidualBlock([Conv((3, 3, 4))]), image(4, 6, 6),
     r"expected a branch whose output lengths are the input's \(6, 6\) divided by a stride.*\(4, 4\).*hint"),
    (lambda: ResidualBlock([Conv((3, 3, 4), padding=1)]), [axis("F", 4), axis("N", 2)], r"expected an image"),
    (lambda: ResidualBlock([Conv((3, 3, 4), padding=1), GlobalAvgPool()]), image(4, 6, 6),
     r"expected a branch output of the input's rank 4.*received: \[Conv_\d+:4, N:2\]"),
    (lambda: ResidualBlock([Conv((3, 3, 4), padding=1)], shortcut=[Conv((1, 1, 3))]), image(4, 6, 6),
     r"expected a shortcut output of the branch output's lengths \[Conv_\d+:4, H:6, W:6, N:2\].*received.*hint"),
])
def test_bad_inputs_raise_layer_error(make, x_axes, pattern) -> None:
    with pytest.raises(LayerError, match=pattern):
        make()(ng.placeholder(x_axes))


# -- in a Model: fit, save, load ----------------------------------------------------------------------------

def test_a_small_resnet_fits_saves_and_loads(tmp_path) -> None:
    from neon.costs import CrossEntropyMulti
    from neon.data import ImageIterator, make_shapes_dataset
    from neon.initializers import set_seed
    from neon.model import Model
    from neon.optimizers import GradientDescentMomentum

    def small_resnet() -> Model:
        return Model([Conv((3, 3, 8), padding=1, batch_norm=True, activation="relu"), Pool(2),
                      ResidualBlock.basic(8), ResidualBlock.basic(16, strides=2, shortcut="B"),
                      ResidualBlock.basic(24, strides=2, shortcut="A"), GlobalAvgPool(),
                      Affine(10, bias=0.0, activation="softmax")])

    (X, y), (Xt, _) = make_shapes_dataset(96, 16, seed=1)
    train = ImageIterator(X, y, nclass=10, batch_size=32, shuffle=True, seed=0, normalize=True)
    set_seed(0)
    model = small_resnet()
    history = model.fit(train, CrossEntropyMulti(), GradientDescentMomentum(0.05, 0.9), 3, progress=False)
    assert history["train_cost"][-1] < history["train_cost"][0]
    path = tmp_path / "resnet.h5"
    model.save_params(path)
    fresh = small_resnet()
    fresh.load_params(path)
    images = ((Xt - train.mean[:, None, None]) / train.std[:, None, None]).astype(np.float32)
    np.testing.assert_array_equal(fresh.predict(images), model.predict(images))
