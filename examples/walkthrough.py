# %% [markdown]
# # ngraph_core walkthrough: logistic regression, end to end
#
# This walkthrough is both a script (`examples/walkthrough.py`) and a notebook
# (`notebooks/walkthrough.ipynb`). The script is the source: `notebooks/make_walkthrough.py`
# turns each of its `# %%` cells into a notebook cell, so the two cannot drift, and CI
# runs both.
#
# The story: build a graph over **named axes**, derive gradients with **autodiff**,
# **compile** it with a transformer, train on generated data, read the **generated plan**,
# and watch named axes catch a classic broadcasting bug.

# %%
import numpy as np

import ngraph_core as ng

# %% [markdown]
# ## 1. Named axes and the graph
#
# Every tensor has named axes. `C` holds the 4 features, `N` is the batch axis
# (the axis named `N` is the batch axis by convention, which `ng.batch_size` reads).
# `ng.dot(W, X)` contracts the axes `W` and `X` share (`C`) and keeps the rest (`N`),
# so no transposes appear anywhere. Nothing is computed here: each call adds an op
# to a graph.

# %%
C, N = ng.make_axis(4, name="C"), ng.make_axis(32, name="N")
X = ng.placeholder([C, N], name="X")
Y = ng.placeholder([N], name="Y")
W = ng.variable([C], initial_value=0, name="W")
b = ng.variable([], initial_value=0, name="b")

Y_hat = ng.sigmoid(ng.dot(W, X) + b)
L = ng.cross_entropy_binary(Y_hat, Y) / ng.batch_size(Y_hat)

print(ng.format_graph(L))

# %% [markdown]
# `cross_entropy_binary` saw that `Y_hat` is a sigmoid and built the loss from the logits
# (`softplus(z) - y*z`), so it stays finite however confident the model gets.
#
# ## 2. Autodiff
#
# `ng.gradients` walks the graph backwards from `L` and returns one gradient op per
# variable, each with that variable's axes. The update is explicit: `ng.assign` writes
# a variable, `ng.doall` groups side effects. Gradients always read the weights from
# *before* the update (see the execution-order rules in the README).

# %%
grad_W, grad_b = ng.gradients(L, [W, b])
update = ng.doall([ng.assign(W, W - 0.1 * grad_W), ng.assign(b, b - 0.1 * grad_b)])
print("grad_W axes:", grad_W.axes, " grad_b axes:", grad_b.axes)

# %% [markdown]
# ## 3. Data: two linearly separable classes
#
# Points in 4 dimensions, labelled by which side of a random hyperplane they fall;
# points too close to the plane are dropped so that the classes are separable with a
# margin. Seeded, so every run prints the same numbers.

# %%
rng = np.random.default_rng(0)
true_w, true_b = rng.normal(size=4), 0.2


def make_data(count: int) -> tuple[np.ndarray, np.ndarray]:
    """``count`` points (rows) and 0/1 labels, at least 0.2 away from the true plane."""
    points = np.empty((0, 4))
    while len(points) < count:
        candidates = rng.normal(size=(4 * count, 4))
        margin = (candidates @ true_w + true_b) / np.linalg.norm(true_w)
        points = np.vstack([points, candidates[np.abs(margin) > 0.2]])
    points = points[:count]
    labels = (points @ true_w + true_b > 0).astype(np.float32)
    return points.astype(np.float32), labels


x_train, y_train = make_data(N.length * 64)
x_test, y_test = make_data(N.length * 16)
print(f"train {x_train.shape}, test {x_test.shape}, positive fraction {y_train.mean():.2f}")

# %% [markdown]
# ## 4. Compile and train
#
# `make_transformer()` gives the NumPy backend. `t.computation(results, *placeholders)`
# compiles and returns a callable taking one array per placeholder, in the placeholders'
# axes order: `X` is `[C, N]`, so a batch of rows is fed transposed. Variables live in the
# transformer, so `train` and `predict` share `W` and `b`.

# %%
STEPS = 400
batches = len(x_train) // N.length

with ng.transformers.make_transformer() as t:
    train = t.computation([L, update], X, Y)
    predict = t.computation(Y_hat, X)

    for step in range(STEPS):
        i = step % batches
        xb, yb = x_train[i * N.length:(i + 1) * N.length], y_train[i * N.length:(i + 1) * N.length]
        loss, _ = train(xb.T, yb)  # the doall has no value: None
        if step % 50 == 0 or step == STEPS - 1:
            print(f"step {step:4d}  loss {float(loss):.4f}")

    # held-out accuracy: the test set in batches of N
    correct = 0
    for i in range(len(x_test) // N.length):
        xb, yb = x_test[i * N.length:(i + 1) * N.length], y_test[i * N.length:(i + 1) * N.length]
        correct += int(((predict(xb.T) > 0.5) == (yb > 0.5)).sum())
    accuracy = correct / len(x_test)
    learned_W, learned_b = t.read_variable(W), t.read_variable(b)

print(f"held-out accuracy: {accuracy:.2%}")
cosine = learned_W @ true_w / (np.linalg.norm(learned_W) * np.linalg.norm(true_w))
print(f"cosine(learned W, true w) = {cosine:.3f}, b = {float(learned_b):.3f}")
if accuracy < 0.95:
    raise SystemExit(f"walkthrough: held-out accuracy {accuracy:.2%} is below the 95% bar")

# %% [markdown]
# ## 5. The generated plan
#
# A computation is straight-line Python: one line per step, in execution order, each
# commented with the op it runs, as the pass pipeline left the graph. Forward steps come
# first, then the backward ones (labelled `.grad`), then the assignments: every pure op
# runs before any assignment, so the gradients read the weights from before the update.

# %%
print(train.source)

# %% [markdown]
# ## 6. The named-axes safety net
#
# The slide bug: give the bias the feature axis `C` instead of no axis. In a positional
# framework, `(32,) + (4,)` either fails with an opaque shape error or — with `[N, 1]`
# against `[C]` — silently broadcasts to a 32x4 outer product and trains garbage.
# Here `dot(W, X)` has axes `[N]` and the bias `[C]`: each has an axis the other lacks,
# so the addition raises `ng.AxesError` naming both, with a hint.

# %%
b_wrong = ng.variable([C], name="b_wrong")
try:
    ng.dot(W, X) + b_wrong
except ng.AxesError as error:
    print("AxesError:", error)
else:
    raise SystemExit("walkthrough: expected an AxesError from adding [C] to [N]")
