"""The CuPy-surface checker itself: each test would fail if the checker let its violation through,
or rejected what CuPy 14.2 accepts."""

from __future__ import annotations

import numpy as np
import pytest
from cupy_surface import API, CupySurface, CupySurfaceTransformer, DeviceArray, register

import ngraph_core as ng
from ngraph_core import OpType

xp = CupySurface()


def test_api_list_is_cupy_14_2() -> None:
    assert "einsum" in API["cupy"] and "errstate" not in API["cupy"] and "erf" not in API["cupy"]
    assert "get" in API["ndarray"] and "itemset" not in API["ndarray"]


@pytest.mark.parametrize("name", ["errstate", "erf", "float128", "trapz_nonexistent"])
def test_missing_module_function_raises(name: str) -> None:
    with pytest.raises(AttributeError, match=f"module 'cupy' has no attribute '{name}'"):
        getattr(xp, name)


def test_missing_ndarray_method_raises() -> None:
    a = xp.zeros((2, 3))
    with pytest.raises(AttributeError, match="cupy.ndarray has no attribute 'itemset'"):
        a.itemset(0, 1.0)
    with pytest.raises(AttributeError, match="'setflags'"):
        a.setflags(write=False)


@pytest.mark.parametrize("call", [lambda a: np.einsum("ij->j", a), lambda a: np.add(a, a), lambda a: np.exp(a),
                                  lambda a: np.sum(a), lambda a: np.concatenate([a, a])])
def test_numpy_function_on_device_array_raises(call) -> None:
    with pytest.raises(TypeError, match=r"got a device array .*hint: use xp\."):
        call(xp.ones((2, 3)))


@pytest.mark.parametrize("call", [lambda a, h: xp.add(a, h), lambda a, h: xp.where(h > 0, a, 0.0),
                                  lambda a, h: xp.concatenate([a, h]), lambda a, h: a + h,
                                  lambda a, h: xp.copyto(a, h), lambda a, h: a.__setitem__(slice(None), h)])
def test_host_array_to_device_function_raises(call) -> None:
    with pytest.raises(TypeError, match="Unsupported type <class 'numpy.ndarray'>"):
        call(xp.ones((2, 3)), np.ones((2, 3)))


def test_host_arrays_enter_through_asarray_and_array() -> None:
    host = np.arange(6.0).reshape(2, 3)
    for convert in (xp.asarray, xp.array, xp.ascontiguousarray, xp.asanyarray):
        dev = convert(host)
        assert type(dev) is DeviceArray and np.array_equal(dev.get(), host)
    dev = xp.asarray(host, dtype=xp.float32)
    assert xp.asarray(dev) is dev and xp.asarray(dev, dtype="float32") is dev  # as on CuPy: no copy
    assert xp.asarray(dev, dtype=xp.float64).dtype == np.float64


def test_names_cupy_shares_with_numpy_work() -> None:
    a = xp.arange(6.0, dtype=xp.float32).reshape(2, 3)
    out = xp.empty((3,), dtype=xp.float32)
    assert xp.sum(a, axis=0, out=out) is out
    np.testing.assert_array_equal(out.get(), [3.0, 5.0, 7.0])
    np.testing.assert_array_equal(xp.einsum("ij->i", a).get(), [3.0, 12.0])
    windows = xp.lib.stride_tricks.sliding_window_view(xp.arange(5), 3)
    assert type(windows) is DeviceArray and windows.shape == (3, 3)
    assert xp.newaxis is None and xp.float32 is np.float32 and xp.pi == np.pi and xp.__name__ == "cupy"
    assert isinstance(a, xp.ndarray)


def test_operators_and_indexing_stay_on_device() -> None:
    a = xp.arange(6.0).reshape(2, 3)
    b = xp.ones((2, 3))
    for value in (a + b, a * 2.0, -a, a @ b.T, a > 1.0, a[0], a[:, 1:], a[a > 2.0], abs(a), 2.0 ** a):
        assert type(value) is DeviceArray
    a[0, :] = xp.asarray([9.0, 8.0, 7.0])
    a += b
    a[1] *= 2.0
    np.testing.assert_array_equal(a.get(), [[10.0, 9.0, 8.0], [8.0, 10.0, 12.0]])
    assert type(a.T) is DeviceArray and type(a.reshape(3, 2)) is DeviceArray


def test_reduction_returns_zero_dim_device_array() -> None:
    a = xp.arange(4.0)
    for value in (xp.sum(a), a.max(), xp.any(a > 2.0), a[2]):
        assert type(value) is DeviceArray and value.shape == ()
    assert float(xp.sum(a)) == 6.0


def test_reduction_keywords_cupy_lacks_raise() -> None:
    with pytest.raises(TypeError, match="where"):
        xp.sum(xp.ones(3), where=xp.ones(3, dtype=bool))


def test_ufunc_at_only_where_cupy_scatters() -> None:
    target = xp.zeros(3)
    xp.add.at(target, xp.asarray([0, 0, 2]), 1.0)
    np.testing.assert_array_equal(target.get(), [2.0, 0.0, 1.0])
    with pytest.raises(AttributeError, match="multiply.at is not supported"):
        xp.multiply.at(target, xp.asarray([0]), 2.0)
    with pytest.raises(TypeError, match="subtract.at only supports int32"):
        xp.subtract.at(target, xp.asarray([0]), 2.0)
    counts = xp.zeros(3, dtype=xp.int32)
    xp.subtract.at(counts, xp.asarray([1, 1]), 1)
    np.testing.assert_array_equal(counts.get(), [0, -2, 0])


def test_ufunc_reduce_and_where_only_as_cupy_has_them() -> None:
    """Measured on CuPy 14.2: add/multiply reduce; maximum/minimum/logical_or.reduce do not; no where=."""
    a = xp.arange(6.0).reshape(2, 3)
    np.testing.assert_array_equal(xp.add.reduce(a, axis=1).get(), [3.0, 12.0])
    for name in ("maximum", "minimum", "logical_or", "subtract"):
        with pytest.raises(AttributeError, match="NotImplementedError on CuPy 14.2"):
            getattr(xp, name).reduce(a, axis=1)
    with pytest.raises(TypeError, match="Wrong arguments"):
        xp.exp(a, where=a > 1.0, out=xp.zeros_like(a))
    assert type(a[np.array([1, 0])]) is DeviceArray  # host index arrays are fine


def test_default_rng_exposes_only_cupy_generator_methods() -> None:
    gen = xp.random.default_rng(3)
    out = xp.empty((4, 5), dtype=xp.float32)
    gen.standard_normal(dtype=xp.float32, out=out)
    assert type(out) is DeviceArray and float(xp.abs(out).sum()) > 0
    assert gen.uniform(0.0, 1.0, size=(3,), dtype=xp.float32).dtype == np.float32  # CuPy's uniform takes dtype
    for missing in ("bit_generator", "spawn", "normal", "permutation"):
        with pytest.raises(AttributeError, match="cupy.random.Generator has no attribute"):
            getattr(gen, missing)
    with pytest.raises(AttributeError, match="module 'cupy.random' has no attribute 'Philox'"):
        xp.random.Philox  # noqa: B018


def test_transformer_runs_a_computation_and_returns_numpy() -> None:
    assert register() == "cupy_surface" == register()
    x = ng.placeholder([ng.make_axis(3, "C")])
    with ng.transformers.make_transformer("cupy_surface") as t:
        got = t.computation(ng.tanh(x) * 2.0, x)(np.array([0.0, 1.0, -1.0]))
    assert type(got) is np.ndarray and got.dtype == np.float32
    np.testing.assert_allclose(got, np.tanh([0.0, 1.0, -1.0]) * 2.0, rtol=1e-6)


def test_transformer_catches_a_numpy_only_kernel() -> None:
    """A kernel that calls np.* on its inputs fails on the checker (as it would on a GPU)."""

    def numpy_exp(op, kc):
        return lambda out, x: np.exp(x, out=out)

    class Leaky(CupySurfaceTransformer):
        kernel_overrides = {**CupySurfaceTransformer.kernel_overrides, OpType.EXP: numpy_exp}

    register()
    x = ng.placeholder([ng.make_axis(3, "C")])
    with Leaky(optimize=False) as t:
        f = t.computation(ng.exp(x), x)
        with pytest.raises(TypeError, match="numpy.exp got a device array"):
            f(np.zeros(3))


def test_cupy_14_2_min_with_out_is_rejected() -> None:
    """Measured on the H100: CuPy 14.2's min/amin/ndarray.min(out=) raise TypeError; max(out=) works."""
    a, out = xp.ones((2, 3)), xp.empty((2,))
    for call in (lambda: xp.min(a, axis=1, out=out), lambda: xp.amin(a, axis=1, out=out),
                 lambda: a.min(axis=1, out=out)):
        with pytest.raises(TypeError, match="fails on CuPy 14.2"):
            call()
    assert xp.max(a, axis=1, out=out) is out


def test_cupy_14_2_random_out_without_size_fills_one_value() -> None:
    """Measured on the H100: Generator.random(out=o) without size= writes one value everywhere."""
    gen = xp.random.default_rng(0)
    out = xp.empty((3, 4), dtype=xp.float32)
    gen.random(dtype=xp.float32, out=out)
    assert int(xp.unique(out).size) == 1
    gen.random(size=out.shape, dtype=xp.float32, out=out)
    assert int(xp.unique(out).size) == 12


def test_host_reads_are_counted() -> None:
    """Every way a kernel can pull a device value to the host counts once; arithmetic does not."""
    import cupy_surface

    xp = cupy_surface.CupySurface()
    a = xp.arange(6.0).reshape(2, 3)
    before = cupy_surface.HOST_READS[0]
    b = (a * 2 + 1).sum(axis=0)  # device work only
    assert cupy_surface.HOST_READS[0] == before
    reads = [lambda: bool(xp.any(a > 3)), lambda: float(b[0]), lambda: int(xp.argmax(b)), lambda: a.tolist(),
             lambda: b.get(), lambda: a[0, 0].item(), lambda: xp.asnumpy(a), lambda: [0, 1, 2][xp.argmax(b)]]
    for k, read in enumerate(reads, start=1):
        read()
        assert cupy_surface.HOST_READS[0] == before + k, f"read {k} not counted"
