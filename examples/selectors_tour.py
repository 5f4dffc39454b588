# %% [markdown]
# # Selectors: query and change a model's ops like CSS
#
# This is both a script (`examples/selectors_tour.py`) and a notebook (`notebooks/selectors.ipynb`,
# generated from the script by `notebooks/make_walkthrough.py`; CI runs both).
#
# A model is built from layers, but what runs is a graph of ops, and every op remembers the
# layer scope that made it. A *selector* (docs/selectors.md) is a CSS-like query over those ops and
# scopes: `"Conv > Pool variable"` reads "the variables inside convolution layers that are
# followed by pooling". A query returns a `Selection`, which can freeze, re-weight, tap or
# replace what it holds. The story: build a small CNN on real MNIST digits, query it, freeze a
# selection and check it stays unchanged through training, tap a layer's activations and plot
# them, and draw the graph with the selection highlighted.

# %%
from pathlib import Path

import numpy as np
from matplotlib.figure import Figure

import ngraph_core as ng
from neon.costs import CrossEntropyMulti
from neon.data import ArrayIterator, load_mnist_subset
from neon.initializers import Constant, set_seed
from neon.layers import Affine, Conv, Pool
from neon.metrics import Accuracy
from neon.model import Model
from neon.optimizers import Adam

OUT = Path("out")
OUT.mkdir(exist_ok=True)

(X_train, y_train), (X_test, y_test) = load_mnist_subset()  # 4,000 + 1,000 real digits
train = ArrayIterator(X_train[:2000], y_train[:2000], nclass=10, batch_size=32, lshape=(1, 28, 28),
                      shuffle=True, seed=0)
test = ArrayIterator(X_test, y_test, nclass=10, batch_size=250, lshape=(1, 28, 28))

set_seed(0)
model = Model([
    Conv((3, 3, 8), padding=1, bias=Constant(0), activation="relu", name="conv1"), Pool(2),
    Conv((3, 3, 16), padding=1, bias=Constant(0), activation="relu", name="conv2"),
    Affine(10, bias=Constant(0), activation="softmax", name="classifier"),
])
model.build((1, 28, 28), batch_size=32)
print(model.summary())

# %% [markdown]
# ## 1. Queries
#
# Capitalized names are layer types (a subclass matches too), lowercase names are op kinds,
# `A B` means "B inside A", `A > B` "A whose output feeds B" (the subject stays A), and
# `:not(...)` negates. The first conv is followed by pooling, the second is not, so the first
# query finds only `conv1`'s weights and bias.

# %%
frozen = model.select("Conv > Pool variable")
print("Conv > Pool variable:", frozen.paths)

outside = model.select(".elementwise:not(Conv *)")
print(f".elementwise:not(Conv *): {len(outside)} ops:", [op.op.value for op in outside])

print("Affine[nout=10]:", model.select("Affine[nout=10]").paths)

# %% [markdown]
# ## 2. Freeze a selection, train, and check it did not move
#
# Freezing relabels the variables `frozen` instead of `trainable`; optimizers skip them. A
# parameter group gives the second conv its own, smaller learning rate (the same selector
# syntax, as a key of `groups`).

# %%
read = model.transformer.read_variable
before = {var.name: read(var).copy() for var in frozen.variables}
frozen.freeze()
optimizer = Adam(2e-3, groups={"#conv2 variable": {"lr": 5e-4}})
history = model.fit(train, CrossEntropyMulti(), optimizer, num_epochs=2, valid_set=test, metric=Accuracy(),
                    progress=False)
after = {var.name: read(var) for var in frozen.variables}
unchanged = all(np.array_equal(before[name], after[name]) for name in before)
print(f"held-out accuracy: {100 * history['valid_accuracy'][-1]:.1f}%")
print("frozen weights bit-identical after training:", unchanged)
assert unchanged

# %% [markdown]
# ## 3. Tap a layer's activations
#
# A tap calls a function with each tapped op's value every time a computation that holds it
# runs. Here it catches `conv1`'s output (the op that leaves the layer) during `predict`.

# %%
seen = {}
handle = model.select("#conv1").tap(lambda name, value: seen.__setitem__(name, value))
model.predict(X_test[:4].reshape(4, 1, 28, 28))
handle.remove()
(name, maps), = seen.items()
print(f"tapped {name}: shape {maps.shape}")

# the value's axes are the op's named axes, in order: channels (conv1:8), H, W, then the batch N
figure = Figure(figsize=(8, 2))
for k in range(maps.shape[0]):
    axes = figure.add_subplot(1, maps.shape[0], k + 1)
    axes.imshow(maps[k, :, :, 0], cmap="gray")  # channel k of the first digit
    axes.set_axis_off()
figure.savefig(OUT / "conv1_maps.png")
print("wrote", OUT / "conv1_maps.png")

# %% [markdown]
# ## 4. Draw the graph with the selection highlighted
#
# Layers are drawn as clusters; the frozen variables are highlighted.

# %%
path = ng.viz.render(model, OUT / "selectors_graph", format="svg", highlight=frozen)
print("wrote", path)
