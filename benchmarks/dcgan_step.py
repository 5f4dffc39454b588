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
  ``nn.Conv2d``, ``nn.BatchNorm1d/2d``, ``BCELoss``, ``optim.Adam``), NCHW, noise from ``torch.randn``.

Both sides draw weights from N(0, 0.02) (not copied between sides: the step's cost does not
depend on the values) and see the same batch of real MNIST digits (random images when the
MNIST subset is not installed).

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


def build_ngraph(threads: int) -> tuple[Step, str]:
    import numpy as np

    from model_zoo.dcgan_mnist import discriminator, generator
    from neon.gan import GAN
    from neon.initializers import set_seed
    from neon.optimizers import Adam

    set_seed(0)
    gan = GAN(generator(NOISE), discriminator(), noise_dim=NOISE, seed=0)
    gan.build((1, 28, 28))
    gan.set_optimizers(Adam(LR, beta_1=BETA_1, name="d_adam"), Adam(LR, beta_1=BETA_1, name="g_adam"))
    x = np.ascontiguousarray(np.moveaxis(real_batch(), 0, -1))  # (C, H, W, N), as ArrayIterator yields
    gan.train_step(x)  # compiles both computations
    return (lambda: gan.train_step(x)), f"ngraph_core numpy, {blas_info()}"


def build_torch(threads: int) -> tuple[Step, str]:
    import torch
    from torch import nn

    torch.manual_seed(0)
    g = nn.Sequential(nn.Linear(NOISE, 128 * 7 * 7, bias=False), nn.BatchNorm1d(128 * 7 * 7), nn.ReLU(),
                      nn.Unflatten(1, (128, 7, 7)),
                      nn.ConvTranspose2d(128, 64, 4, 2, 1, bias=False), nn.BatchNorm2d(64), nn.ReLU(),
                      nn.ConvTranspose2d(64, 1, 4, 2, 1), nn.Tanh())
    d = nn.Sequential(nn.Conv2d(1, 64, 4, 2, 1), nn.LeakyReLU(0.2),
                      nn.Conv2d(64, 128, 4, 2, 1, bias=False), nn.BatchNorm2d(128), nn.LeakyReLU(0.2),
                      nn.Flatten(), nn.Linear(128 * 7 * 7, 1), nn.Sigmoid())
    with torch.no_grad():
        for module in [*g, *d]:
            if isinstance(module, (nn.Linear, nn.Conv2d, nn.ConvTranspose2d)):
                module.weight.normal_(0.0, 0.02)
                if module.bias is not None:
                    module.bias.zero_()
    bce = nn.BCELoss()
    opt_d = torch.optim.Adam(d.parameters(), lr=LR, betas=(BETA_1, 0.999))
    opt_g = torch.optim.Adam(g.parameters(), lr=LR, betas=(BETA_1, 0.999))
    x = torch.from_numpy(real_batch())
    ones, zeros = torch.ones(BATCH, 1), torch.zeros(BATCH, 1)

    def step() -> object:
        opt_d.zero_grad()
        fake = g(torch.randn(BATCH, NOISE))
        d_cost = bce(d(x), ones) + bce(d(fake.detach()), zeros)
        d_cost.backward()
        opt_d.step()
        opt_g.zero_grad()
        g_cost = bce(d(g(torch.randn(BATCH, NOISE))), ones)
        g_cost.backward()
        opt_g.step()
        return d_cost.detach(), g_cost.detach()

    return step, f"torch {torch.__version__}, {torch.get_num_threads()} threads"


if __name__ == "__main__":
    sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))  # model_zoo, neon
    child_main({"ngraph": build_ngraph, "torch": build_torch}, __doc__.splitlines()[0])
