"""Recurrent layers: LSTM/GRU/RNN against PyTorch (values and gradients), lengths, reductions, configs, a fit.

Layout: ours ``[F, REC, N]`` is PyTorch's ``batch_first=False`` ``(T, N, F)`` transposed.
"""

from __future__ import annotations

import numpy as np
import pytest
from layer_helper import axis, check_layer_gradients, random_input, random_weights, run_layer_test

import ngraph_core as ng
from neon.data import ArrayIterator
from neon.layers import (
    GRU,
    LSTM,
    Affine,
    BiLSTM,
    BiRNN,
    DeepBiLSTM,
    DeepBiRNN,
    GRUCell,
    LayerError,
    LSTMCell,
    Recurrent,
    RecurrentLast,
    RecurrentMean,
    RecurrentSum,
    RNNCell,
    SimpleRNNCell,
    Unflatten,
    sequence_lengths,
)
from neon.layers.checks import feature_axes

F, T, N, H = 3, 5, 4, 6
LENGTHS = np.array([5, 2, 4, 1])


def seq_axes(f: int = F, t: int = T, n: int = N) -> list[ng.Axis]:
    return [axis("F", f), axis("REC", t), axis("N", n)]


def run(layer, x_value, lengths=None, weights=None, initial_state=None, grads=True):
    """Build ``layer`` on a variable x; return (output, loss, {name: grad}) from a float64 run."""
    x = ng.variable(seq_axes(*x_value.shape), initial_value=x_value, name="x", trainable=False)
    kwargs = {}
    if lengths is not None:
        kwargs["lengths"] = ng.constant(lengths, [x.axes.batch_axis], dtype="int32")
    if initial_state is not None:
        kwargs["initial_state"] = initial_state
    out = layer(x, **kwargs)
    R = ng.constant(random_weights(out.axes), out.axes)
    loss = ng.sum(out * R)
    wrt = [x, *layer.trainable_variables] if grads else []
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        for var, value in (weights or {}).items():
            t.write_variable(var, value)
        values = t.computation([out, loss, *ng.gradients(loss, wrt)] if wrt else [out, loss])()
    return values[0], values[1], dict(zip([v.name if v is not x else "x" for v in wrt], values[2:])), R


def torch_weights(module, cells, suffixes):
    """Our cells' variables -> PyTorch's values (``b`` is ``b_ih + b_hh``; the GRU keeps ``b_h``)."""
    found = {}
    for cell, suffix in zip(cells, suffixes):
        p = {k: getattr(module, f"{k}_l0{suffix}").detach().numpy() for k in ("weight_ih", "weight_hh", "bias_ih",
                                                                               "bias_hh")}
        found[cell.W_x], found[cell.W_h] = p["weight_ih"], p["weight_hh"]
        if isinstance(cell, GRUCell):
            found[cell.b], found[cell.b_h] = p["bias_ih"], p["bias_hh"]
        else:
            found[cell.b] = p["bias_ih"] + p["bias_hh"]
    return found


def torch_grads(module, cells, suffixes):
    found = {}
    for cell, suffix in zip(cells, suffixes):
        g = {k: getattr(module, f"{k}_l0{suffix}").grad.numpy() for k in ("weight_ih", "weight_hh", "bias_ih",
                                                                            "bias_hh")}
        found[cell.W_x], found[cell.W_h] = g["weight_ih"], g["weight_hh"]
        found[cell.b] = g["bias_ih"]  # b_ih and b_hh enter as a sum: the same gradient
        if isinstance(cell, GRUCell):
            found[cell.b_h] = g["bias_hh"]
    return found


def compare_with_torch(kind, layer, cells, bidirectional, return_sequence, lengths=None):
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    module = getattr(torch.nn, kind)(F, H, bidirectional=bidirectional).double()
    suffixes = ["", "_reverse"] if bidirectional else [""]
    x_value = random_input(seq_axes())
    # ours: build first (creates the variables), then run with torch's weights written in
    x = ng.variable(seq_axes(), initial_value=x_value, name="x", trainable=False)
    kw = {} if lengths is None else {"lengths": ng.constant(lengths, [x.axes.batch_axis], dtype="int32")}
    out = layer(x, **kw)
    weights = torch_weights(module, cells, suffixes)
    R = random_weights(out.axes)
    loss = ng.sum(out * ng.constant(R, out.axes))
    wrt = [x, *layer.trainable_variables]
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        for var, value in weights.items():
            t.write_variable(var, value)
        ours, *grads = t.computation([out, *ng.gradients(loss, wrt)])()
    # PyTorch: (T, N, F)
    xt = torch.tensor(np.transpose(x_value, (1, 2, 0)).copy(), requires_grad=True)
    inp = xt if lengths is None else torch.nn.utils.rnn.pack_padded_sequence(xt, torch.tensor(lengths),
                                                                             enforce_sorted=False)
    seq, state = module(inp)
    if lengths is not None:
        seq, _ = torch.nn.utils.rnn.pad_packed_sequence(seq, total_length=T)
    h_n = state[0] if kind == "LSTM" else state
    if return_sequence:
        theirs = seq.permute(2, 0, 1)                     # (T, N, D*H) -> [D*H, REC, N]
    else:
        theirs = torch.cat(list(h_n), dim=1).T            # (D, N, H) -> [D*H, N]
    (theirs * torch.tensor(R)).sum().backward()
    np.testing.assert_allclose(ours, theirs.detach().numpy(), rtol=1e-9, atol=1e-12)
    np.testing.assert_allclose(grads[0], np.transpose(xt.grad.numpy(), (2, 0, 1)), rtol=1e-8, atol=1e-12)
    expected = torch_grads(module, cells, suffixes)
    for var, g in zip(wrt[1:], grads[1:]):
        np.testing.assert_allclose(g, expected[var], rtol=1e-8, atol=1e-12, err_msg=var.name)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("return_sequence", [True, False])
def test_single_layer_matches_torch(kind, return_sequence) -> None:
    layer = (LSTM if kind == "LSTM" else GRU)(H, return_sequence=return_sequence)
    compare_with_torch(kind, layer, [layer.cell], False, return_sequence)


@pytest.mark.parametrize("kind", ["LSTM", "GRU"])
@pytest.mark.parametrize("lengths", [None, LENGTHS])
def test_bidirectional_matches_torch(kind, lengths) -> None:
    layer = BiLSTM(H) if kind == "LSTM" else BiRNN(GRUCell(H))
    compare_with_torch(kind, layer, [layer.fwd.cell, layer.bwd.cell], True, True, lengths)


def test_final_states_with_lengths_match_packed_torch() -> None:
    layer = BiRNN(LSTMCell(H), return_sequence=False)
    compare_with_torch("LSTM", layer, [layer.fwd.cell, layer.bwd.cell], True, False, LENGTHS)


def test_simple_rnn_matches_torch_with_lengths() -> None:
    layer = Recurrent(SimpleRNNCell(H), return_sequence=True)
    compare_with_torch("RNN", layer, [layer.cell], False, True, LENGTHS)


@pytest.mark.parametrize("reverse", [False, True])
def test_each_example_of_a_padded_batch_equals_running_it_alone(reverse) -> None:
    layer = LSTM(H, return_sequence=True, reverse=reverse)
    x_value = random_input(seq_axes())
    x_value[:, np.arange(T)[:, None] >= LENGTHS[None, :]] = 7.0  # padding must not matter
    batch, *_ = run(layer, x_value, lengths=LENGTHS, grads=False)
    for n, length in enumerate(LENGTHS):
        alone, *_ = run(layer, x_value[:, :length, n:n + 1].copy(), grads=False)
        np.testing.assert_allclose(batch[:, :length, n], alone[:, :, 0], rtol=1e-10, atol=1e-12)
        np.testing.assert_array_equal(batch[:, length:, n], 0.0)


def test_reductions_honour_lengths() -> None:
    x_value = random_input(seq_axes())
    x = ng.placeholder(seq_axes(), name="x")
    lengths = ng.constant(LENGTHS, [x.axes.batch_axis], dtype="int32")
    outs = [RecurrentSum()(x, lengths=lengths), RecurrentMean()(x, lengths=lengths),
            RecurrentLast()(x, lengths=lengths), RecurrentSum()(x), RecurrentMean()(x), RecurrentLast()(x)]
    assert all(o.axes.lengths == (F, N) for o in outs)
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        got = t.computation(outs, x)(x_value)
    mask = np.arange(T)[:, None] < LENGTHS[None, :]
    total = (x_value * mask).sum(axis=1)
    last = x_value[:, LENGTHS - 1, np.arange(N)]
    for value, expected in zip(got, [total, total / LENGTHS, last, x_value.sum(1), x_value.mean(1), x_value[:, -1]]):
        np.testing.assert_allclose(value, expected, rtol=1e-10)


@pytest.mark.parametrize(("factory", "out"), [
    (lambda: Recurrent(SimpleRNNCell(H)), (H, N)),
    (lambda: Recurrent(GRUCell(H), return_sequence=True, reverse=True, init_state="learned"), (H, T, N)),
    (lambda: LSTM(H, forget_bias=1.0, return_sequence=True), (H, T, N)),
    (lambda: GRU(H, init_state="learned"), (H, N)),
    (lambda: BiRNN(H, activation="relu"), (2 * H, T, N)),
    (lambda: BiLSTM(H, merge="sum", return_sequence=False), (H, N)),
    (lambda: DeepBiRNN(H, depth=2), (2 * H, T, N)),
    (lambda: DeepBiLSTM(H, depth=2, return_sequence=False), (2 * H, N)),
    (lambda: RecurrentSum(), (F, N)),
    (lambda: RecurrentMean(), (F, N)),
    (lambda: RecurrentLast(), (F, N)),
])
def test_layer_helper_build_config_forward_and_training_step(factory, out) -> None:
    run_layer_test(factory, seq_axes(), out)


def test_initial_state_and_return_state_match_torch() -> None:
    torch = pytest.importorskip("torch")
    torch.manual_seed(1)
    module = torch.nn.LSTM(F, H).double()
    encoder, decoder = LSTM(H, name="enc"), LSTM(H, return_sequence=True, name="dec")
    x = ng.placeholder(seq_axes(), name="x")
    _, (h, c) = encoder(x, return_state=True)
    out = decoder(x, initial_state=(h, c))  # enc's hidden axis is renamed to dec's
    assert out.axes.names == ("dec", "REC", "N")
    weights = {**torch_weights(module, [encoder.cell], [""]), **torch_weights(module, [decoder.cell], [""])}
    x_value = random_input(seq_axes())
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        for var, value in weights.items():
            t.write_variable(var, value)
        ours = t.computation(out, x)(x_value)
    xt = torch.tensor(np.transpose(x_value, (1, 2, 0)).copy())
    _, state = module(xt)
    theirs, _ = module(xt, state)
    np.testing.assert_allclose(ours, theirs.permute(2, 0, 1).detach().numpy(), rtol=1e-9)


def test_a_user_cell_is_a_layer_and_gets_gradients() -> None:
    class MinimalRNN(RNNCell):
        def build(self, x_t):
            self.W = self.add_variable("W", [self.hidden_axis, *feature_axes(x_t)], 0.5)

        def step(self, x_t, state):
            h = ng.tanh(ng.dot(self.W, x_t) + 0.9 * state[0])
            return h, (h,)

    x_value = random_input(seq_axes())
    out, _, grads, R = run(Recurrent(MinimalRNN(2), return_sequence=True), x_value)
    h, expected = np.zeros((2, N)), []
    for t in range(T):
        h = np.tanh(0.5 * x_value[:, t].sum(0) + 0.9 * h)
        expected.append(h)
    np.testing.assert_allclose(out, np.stack(expected, axis=1), rtol=1e-10)
    assert np.all(np.isfinite(grads["W"])) and np.any(grads["W"] != 0)


def test_sequence_lengths_reach_layers_inside_containers() -> None:
    from neon.containers import Sequential

    model = Sequential([GRU(H, return_sequence=True), RecurrentMean()])
    x = ng.placeholder(seq_axes(), name="x")
    lengths = ng.constant(LENGTHS, [x.axes.batch_axis], dtype="int32")
    with sequence_lengths(lengths):
        masked = model(x)
    plain = model(x)
    x_value = random_input(seq_axes())
    with ng.transformers.make_transformer(float_dtype="float64") as t:
        a, b = t.computation([masked, plain], x)(x_value)
    assert np.allclose(a[:, 0], b[:, 0]) and not np.allclose(a[:, 1], b[:, 1])  # example 0 has the full length


def test_errors_say_what_was_expected() -> None:
    with pytest.raises(LayerError, match="recurrent axis named 'REC'"):
        LSTM(4)(ng.placeholder([axis("F", 3), axis("N", 2)]))
    x = ng.placeholder(seq_axes())
    with pytest.raises(LayerError, match=r"lengths as an op with axes \[N:4\]"):
        LSTM(4)(x, lengths=ng.placeholder([axis("M", 4)], dtype="int32"))
    with pytest.raises(LayerError, match="initial state with axes"):
        LSTM(4)(x, initial_state=(ng.placeholder([axis("H", 5), axis("N", 4)]),) * 2)
    with pytest.raises(LayerError, match="an RNNCell"):
        Recurrent(LSTM(4))
    with pytest.raises(LayerError, match="init_state among"):
        LSTM(4, init_state="random")
    with pytest.raises(LayerError, match="merge among"):
        BiLSTM(4, merge="avg")
    with pytest.raises(LayerError, match="keywords of LSTMCell"):
        BiLSTM(4, dropout=0.5)
    with pytest.raises(LayerError, match="the call keyword lengths= only"):
        BiLSTM(4)(x, return_state=True)
    with pytest.raises(LayerError, match="run over a sequence"):
        LSTMCell(4).call(x)


def test_fit_learns_the_sign_of_a_sum() -> None:
    from neon.costs import CrossEntropyMulti
    from neon.model import Model
    from neon.optimizers import Adam

    rng = np.random.default_rng(0)
    X = rng.standard_normal((256, 8)).astype(np.float32)
    y = (X.sum(axis=1) > 0).astype(np.int64)
    model = Model([Unflatten((1, 8), names=("F", "REC")), LSTM(8), Affine(2, activation="softmax")])
    history = model.fit(ArrayIterator(X, y, nclass=2, batch_size=32, shuffle=True, seed=0), CrossEntropyMulti(),
                        Adam(0.02), num_epochs=6, progress=False)
    assert history["train_cost"][-1] < 0.5 * history["train_cost"][0], history["train_cost"]


def test_one_dot_per_step_for_all_gates() -> None:
    x = ng.placeholder(seq_axes())
    y = LSTM(H, return_sequence=True)(x)
    scans = [op for op in ng.ordered_ops([y]) if op.op is ng.OpType.SCAN]
    body = ng.ordered_ops(list(scans[0].arg.body.roots))
    assert len(scans) == 1 and sum(op.op is ng.OpType.DOT for op in body) == 1  # W_h . h for the 4 gates
    assert sum(op.op is ng.OpType.DOT for op in ng.ordered_ops([y])) == 1       # W_x . x: once, before the loop


def test_learned_initial_state_gradients_match_finite_differences() -> None:
    grads = check_layer_gradients(lambda: GRU(2, init_state="learned", reverse=True), seq_axes(2, 3, 2))
    assert set(grads) == {"x", "W_x", "W_h", "b", "b_h", "init_0"} and np.any(grads["init_0"] != 0)
