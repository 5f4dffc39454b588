"""A small hand-built CNN for the selector tests, every op of interest named.

Layout (scopes with their types; ``model`` holds every layer)::

    x -> model(Sequential)/conv1(Conv): W, b, conv, bias, relu     (conv1 is followed by pooling)
      -> model/pool1(Pool): pool
      -> model/conv2(SepConv, a Conv subclass): W, b, conv, bias, relu   (not followed by pooling)
      -> model/fc(Affine): W, b, dot, bias (add)
      -> out = tanh(fc) * 2  (no scope)
"""

from __future__ import annotations

from types import SimpleNamespace

import numpy as np

import ngraph_core as ng

LAYER = ("Layer",)


def build_net() -> SimpleNamespace:
    C, H, W, N = (ng.make_axis(n, name=s) for n, s in ((2, "C"), (4, "H"), (4, "W"), (3, "N")))
    R, S, K, K2, F = (ng.make_axis(n, name=s) for n, s in ((3, "R"), (3, "S"), (3, "K"), (3, "K2"), (5, "F")))
    rng = np.random.default_rng(0)
    g = SimpleNamespace(axes=SimpleNamespace(C=C, H=H, W=W, N=N, K=K, F=F))
    g.x = ng.placeholder([C, H, W, N], name="x")
    with ng.name_scope("model", kind="Sequential", kinds=("Sequential", "Container", *LAYER)):
        with ng.name_scope("conv1", kind="Conv", kinds=("Conv", *LAYER)):
            g.W1 = ng.variable([C, R, S, K], rng.standard_normal((2, 3, 3, 3)) * 0.3, name="W", labels=("weight",))
            g.b1 = ng.variable([K], 0.1, name="b", labels=("bias",))
            g.conv1 = ng.convolution(g.x, g.W1, padding=1).named("conv1_conv")
            g.add1 = (g.conv1 + g.b1).named("conv1_bias")
            g.relu1 = ng.relu(g.add1).named("conv1_relu")
        with ng.name_scope("pool1", kind="Pool", kinds=("Pool", *LAYER)):
            g.pool1 = ng.pooling(g.relu1, 2).named("pool1_pool")
        with ng.name_scope("conv2", kind="SepConv", kinds=("SepConv", "Conv", *LAYER)):
            g.W2 = ng.variable([K, R, S, K2], rng.standard_normal((3, 3, 3, 3)) * 0.3, name="W", labels=("weight",))
            g.b2 = ng.variable([K2], -0.05, name="b", labels=("bias",))
            g.conv2 = ng.convolution(g.pool1, g.W2, padding=1).named("conv2_conv")
            g.add2 = (g.conv2 + g.b2).named("conv2_bias")
            g.relu2 = ng.relu(g.add2).named("conv2_relu")
        with ng.name_scope("fc", kind="Affine", kinds=("Affine", *LAYER)):
            spatial = [axis for axis in g.relu2.axes if axis.name != "N"]  # K2, H:2, W:2
            g.W3 = ng.variable([F, *spatial], rng.standard_normal((5, 3, 2, 2)) * 0.3, name="W", labels=("weight",))
            g.b3 = ng.variable([F], 0.2, name="b", labels=("bias",))
            g.dot3 = ng.dot(g.W3, g.relu2).named("fc_dot")
            g.add3 = (g.dot3 + g.b3).named("fc_bias")
    g.tanh = ng.tanh(g.add3).named("out_tanh")
    g.out = (g.tanh * 2.0).named("out")
    g.x_value = rng.standard_normal((2, 4, 4, 3)).astype(np.float32)
    return g
