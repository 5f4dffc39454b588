"""One training epoch of the MNIST MLP: neon's ``Model.fit`` against the same model and loop in PyTorch.

The model is ``examples/mnist_mlp.py``'s: 784-512-512-10, ReLU, dropout (keep 0.8) after each
hidden layer, softmax cross-entropy; SGD with momentum 0.9 and learning rate 0.05, batch 32,
on the 4,000 training digits of the built-in MNIST subset, shuffled every epoch (125 batches,
the last one full). A "step" here is one whole epoch:

* ``ngraph``: ``Model.fit(train, CrossEntropyMulti(), GradientDescentMomentum(...), ...)`` for one
  more epoch (``initial_epoch=k, num_epochs=k+1``, no progress bar, no validation): the
  ``ArrayIterator`` batching, the compiled training computation, the per-batch cost read-back.
* ``torch``: the idiomatic PyTorch loop — ``torch.randperm``, index the batch, ``zero_grad``,
  forward, ``CrossEntropyLoss``, ``backward``, ``optim.SGD(momentum=0.9).step``,
  ``loss.item()`` to accumulate the epoch's cost as ``fit`` does.

Each side also reports its process's peak RSS (``ru_maxrss``) after the timed epochs. Run by
``run.py`` (one side per process, alternating)::

    python benchmarks/run.py mnist_fit --pairs 5

or one side: ``python benchmarks/mnist_fit.py --side ngraph --threads 1``.
"""

from __future__ import annotations

from collections.abc import Callable

from harness import Step, blas_info, child_main

SIDES = ("ngraph", "torch")
STEPS = 5  # timed epochs per process (run.py reads these two)
WARMUP = 1  # untimed epochs: the first one compiles
BATCH, LR, MOMENTUM, KEEP = 32, 0.05, 0.9, 0.8


def build_ngraph(threads: int) -> tuple[Step, str]:
    from neon.activations import Rectlin, Softmax
    from neon.costs import CrossEntropyMulti
    from neon.data import ArrayIterator, load_mnist_subset
    from neon.initializers import Constant, GlorotUniform
    from neon.layers import Affine, Dropout
    from neon.model import Model
    from neon.optimizers import GradientDescentMomentum

    (X, y), _ = load_mnist_subset()
    train = ArrayIterator(X, y, nclass=10, batch_size=BATCH, shuffle=True, seed=0)
    model = Model([
        Affine(512, GlorotUniform(seed=0), bias=Constant(0.0), activation=Rectlin()), Dropout(keep=KEEP),
        Affine(512, GlorotUniform(seed=1), bias=Constant(0.0), activation=Rectlin()), Dropout(keep=KEEP),
        Affine(10, GlorotUniform(seed=2), bias=Constant(0.0), activation=Softmax()),
    ])
    cost, optimizer = CrossEntropyMulti(), GradientDescentMomentum(LR, momentum_coef=MOMENTUM)
    epochs = iter(range(10**6))

    def epoch() -> object:
        k = next(epochs)
        return model.fit(train, cost, optimizer, num_epochs=k + 1, initial_epoch=k, progress=False)

    return epoch, f"neon Model.fit on ngraph_core numpy, {blas_info()}"


def build_torch(threads: int) -> tuple[Step, str]:
    import torch

    from neon.data import load_mnist_subset

    torch.set_num_threads(threads)
    torch.manual_seed(0)
    (X, y), _ = load_mnist_subset()
    X, y = torch.from_numpy(X), torch.from_numpy(y)
    model = torch.nn.Sequential(
        torch.nn.Linear(784, 512), torch.nn.ReLU(), torch.nn.Dropout(1 - KEEP),
        torch.nn.Linear(512, 512), torch.nn.ReLU(), torch.nn.Dropout(1 - KEEP),
        torch.nn.Linear(512, 10),
    )
    cost = torch.nn.CrossEntropyLoss()
    optimizer = torch.optim.SGD(model.parameters(), lr=LR, momentum=MOMENTUM)
    generator = torch.Generator().manual_seed(0)

    def epoch() -> object:
        model.train()
        order = torch.randperm(len(X), generator=generator)
        total = 0.0
        for start in range(0, len(X), BATCH):
            index = order[start:start + BATCH]
            optimizer.zero_grad()
            loss = cost(model(X[index]), y[index])
            loss.backward()
            optimizer.step()
            total += loss.item() * len(index)
        return total / len(X)

    return epoch, f"torch {torch.__version__}, {torch.get_num_threads()} threads"


BUILDERS: dict[str, Callable[[int], tuple[Step, str]]] = {"ngraph": build_ngraph, "torch": build_torch}


def main() -> None:
    child_main(BUILDERS, __doc__.splitlines()[0], warmup=WARMUP, steps=STEPS)


if __name__ == "__main__":
    main()
