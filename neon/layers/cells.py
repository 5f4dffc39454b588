"""Recurrent cells: one time step written with ng ops (``RNNCell``, ``SimpleRNNCell``, ``LSTMCell``, ``GRUCell``).

A cell says what happens at one step; ``neon.layers.Recurrent(cell)`` runs it over the
recurrent axis ``REC`` with ``ng.scan`` (one body graph, however long the sequence) and
autodiff differentiates it: no cell has a hand-written backward.

The protocol a cell implements:

* ``build(x_t)`` creates the weights with ``add_variable`` (so they have scopes and
  checkpoint keys); ``x_t`` has the input's axes without ``REC`` (e.g. ``[F, N]``);
* ``project(x)`` (optional) is the part of the step that does not depend on the state,
  applied once to the whole sequence ``[F, REC, N]`` *before* the scan — a hoisted
  input-to-gates matmul, one large dot instead of one per step. The default passes ``x``;
* ``step(x_t, state) -> (h_t, new_state)``: ``x_t`` is ``project(x)`` at one step, ``state``
  a tuple of ops (``(h,)``; ``(h, c)`` for the LSTM) whose axes are ``state_axes()`` plus
  the batch axis; ``new_state`` must keep exactly those axes.

The hidden axis ``H`` (``hidden_axis``) is set by the ``Recurrent`` layer (named after it) before
the cell is built. Gate weights follow PyTorch's layout, all gates stacked along one axis
``<H>_gates`` (``W_x [G:k*H, F]``, ``W_h [G:k*H, H]``), so a step does ONE dot for all gates
and weights copy to and from ``torch.nn.LSTM``/``GRU``/``RNN`` without reordering.
"""

from __future__ import annotations

from contextlib import AbstractContextManager
from typing import Any

import numpy as np

import ngraph_core as ng
from neon import activations, initializers

from .base import Layer, LayerError, class_kinds
from .checks import as_activation, as_initializer, feature_axes, feature_axis, finite_float, positive_int, same_axes

State = tuple[ng.Op, ...]


class RNNCell(Layer):
    """Base class of recurrent cells: subclass it, write ``build`` and ``step`` with ng ops.

    Args:
        nout: the hidden size (> 0).
        name: the cell's name (its scope inside the ``Recurrent`` layer).

    Raises:
        LayerError: ``nout <= 0``.

    Example:
        >>> class MinimalRNN(RNNCell):
        ...     def build(self, x_t):
        ...         self.W = self.add_variable("W", [self.hidden_axis, *feature_axes(x_t)], GlorotUniform())
        ...     def step(self, x_t, state):
        ...         h = ng.tanh(ng.dot(self.W, x_t) + state[0])
        ...         return h, (h,)
        >>> y = Recurrent(MinimalRNN(32), return_sequence=True)(x)  # [F, REC, N] -> [Recurrent_0:32, REC, N]
    """

    state_size = 1  # how many tensors the state holds (the LSTM: 2, h and c)

    def __init__(self, nout: int, name: str | None = None) -> None:
        super().__init__(name)
        self.nout = positive_int(self, "nout", nout)
        self._hidden_axis: ng.Axis | None = None

    @property
    def hidden_axis(self) -> ng.Axis:
        """The axis of ``h`` (set by ``Recurrent``; on its own, named after the cell)."""
        if self._hidden_axis is None:
            self._hidden_axis = ng.make_axis(self.nout, name=self.name)
        return self._hidden_axis

    @hidden_axis.setter
    def hidden_axis(self, axis: ng.Axis) -> None:
        if axis.length != self.nout:
            raise LayerError(f"{self.name} ({type(self).__name__}): expected a hidden axis of length {self.nout}, "
                             f"received {axis}; hint: the hidden axis length is the cell's nout")
        self._hidden_axis = axis

    # -- what subclasses write ---------------------------------------------------------------------
    def state_axes(self) -> tuple[ng.Axes, ...]:
        """The axes of each state tensor, without the batch axis (default: ``[H]`` each)."""
        return tuple(ng.make_axes([self.hidden_axis]) for _ in range(self.state_size))

    def project(self, x: ng.Op) -> ng.Op:
        """The state-independent part of a step, on the whole sequence (default: ``x`` unchanged)."""
        return x

    def step(self, x_t: ng.Op, state: State) -> tuple[ng.Op, State]:
        """One step: ``(h_t, new_state)`` from ``project(x)`` at one step and the state."""
        raise NotImplementedError(f"{type(self).__name__} must implement step(x_t, state)")

    def hidden(self, state: State) -> ng.Op:
        """The hidden output held in a (final) state: its first tensor."""
        return state[0]

    # -- what the base provides --------------------------------------------------------------------
    def call(self, x: ng.Op) -> ng.Op:
        raise LayerError(f"{self.name} ({type(self).__name__}): expected to be run over a sequence, received a "
                         "single call; hint: wrap the cell in a layer, Recurrent(cell)(x)")

    def scope(self) -> AbstractContextManager[Any]:
        """The cell's name scope (ops built in it record the cell)."""
        return ng.name_scope(self.name, kind=type(self).__name__, kinds=class_kinds(type(self)))

    def build_once(self, x_t: ng.Op) -> None:
        """``build(x_t)`` in the cell's scope on the first use; later inputs must keep the feature axes."""
        with self.scope():
            if not self.built:
                self.in_axes = feature_axes(x_t)
                self.build(x_t)
                self.built = True
        same_axes(self, feature_axes(x_t), self.in_axes, "feature axes")

    def initial_state(self, batch_axes: Any, dtype: str = "float32") -> State:
        """Zeros for each state tensor: ``state_axes()`` plus ``batch_axes``."""
        zero = ng.constant(0.0, (), dtype=dtype)
        return tuple(ng.broadcast(zero, axes + ng.make_axes(batch_axes)) for axes in self.state_axes())

    def __call__(self, x_t: ng.Op, state: State) -> tuple[ng.Op, State]:  # type: ignore[override]
        """``step`` in the cell's scope: the scan body (``x_t`` is ``project(x)`` at one step).

        ``Recurrent`` builds the cell from the raw input first; a cell called before it is built
        (a user running it by hand, ``project`` being the identity) builds from ``x_t``.
        """
        if not self.built:
            self.build_once(x_t)
        with self.scope():
            return self.step(x_t, tuple(state))

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "nout": self.nout}


def gate(gates: ng.Op, k: int, hidden: ng.Axis) -> ng.Op:
    """Gate ``k`` of ``gates`` (``[<H>_gates:m*H, ...]``, the gates stacked along one axis) as ``[H, ...]``."""
    g = gates.axes.find(f"{hidden.name}_gates")
    if g is None:
        raise LayerError(f"gate: expected an axis {hidden.name}_gates among the stacked gates' axes, received "
                         f"{gates.axes}; hint: compute the gates as dot(W, x) with W from GatedCell.build")
    part = ng.slice_along_axis(gates, g, slice(k * hidden.length, (k + 1) * hidden.length))
    return ng.cast_axes(part, [hidden if a.name == g.name else a for a in part.axes])


class GatedCell(RNNCell):
    """A cell with ``gates`` stacked gates: ``W_x [G, F]``, ``W_h [G, H]`` and a bias ``b [G]``.

    ``project(x) = W_x · x + b`` runs once on the whole sequence; a step adds ``W_h · h``
    (one dot for all gates) and slices the gates apart.
    """

    gates = 1

    def __init__(self, nout: int, init: Any = None, inner_init: Any = None, bias: Any = 0.0,
                 name: str | None = None) -> None:
        super().__init__(nout, name)
        self.init = as_initializer(self, "init", initializers.GlorotUniform() if init is None else init)
        self.inner_init = as_initializer(self, "inner_init",
                                         initializers.Orthonormal(1.0) if inner_init is None else inner_init)
        self.bias = as_initializer(self, "bias", 0.0 if bias is None else bias)

    @property
    def gate_axis(self) -> ng.Axis:
        return ng.make_axis(self.gates * self.nout, name=f"{self.hidden_axis.name}_gates")

    def bias_value(self) -> np.ndarray:
        """The bias' initial value (``LSTMCell`` adds its forget bias)."""
        return np.asarray(self.bias.fill((self.gate_axis.length,)), dtype=np.float32)

    def build(self, x_t: ng.Op) -> None:
        feature_axis(self, x_t)
        g, h = self.gate_axis, self.hidden_axis
        self.W_x = self.add_variable("W_x", [g, *feature_axes(x_t)], self.init, labels=("weight",))
        self.W_h = self.add_variable("W_h", [g, h], self.inner_init, labels=("weight",))
        self.b = self.add_variable("b", [g], self.bias_value(), labels=("bias",))

    def project(self, x: ng.Op) -> ng.Op:
        return ng.dot(self.W_x, x) + self.b

    def get_config(self) -> dict[str, Any]:
        return {"name": self.name, "nout": self.nout, "init": initializers.serialize(self.init),
                "inner_init": initializers.serialize(self.inner_init), "bias": initializers.serialize(self.bias)}


class SimpleRNNCell(GatedCell):
    """Elman RNN: ``h_t = activation(W_x · x_t + b + W_h · h_{t-1})`` (``torch.nn.RNN``, one bias).

    Args:
        nout: hidden size; init / inner_init / bias: initializers of ``W_x`` / ``W_h`` / ``b``
            (default ``GlorotUniform()``, ``Orthonormal(1.0)``, 0); activation: default ``Tanh()``.
        name: the cell's name.

    Example:
        >>> y = Recurrent(SimpleRNNCell(64, activation="relu"))(x)
    """

    def __init__(self, nout: int, init: Any = None, inner_init: Any = None, bias: Any = 0.0,
                 activation: Any = "tanh", name: str | None = None) -> None:
        super().__init__(nout, init, inner_init, bias, name)
        self.activation = as_activation(self, activation)

    def step(self, x_t: ng.Op, state: State) -> tuple[ng.Op, State]:
        h = self.activation(gate(x_t + ng.dot(self.W_h, state[0]), 0, self.hidden_axis))
        return h, (h,)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "activation": activations.serialize(self.activation)}


class LSTMCell(GatedCell):
    """Long short-term memory with ``torch.nn.LSTM``'s equations and gate order ``i, f, g, o``.

    ``i, f, o = gate_activation(...)``, ``g = activation(...)``, ``c_t = f * c + i * g``,
    ``h_t = o * activation(c_t)``; the state is ``(h, c)``. PyTorch has two biases
    (``b_ih + b_hh``); ours is their sum.

    Args:
        nout: hidden size.
        init / inner_init / bias: initializers of ``W_x [4H, F]`` / ``W_h [4H, H]`` / ``b [4H]``.
        gate_activation: default ``Logistic()``; activation: default ``Tanh()``.
        forget_bias: added to the forget gate's initial bias (1.0 helps long sequences).
        name: the cell's name.

    Raises:
        LayerError: a bad size, initializer, activation or forget bias.

    Example:
        >>> y = Recurrent(LSTMCell(128, forget_bias=1.0), return_sequence=True)(x)
    """

    state_size = 2
    gates = 4

    def __init__(self, nout: int, init: Any = None, inner_init: Any = None, bias: Any = 0.0,
                 gate_activation: Any = "logistic", activation: Any = "tanh", forget_bias: float = 0.0,
                 name: str | None = None) -> None:
        super().__init__(nout, init, inner_init, bias, name)
        self.gate_activation = as_activation(self, gate_activation)
        self.activation = as_activation(self, activation)
        self.forget_bias = finite_float(self, "forget_bias", forget_bias, -1e6, 1e6)

    def bias_value(self) -> np.ndarray:
        value = super().bias_value()
        if not initializers.filling_shapes_only():  # a zero view then: adding in place would copy the slice
            value[self.nout:2 * self.nout] += self.forget_bias
        return value

    def step(self, x_t: ng.Op, state: State) -> tuple[ng.Op, State]:
        h, c = state
        gates = x_t + ng.dot(self.W_h, h)
        i, f, g, o = (gate(gates, k, self.hidden_axis) for k in range(4))
        c_new = self.gate_activation(f) * c + self.gate_activation(i) * self.activation(g)
        h_new = self.gate_activation(o) * self.activation(c_new)
        return h_new, (h_new, c_new)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "gate_activation": activations.serialize(self.gate_activation),
                "activation": activations.serialize(self.activation), "forget_bias": self.forget_bias}


class GRUCell(GatedCell):
    """Gated recurrent unit with ``torch.nn.GRU``'s equations and gate order ``r, z, n``.

    ``r, z = gate_activation(x_{r,z} + h_{r,z})``, ``n = activation(x_n + r * h_n)``,
    ``h_t = (1 - z) * n + z * h``, where ``x_* = W_x · x_t + b`` and ``h_* = W_h · h + b_h``
    (the reset gate multiplies ``W_hn · h + b_hn``, so the cell keeps PyTorch's second bias
    ``b_h``).

    Args:
        nout: hidden size.
        init / inner_init / bias: initializers of ``W_x [3H, F]`` / ``W_h [3H, H]`` / ``b`` and ``b_h``.
        gate_activation: default ``Logistic()``; activation: default ``Tanh()``.
        name: the cell's name.

    Example:
        >>> y = Recurrent(GRUCell(64))(x)  # [F, REC, N] -> [Recurrent_0:64, N]
    """

    gates = 3

    def __init__(self, nout: int, init: Any = None, inner_init: Any = None, bias: Any = 0.0,
                 gate_activation: Any = "logistic", activation: Any = "tanh", name: str | None = None) -> None:
        super().__init__(nout, init, inner_init, bias, name)
        self.gate_activation = as_activation(self, gate_activation)
        self.activation = as_activation(self, activation)

    def build(self, x_t: ng.Op) -> None:
        super().build(x_t)
        self.b_h = self.add_variable("b_h", [self.gate_axis], self.bias_value(), labels=("bias",))

    def step(self, x_t: ng.Op, state: State) -> tuple[ng.Op, State]:
        (h,) = state
        hp = ng.dot(self.W_h, h) + self.b_h
        hid = self.hidden_axis
        r = self.gate_activation(gate(x_t, 0, hid) + gate(hp, 0, hid))
        z = self.gate_activation(gate(x_t, 1, hid) + gate(hp, 1, hid))
        n = self.activation(gate(x_t, 2, hid) + r * gate(hp, 2, hid))
        h_new = (1.0 - z) * n + z * h
        return h_new, (h_new,)

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), "gate_activation": activations.serialize(self.gate_activation),
                "activation": activations.serialize(self.activation)}
