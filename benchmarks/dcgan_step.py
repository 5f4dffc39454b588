"""One DCGAN training step (issue 5): a discriminator update then a generator update, batch 64, 28x28 MNIST.

The networks are ``model_zoo.dcgan_mnist``'s (Radford et al. 2016 scaled to 28x28): G ``z(100) ->
Affine(6272)+BN+relu -> [128, 7, 7] -> Deconv 4x4/2 (64)+BN+relu -> Deconv 4x4/2 (1)+tanh``, D ``Conv
4x4/2 (64)+lrelu(0.2) -> Conv 4x4/2 (128)+BN+lrelu -> Affine(1)+sigmoid``, binary cross-entropy, Adam
(2e-4, beta_1=0.5) for each network. One step is:

* D step: ``BCE(D(x), 1) + BCE(D(G(z).detach()), 0)``, backward through D only, ``Adam`` on D;
* G step: fresh noise ``z'``, ``BCE(D(G(z')), 1)`` (non-saturating), backward through D and G,
  ``Adam`` on G only.

Sides, each timed in its own process by ``run.py``:

* ``ngraph``: ``neon.gan.GAN.train_step`` — two computations compiled by the NumPy transformer
  (the D step and the G step), noise drawn with NumPy and fed;
* ``torch``: the same networks in PyTorch eager on CPU (``nn.Linear``, ``nn.ConvTranspose2d``,
  ``nn.Conv2d``, ``nn.BatchNorm1d/2d`` with our eps 1e-3, ``BCELoss``, ``optim.Adam``), NCHW, the
  noise drawn as ours (NumPy, seed 0, D's batch then G's) and copied to the device.

Both sides start from the same weights (``reference_weights``: N(0, 0.02) drawn with NumPy in
PyTorch's layouts, written into ours), see the same batch of real MNIST digits (random images
when the MNIST subset is not installed) and the same noise, so their first losses agree to
float32 rounding. ``benchmarks/gpu.py`` runs the same builders on CuPy and CUDA (``backend=``,
``device=``).

Usage: ``python benchmarks/run.py dcgan_step --pairs 3 --threads 1 2``;
one side: ``python benchmarks/dcgan_step.py --side ngraph --steps 3 --warmup 1``.
"""

from __future__ import annotations

import os
import sys

from harness import Step, blas_info, child_main

BATCH, NOISE, LR, BETA_1 = 64, 100, 2e-4, 0.5
STEPS, WARMUP = 30, 5


def real_batch():
    """``(BATCH, 1, 28, 28)`` float32 digits in [-1, 1] (the MNIST subset, else uniform noise)."""
    import numpy as np

    try:
        from neon.data import load_mnist_subset

        (x, _), _ = load_mnist_subset()
        x = x[:BATCH] * 2.0 - 1.0
    except Exception:  # noqa: BLE001 - any missing data: the timing does not depend on the pixels
        x = np.random.default_rng(0).uniform(-1, 1, (BATCH, 784))
    return x.reshape(BATCH, 1, 28, 28).astype("float32")


def reference_weights() -> dict[str, object]:
    """The weights both sides start from, in PyTorch's layouts: N(0, 0.02), NumPy seed 0 (biases are zero).

    Keys: ``g_linear`` (6272, 100), ``g_deconv1`` (128, 64, 4, 4), ``g_deconv2`` (64, 1, 4, 4),
    ``d_conv1`` (64, 1, 4, 4), ``d_conv2`` (128, 64, 4, 4), ``d_linear`` (1, 6272).
    """
    import numpy as np

    rng = np.random.default_rng(0)
    shapes = {"g_linear": (128 * 7 * 7, NOISE), "g_deconv1": (128, 64, 4, 4), "g_deconv2": (64, 1, 4, 4),
              "d_conv1": (64, 1, 4, 4), "d_conv2": (128, 64, 4, 4), "d_linear": (1, 128 * 7 * 7)}
    return {name: rng.normal(0.0, 0.02, shape).astype("float32") for name, shape in shapes.items()}


def build_ngraph(threads: int, backend: str = "numpy") -> tuple[Step, str]:
    import numpy as np

    from model_zoo.dcgan_mnist import discriminator, generator
    from neon.gan import GAN
    from neon.initializers import set_seed
    from neon.optimizers import Adam

    set_seed(0)
    gan = GAN(generator(NOISE), discriminator(), noise_dim=NOISE, seed=0, backend=backend)
    gan.build((1, 28, 28))
    gan.set_optimizers(Adam(LR, beta_1=BETA_1, name="d_adam"), Adam(LR, beta_1=BETA_1, name="g_adam"))
    w, (g_linear, _, g_deconv1, g_deconv2), (d_conv1, d_conv2, d_linear) = \
        reference_weights(), gan.generator.layers, gan.discriminator.layers
    ours = {"g_linear": (g_linear.linear.W, None), "g_deconv1": (g_deconv1.filter.W, (1, 2, 3, 0)),
            "g_deconv2": (g_deconv2.filter.W, (1, 2, 3, 0)),  # (C, K, R, S) -> [K, R, S, C]
            "d_conv1": (d_conv1.filter.W, (1, 2, 3, 0)), "d_conv2": (d_conv2.filter.W, (1, 2, 3, 0)),  # -> [C, R, S, K]
            "d_linear": (d_linear.linear.W, None)}  # (1, 6272) -> [Out, C, H, W]: C-major, as nn.Flatten
    for name, (variable, order) in ours.items():
        value = w[name] if order is None else np.transpose(w[name], order)
        gan.transformer.write_variable(variable, np.ascontiguousarray(value.reshape(variable.axes.lengths)))
    x = np.ascontiguousarray(np.moveaxis(real_batch(), 0, -1))  # (C, H, W, N), as ArrayIterator yields
    gan.d_step_computation(BATCH), gan.g_step_computation(BATCH)  # compiled here; the first step is the timed one's
    return (lambda: gan.train_step(x)), f"ngraph_core {backend}, {blas_info()}"


def build_torch(threads: int, device: str = "cpu") -> tuple[Step, str]:
    import numpy as np
    import torch
    from torch import nn

    g = nn.Sequential(nn.Linear(NOISE, 128 * 7 * 7, bias=False), nn.BatchNorm1d(128 * 7 * 7, eps=1e-3), nn.ReLU(),
                      nn.Unflatten(1, (128, 7, 7)),
                      nn.ConvTranspose2d(128, 64, 4, 2, 1, bias=False), nn.BatchNorm2d(64, eps=1e-3), nn.ReLU(),
                      nn.ConvTranspose2d(64, 1, 4, 2, 1), nn.Tanh())
    d = nn.Sequential(nn.Conv2d(1, 64, 4, 2, 1), nn.LeakyReLU(0.2),
                      nn.Conv2d(64, 128, 4, 2, 1, bias=False), nn.BatchNorm2d(128, eps=1e-3), nn.LeakyReLU(0.2),
                      nn.Flatten(), nn.Linear(128 * 7 * 7, 1), nn.Sigmoid())
    w = reference_weights()
    with torch.no_grad():
        for name, module in (("g_linear", g[0]), ("g_deconv1", g[4]), ("g_deconv2", g[7]), ("d_conv1", d[0]),
                             ("d_conv2", d[2]), ("d_linear", d[6])):
            module.weight.copy_(torch.from_numpy(w[name]))
            if module.bias is not None:
                module.bias.zero_()
    g, d = g.to(device), d.to(device)
    bce = nn.BCELoss()
    opt_d = torch.optim.Adam(d.parameters(), lr=LR, betas=(BETA_1, 0.999))
    opt_g = torch.optim.Adam(g.parameters(), lr=LR, betas=(BETA_1, 0.999))
    x = torch.from_numpy(real_batch()).to(device)
    ones, zeros = torch.ones(BATCH, 1, device=device), torch.zeros(BATCH, 1, device=device)
    rng = np.random.default_rng(0)  # GAN(seed=0)'s noise: (NOISE, BATCH) per draw, the D step's first

    def noise() -> object:
        z = rng.standard_normal((NOISE, BATCH)).astype(np.float32)
        return torch.from_numpy(np.ascontiguousarray(z.T)).to(device)

    def step() -> object:
        opt_d.zero_grad()
        fake = g(noise())
        d_cost = bce(d(x), ones) + bce(d(fake.detach()), zeros)
        d_cost.backward()
        opt_d.step()
        opt_g.zero_grad()
        g_cost = bce(d(g(noise())), ones)
        g_cost.backward()
        opt_g.step()
        return d_cost.detach(), g_cost.detach()

    return step, f"torch {torch.__version__}, {torch.get_num_threads()} threads"


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # model_zoo, neon
    child_main({"ngraph": build_ngraph, "torch": build_torch}, __doc__.splitlines()[0])
