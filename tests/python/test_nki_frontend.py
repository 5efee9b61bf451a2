"""The NKI frontend (``torch_nki.nki``): hand-written NKI Python kernels (``examples/nki``) run
on the simulator against NumPy, and every way a kernel can go wrong gets a clear error naming
the Python line: an API the frontend does not implement, a hardware limit, a bad operand."""

from __future__ import annotations

import inspect
from pathlib import Path
from types import ModuleType
from typing import Any

import numpy as np
import pytest
import torch

import torch_nki
import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.errors import TraceError, ValidationError

EXAMPLES = Path(__file__).resolve().parents[2] / "examples" / "nki"


def _example(name: str) -> ModuleType:
    path = EXAMPLES / f"{name}.py"
    return nki.load_source(path.read_text(), name)


def _rand(*shape: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).uniform(-1, 1, shape).astype(np.float32)


@pytest.mark.parametrize(("k", "m", "n"), [(128, 128, 512), (300, 200, 700), (1, 5, 3)])
def test_tiled_matmul_matches_numpy(k: int, m: int, n: int) -> None:
    lhs_t, rhs = _rand(k, m), _rand(k, n, seed=1)
    got = nki.simulate(_example("matmul").matmul_tiled)(lhs_t, rhs)
    np.testing.assert_allclose(got, lhs_t.T.astype(np.float64) @ rhs, rtol=1e-5, atol=1e-5)


def test_tiled_matmul_in_bf16_through_torch_tensors() -> None:
    lhs_t = torch.rand(256, 130, dtype=torch.bfloat16)
    rhs = torch.rand(256, 600, dtype=torch.bfloat16)
    got = _example("matmul").matmul_tiled(lhs_t, rhs)
    assert got.dtype == torch.bfloat16 and got.shape == (130, 600)
    want = (lhs_t.float().T @ rhs.float()).to(torch.bfloat16)
    torch.testing.assert_close(got, want, rtol=1.6e-2, atol=1e-2)


@pytest.mark.parametrize(("rows", "cols"), [(300, 97), (1, 1), (128, 2000)])
def test_row_softmax_matches_numpy(rows: int, cols: int) -> None:
    x = _rand(rows, cols) * 20
    got = nki.simulate(_example("softmax").softmax_rows)(x)
    e = np.exp(x - x.max(axis=1, keepdims=True))
    np.testing.assert_allclose(got, e / e.sum(axis=1, keepdims=True), rtol=2e-6, atol=1e-7)


def test_bias_gelu_matches_numpy() -> None:
    x, bias = _rand(200, 1100), _rand(1100, seed=3)
    got = nki.simulate(_example("bias_gelu").bias_gelu)(x, bias)
    h = (x + bias).astype(np.float64)
    want = 0.5 * h * (1 + np.tanh(np.sqrt(2 / np.pi) * (h + 0.044715 * h**3)))
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-6)


def test_examples_trace_into_programs_with_their_lines_and_cost() -> None:
    module = _example("softmax")
    program = nki.trace(module.softmax_rows, _rand(300, 64))
    assert program.name == "softmax_rows" and program.target == "trn2"
    assert program.inputs() == [("x", [300, 64], "f32")]
    assert program.outputs() == [([300, 64], "f32")]
    assert "<nki:softmax:" in program.to_json()
    text, summary, _ = program.cost()
    assert "softmax_rows" in text and '"total_ns"' in summary
    # The program emits as NKI source again (unrolled: one scope per iteration).
    assert program.emit().count("nisa.activation_reduce(") == 3


def _line_of(fn: Any, marker: str) -> str:
    """``file:line`` of the line of ``fn`` containing ``marker``."""
    fn = inspect.unwrap(fn)
    lines, start = inspect.getsourcelines(fn)
    offset = next(i for i, text in enumerate(lines) if marker in text)
    return f"{inspect.getsourcefile(fn)}:{start + offset}"


def test_unsupported_api_names_the_call_and_line() -> None:
    @nki.jit
    def uses_arange(x):
        nl.arange(128)  # unsupported
        return x

    with pytest.raises(NotImplementedError, match=r"nl\.arange") as info:
        nki.simulate(uses_arange)(_rand(4, 4))
    assert _line_of(uses_arange, "# unsupported") in str(info.value)

    @nki.jit
    def selecting(x):
        t = nl.load(x)
        nisa.core_barrier(data=t, cores=[0, 1])  # a tile
        return x

    with pytest.raises(TraceError, match=r"core_barrier: data must be a tensor in shared HBM") as info:
        nki.simulate(selecting)(_rand(4, 4))
    assert _line_of(selecting, "# a tile") in str(info.value)
    with pytest.raises(AttributeError, match=r"NKI 0\.7 has no nisa\.no_such_instruction"):
        nisa.no_such_instruction  # noqa: B018


def test_hardware_limits_are_validation_errors_at_the_python_line() -> None:
    @nki.jit
    def too_many_partitions(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.ndarray((256, 4), dtype=nl.float32, buffer=nl.sbuf)  # too big
        nisa.memset(dst=t, value=0.0)
        nl.store(out, value=t)
        return out

    with pytest.raises(ValidationError) as info:
        nki.simulate(too_many_partitions)(_rand(256, 4))
    assert info.value.rule == "partition-dim"
    assert info.value.location == _line_of(too_many_partitions, "# too big")

    @nki.jit
    def sbuf_overflow(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        tiles = [nl.ndarray((128, 30000), dtype=nl.float32, buffer=nl.sbuf) for _ in range(2)]
        for t in tiles:
            nisa.memset(dst=t, value=0.0)
        nl.store(out, value=tiles[0][0:1, 0:4])
        return out

    with pytest.raises(ValidationError, match="sbuf") as info:
        nki.simulate(sbuf_overflow)(_rand(1, 4))
    assert info.value.location == _line_of(sbuf_overflow, "tiles = [")

    @nki.jit
    def reads_past_the_end(x):
        out = nl.ndarray((4, 4), dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x.ap(pattern=[[4, 4], [1, 4]], offset=8))  # past the end
        nl.store(out, value=t)
        return out

    with pytest.raises(ValidationError) as info:
        nki.simulate(reads_past_the_end)(_rand(4, 4))
    assert info.value.location == _line_of(reads_past_the_end, "# past the end")


def test_bad_operands_are_trace_errors_at_the_python_line() -> None:
    @nki.jit
    def mismatched_copy(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        a = nl.load(x)
        b = nl.ndarray((4, 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=b, src=a)  # shapes differ
        return out

    with pytest.raises(TraceError, match="tensor_copy: src has shape") as info:
        nki.simulate(mismatched_copy)(_rand(4, 4))
    assert info.value.location == _line_of(mismatched_copy, "# shapes differ")


def test_python_level_mistakes_get_clear_errors() -> None:
    @nki.jit
    def out_of_bounds(x):
        return nl.load(x[0:9, :])

    with pytest.raises(IndexError, match=r"slice \[0:9\] is out of bounds for dimension 0 of size 4"):
        nki.simulate(out_of_bounds)(_rand(4, 4))

    @nki.jit
    def stores_psum(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        acc = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.psum)
        nisa.memset(dst=acc, value=0.0)
        nl.store(out, value=acc)
        return out

    with pytest.raises(TypeError, match=r"nl\.store does not take PSUM tiles"):
        nki.simulate(stores_psum)(_rand(4, 4))

    @nki.jit
    def returns_a_tile(x):
        return nl.load(x)

    with pytest.raises(TypeError, match=r"must return the nl\.shared_hbm outputs it allocated"):
        nki.simulate(returns_a_tile)(_rand(4, 4))

    # Tiles and tensors kept from one call and used in the next: their ids would name other
    # tiles there (tile t1 exists in both calls below).
    kept: dict[str, Any] = {}

    @nki.jit
    def keeps(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        first, second = nl.load(x), nl.load(x)
        if "tile" in kept:
            nl.store(out, value=kept["tile"])
        else:
            nl.store(out, value=second)
            kept["tile"], kept["out"], kept["x"] = second, out, x
        assert first is not second
        return out

    nki.simulate(keeps)(_rand(4, 4))
    with pytest.raises(ValueError, match=r"tile t1 belongs to another kernel call's trace"):
        nki.simulate(keeps)(_rand(4, 4))

    @nki.jit
    def returns_a_kept_output(x):
        return kept["out"]

    with pytest.raises(TypeError, match="outputs it allocated in this call"):
        nki.simulate(returns_a_kept_output)(_rand(4, 4))

    @nki.jit
    def loads_a_kept_input(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(kept["x"]))
        return out

    with pytest.raises(ValueError, match="tensor x belongs to another kernel call's trace"):
        nki.simulate(loads_a_kept_input)(_rand(4, 4))

    with pytest.raises(RuntimeError, match="only work inside a kernel"):
        nl.ndarray((4, 4), dtype=nl.float32)

    with pytest.raises(NotImplementedError, match="tile-level call"):
        nl.add(1, 2)


def test_every_name_codegen_emits_is_implemented_with_its_keywords() -> None:
    api = torch_nki._native.nki_api()
    assert len(api) > 30
    modules = {"nki": nki, "nl": nl, "nisa": nisa}
    for name, keywords, doc in api:
        assert doc.startswith("https://awsdocs-neuron.readthedocs-hosted.com/"), name
        if "." in name:
            prefix, *attrs = name.split(".")
            target = modules[prefix]
            for attr in attrs:  # `nisa.reduce_cmd.reset_reduce`
                target = getattr(target, attr)
        else:
            target = getattr(nki._values.HbmView, name)  # `tensor.ap(...)`
        if keywords:
            params = inspect.signature(target).parameters
            missing = [k for k in keywords if k not in params]
            assert not missing, f"{name} lacks keyword(s) {missing}"


def test_as_nki_makes_import_nki_resolve_to_the_frontend_and_restores() -> None:
    import sys

    before = sys.modules.get("nki")
    with nki.as_nki():
        import nki as imported  # type: ignore[import-not-found]
        import nki.language as imported_nl  # type: ignore[import-not-found]

        assert imported is nki and imported_nl is nl
    assert sys.modules.get("nki") is before


@nki.jit
def one_hot_and_gather(x, idx):
    """``(one_hot, picked, selected)`` of ``x`` ``[P, N]`` at the per-row column ``idx`` ``[P, 1]``:
    an iota of the column indices compared with ``idx`` (``nl.equal``), and ``x[p, idx[p]]``
    through two ``range_select`` calls over the halves of the row (the second with
    ``range_start``) reduced with max."""
    p, n = x.shape
    half = n // 2
    one_hot = nl.ndarray((p, n), dtype=nl.float32, buffer=nl.shared_hbm)
    picked = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.shared_hbm)
    selected = nl.ndarray((p, n), dtype=nl.float32, buffer=nl.shared_hbm)
    lo = nl.load(idx)
    hi = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=hi, data=lo, op0=nl.add, operand0=1.0)
    cols = nl.ndarray((p, n), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=cols, pattern=[[half, 2], [1, half]], offset=0)
    hot = nl.ndarray((p, n), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_scalar(dst=hot, data=cols, op0=nl.equal, operand0=lo)
    nl.store(one_hot, value=hot)
    xt = nl.load(x)
    out = nl.ndarray((p, n), dtype=nl.float32, buffer=nl.sbuf)
    halves = nl.ndarray((p, 2), dtype=nl.float32, buffer=nl.sbuf)
    for k in nl.static_range(2):
        nisa.range_select(
            dst=out[:, k * half : (k + 1) * half],
            on_true_tile=xt[:, k * half : (k + 1) * half],
            comp_op0=nl.greater_equal,
            comp_op1=nl.less,
            bound0=lo,
            bound1=hi,
            reduce_cmd=nisa.reduce_cmd.reset_reduce,
            reduce_res=halves[:, k : k + 1],
            reduce_op=nl.maximum,
            range_start=k * half,
            on_false_value=float("-inf"),
        )
    best = nl.ndarray((p, 1), dtype=nl.float32, buffer=nl.sbuf)
    nisa.tensor_reduce(dst=best, op=nl.maximum, data=halves, axis=1)
    nl.store(picked, value=best)
    nl.store(selected, value=out)
    return one_hot, picked, selected


def _indices(p: int, n: int) -> np.ndarray:
    idx = (np.arange(p) * 13 % n).astype(np.float32)
    idx[3] = n  # past the end: no hot column, nothing selected
    return idx.reshape(p, 1)


def test_iota_comparisons_and_range_select_match_numpy() -> None:
    p, n = 96, 80
    x, idx = _rand(p, n), _indices(p, n)
    one_hot, picked, selected = nki.simulate(one_hot_and_gather)(x, idx)
    cols = np.arange(n, dtype=np.float32)[None, :]
    hit = cols == idx
    np.testing.assert_array_equal(one_hot, hit.astype(np.float32))
    np.testing.assert_array_equal(selected, np.where(hit, x, -np.inf).astype(np.float32))
    want = np.where(hit, x, -np.inf).max(axis=1, keepdims=True)
    np.testing.assert_array_equal(picked, want)
    assert picked[3, 0] == -np.inf

    # iota's partition term and int32 offset; every comparison, NaN comparing false except
    # not_equal.
    @nki.jit
    def grid_and_compare(a, b):
        grid = nl.ndarray((4, 6), dtype=nl.int32, buffer=nl.shared_hbm)
        g = nl.ndarray((4, 6), dtype=nl.int32, buffer=nl.sbuf)
        nisa.iota(dst=g, pattern=[[2, 6]], offset=5, channel_multiplier=-3)
        nl.store(grid, value=g)
        ops = (nl.equal, nl.not_equal, nl.greater, nl.greater_equal, nl.less, nl.less_equal)
        out = nl.ndarray((len(ops), 6), dtype=nl.float32, buffer=nl.shared_hbm)
        ta, tb = nl.load(a), nl.load(b)
        for i, op in enumerate(ops):
            r = nl.ndarray((1, 6), dtype=nl.float32, buffer=nl.sbuf)
            nisa.tensor_tensor(dst=r, data1=ta, data2=tb, op=op)
            nl.store(out[i : i + 1, :], value=r)
        return grid, out

    nan = np.float32("nan")
    a = np.array([[1, 1, 2, nan, 1, nan]], np.float32)
    b = np.array([[1, 2, 1, 1, nan, nan]], np.float32)
    grid, compared = nki.simulate(grid_and_compare)(a, b)
    np.testing.assert_array_equal(grid, 5 - 3 * np.arange(4)[:, None] + 2 * np.arange(6)[None, :])
    with np.errstate(invalid="ignore"):
        want = [np.equal, np.not_equal, np.greater, np.greater_equal, np.less, np.less_equal]
        np.testing.assert_array_equal(compared, np.concatenate([f(a, b) for f in want]).astype(np.float32))


def test_iota_and_range_select_emit_and_trace_back_to_the_same_program() -> None:
    x, idx = _rand(64, 40), _indices(64, 40)
    program = nki.trace(one_hot_and_gather, x, idx)
    source = program.emit()
    assert "nisa.iota(dst=t2, pattern=[[1, 40]], offset=0, channel_multiplier=0)" in source
    assert (
        "nisa.range_select(dst=t5[0:64, 20:40], on_true_tile=t4[0:64, 20:40], comp_op0=nl.greater_equal, "
        "comp_op1=nl.less, bound0=t0, bound1=t1, reduce_cmd=nisa.reduce_cmd.reset_reduce, "
        "reduce_res=t6[0:64, 1:2], reduce_op=nl.maximum, range_start=20, on_false_value=float('-inf'))"
    ) in source
    assert "op0=nl.equal" in source
    again = nki.trace(nki.load_source(source, "one_hot_and_gather").one_hot_and_gather, x, idx)
    assert again.difference(program) is None
    text, _, _ = program.cost()
    assert "gpsimd" in text and "range_select" in program.to_json()


def test_range_select_needs_trn2_and_iota_cannot_write_psum() -> None:
    x, idx = _rand(8, 10), _indices(8, 10)
    with pytest.raises(ValidationError, match=r"range_select needs NeuronCore-v3 \(Trn2\) or newer") as info:
        nki.simulate(nki.jit(one_hot_and_gather.fn, target="trn1"))(x, idx)
    assert info.value.rule == "isa-target"

    @nki.jit
    def iota_into_psum(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        acc = nl.ndarray((8, 10), dtype=nl.float32, buffer=nl.psum)
        nisa.iota(dst=acc, pattern=[[1, 10]], offset=0)  # psum
        t = nl.ndarray((8, 10), dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=t, src=acc)
        nl.store(out, value=t)
        return out

    with pytest.raises(ValidationError, match="iota runs on GpSimd, which cannot access PSUM") as info:
        nki.simulate(iota_into_psum)(x)
    assert info.value.rule == "gpsimd-psum"
    assert info.value.location == _line_of(iota_into_psum, "# psum")


@nki.jit
def iota_patterns(x):
    """Three iota patterns over a (4, 12) tile, stored side by side: several progressions
    (columns in transposed order), one written as two (it is one), and a one-column one."""
    out = nl.ndarray((4, 25), dtype=nl.int32, buffer=nl.shared_hbm)
    t = nl.ndarray((4, 25), dtype=nl.int32, buffer=nl.sbuf)
    nisa.iota(dst=t[:, 0:12], pattern=[[1, 3], [3, 4]], offset=100, channel_multiplier=1000)
    nisa.iota(dst=t[:, 12:24], pattern=[[4, 3], [1, 4]], offset=-5, channel_multiplier=0)
    nisa.iota(dst=t[:, 24:25], pattern=[[7, 1]], offset=9, channel_multiplier=2)
    nl.store(out, value=t)
    return out


def test_iota_patterns_of_several_progressions_walk_the_free_elements_as_nested_loops() -> None:
    got = nki.simulate(iota_patterns)(np.zeros((4, 25), np.float32))
    p = np.arange(4)[:, None]
    outer, inner = np.meshgrid(np.arange(3), np.arange(4), indexing="ij")
    transposed = (100 + outer * 1 + inner * 3).reshape(-1)
    np.testing.assert_array_equal(got[:, 0:12], 1000 * p + transposed)
    np.testing.assert_array_equal(got[:, 12:24], np.broadcast_to(np.arange(12) - 5, (4, 12)))
    np.testing.assert_array_equal(got[:, 24], 9 + 2 * np.arange(4))
    program = nki.trace(iota_patterns, np.zeros((4, 25), np.float32))
    source = program.emit()
    assert "pattern=[[1, 3], [3, 4]]" in source
    assert "pattern=[[1, 12]]" in source  # [[4, 3], [1, 4]] is one progression
    again = nki.trace(nki.load_source(source, "iota_patterns").iota_patterns, np.zeros((4, 25), np.float32))
    assert again.difference(program) is None


def test_iota_and_range_select_operand_errors() -> None:
    def kernel(body: Any) -> Any:
        @nki.jit
        def k(x):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            t = nl.load(x)
            body(t)
            nl.store(out, value=t)
            return out

        return nki.simulate(k)

    x = _rand(8, 16)
    with pytest.raises(ValueError, match="covers 12 elements per partition but dst has 16"):
        kernel(lambda t: nisa.iota(dst=t, pattern=[[1, 12]], offset=0))(x)
    with pytest.raises(TypeError, match="offset must be an int"):
        kernel(lambda t: nisa.iota(dst=t, pattern=[[1, 16]], offset=0.5))(x)

    def select(t: Any, comp: Any, **kwargs: Any) -> None:
        b = nl.ndarray((8, 1), dtype=nl.float32, buffer=nl.sbuf)
        nisa.memset(dst=b, value=3.0)
        nisa.range_select(
            dst=t, on_true_tile=t, comp_op0=comp, comp_op1=nl.less, bound0=b, bound1=b, **kwargs
        )

    with pytest.raises(TraceError, match=r"comp_op0 is nl\.not_equal, but it must be one of nl\.equal"):
        kernel(lambda t: select(t, nl.not_equal))(x)
    with pytest.raises(NotImplementedError, match="reduce_cmd"):
        kernel(
            lambda t: select(
                t,
                nl.greater,
                reduce_cmd=nisa.reduce_cmd.idle,
                reduce_res=nl.ndarray((8, 1), dtype=nl.float32, buffer=nl.sbuf),
            )
        )(x)
    # Without a reduction, on_false_value defaults to 0.0 (NKI's latest documented default).
    got = kernel(lambda t: select(t, nl.greater_equal))(x)
    np.testing.assert_array_equal(got, np.zeros_like(x))


def test_tensor_tensor_on_gpsimd_computes_the_same_emits_its_engine_and_stays_out_of_psum() -> None:
    @nki.jit
    def scaled_sum(a, b):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        ta, tb = nl.load(a), nl.load(b)
        t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_tensor(dst=t, data1=ta, data2=tb, op=nl.multiply, engine=nisa.engine.gpsimd)
        nisa.tensor_tensor(dst=t, data1=t, data2=ta, op=nl.add, engine=nisa.engine.vector)
        nl.store(out, value=t)
        return out

    a, b = _rand(16, 24, seed=1), _rand(16, 24, seed=2)
    got = nki.simulate(scaled_sum)(a, b)
    np.testing.assert_array_equal(got, a * b + a)
    program = nki.trace(scaled_sum, a, b)
    source = program.emit()
    assert "op=nl.multiply, engine=nisa.engine.gpsimd)" in source
    assert "op=nl.add)" in source  # the vector engine is the default: no keyword
    again = nki.trace(nki.load_source(source, "scaled_sum").scaled_sum, a, b)
    assert again.difference(program) is None
    text, _, _ = program.cost()
    assert "gpsimd" in text

    @nki.jit
    def sum_into_psum(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        ta = nl.load(a)
        acc = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.psum)
        nisa.tensor_tensor(dst=acc, data1=ta, data2=ta, op=nl.add, engine=nisa.engine.gpsimd)  # psum
        t = nl.ndarray(a.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.tensor_copy(dst=t, src=acc)
        nl.store(out, value=t)
        return out

    with pytest.raises(ValidationError, match="tensor_tensor on GpSimd cannot access PSUM") as info:
        nki.simulate(sum_into_psum)(a)
    assert info.value.rule == "gpsimd-psum"
    assert info.value.location == _line_of(sum_into_psum, "# psum")

    @nki.jit
    def on_the_scalar_engine(a):
        out = nl.ndarray(a.shape, dtype=a.dtype, buffer=nl.shared_hbm)
        ta = nl.load(a)
        nisa.tensor_tensor(dst=ta, data1=ta, data2=ta, op=nl.add, engine=nisa.engine.scalar)
        nl.store(out, value=ta)
        return out

    with pytest.raises(ValueError, match=r"nisa\.tensor_tensor: engine must be one of .*engine\.gpsimd"):
        nki.simulate(on_the_scalar_engine)(a)


def test_bn_stats_and_bn_aggr_give_mean_and_variance_and_trace_back() -> None:
    @nki.jit
    def moments(x):
        out = nl.ndarray((x.shape[0], 2), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        stats = nl.ndarray((x.shape[0], 12), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_stats(dst=stats[:, 0:6], data=t[:, 0:512])
        nisa.bn_stats(dst=stats[:, 6:12], data=t[:, 512 : x.shape[1]])
        m = nl.ndarray((x.shape[0], 2), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_aggr(dst=m, data=stats)
        nl.store(out, value=m)
        return out

    x = _rand(20, 700, seed=3) + np.arange(20, dtype=np.float32)[:, None]
    got = nki.simulate(moments)(x)
    np.testing.assert_allclose(got[:, 0], x.astype(np.float64).mean(axis=1), rtol=1e-6)
    np.testing.assert_allclose(got[:, 1], x.astype(np.float64).var(axis=1), rtol=1e-4)
    program = nki.trace(moments, x)
    source = program.emit()
    assert "nisa.bn_stats(dst=t1[0:20, 6:12], data=t0[0:20, 512:700])" in source
    assert "nisa.bn_aggr(dst=t2, data=t1)" in source
    again = nki.trace(nki.load_source(source, "moments").moments, x)
    assert again.difference(program) is None

    @nki.jit
    def too_wide(x):
        out = nl.ndarray((x.shape[0], 6), dtype=nl.float32, buffer=nl.shared_hbm)
        t = nl.load(x)
        stats = nl.ndarray((x.shape[0], 6), dtype=nl.float32, buffer=nl.sbuf)
        nisa.bn_stats(dst=stats, data=t)  # wide
        nl.store(out, value=stats)
        return out

    with pytest.raises(TraceError, match="bn_stats: data has 700 elements per partition") as info:
        nki.simulate(too_wide)(x)
    assert _line_of(too_wide, "# wide") in str(info.value)


@nki.jit
def center_scale_and_mix(x, c, y):
    """``t = (x - c) * y`` then ``out = t * 0.5 + x``: a column and an immediate ``operand0``."""
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    tx, tc, ty = nl.load(x), nl.load(c), nl.load(y)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    nisa.scalar_tensor_tensor(dst=t, data=tx, op0=nl.subtract, operand0=tc, op1=nl.multiply, operand1=ty)
    nisa.scalar_tensor_tensor(dst=t, data=t, op0=nl.multiply, operand0=0.5, op1=nl.add, operand1=tx)
    nl.store(out, value=t)
    return out


def test_scalar_tensor_tensor_matches_numpy_and_torch_and_traces_back() -> None:
    x, c, y = _rand(100, 70, seed=4), _rand(100, 1, seed=5), _rand(100, 70, seed=6)
    got = nki.simulate(center_scale_and_mix)(x, c, y)
    np.testing.assert_array_equal(got, ((x - c) * y) * np.float32(0.5) + x)

    # bf16 tiles, an fp32 column: fp32 inside each instruction, rounded once per instruction.
    xb, yb = torch.from_numpy(x).to(torch.bfloat16), torch.from_numpy(y).to(torch.bfloat16)
    cf = torch.from_numpy(c) * 37
    got_bf16 = center_scale_and_mix(xb, cf, yb)
    assert got_bf16.dtype == torch.bfloat16
    t = ((xb.float() - cf) * yb.float()).to(torch.bfloat16)
    torch.testing.assert_close(got_bf16, (t.float() * 0.5 + xb.float()).to(torch.bfloat16), rtol=0, atol=0)

    program = nki.trace(center_scale_and_mix, x, c, y)
    source = program.emit()
    first = "nisa.scalar_tensor_tensor(dst=t3, data=t0, op0=nl.subtract, operand0=t1, "
    assert first + "op1=nl.multiply, operand1=t2)" in source
    assert "op0=nl.multiply, operand0=0.5, op1=nl.add, operand1=t0)" in source
    again = nki.trace(nki.load_source(source, "center_scale_and_mix").center_scale_and_mix, x, c, y)
    assert again.difference(program) is None
    text, _, _ = program.cost()
    # Both instructions run on the vector engine.
    vector = [line for line in text.splitlines() if line.split()[:1] == ["vector"]]
    assert len(vector) == 1 and "2 instructions" in vector[0], text


def test_scalar_tensor_tensor_errors() -> None:
    @nki.jit
    def both_in_psum(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        tx = nl.load(x)
        a = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum)
        b = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.psum)
        nisa.tensor_copy(dst=a, src=tx)
        nisa.tensor_copy(dst=b, src=tx)
        t = nl.ndarray(x.shape, dtype=nl.float32, buffer=nl.sbuf)
        nisa.scalar_tensor_tensor(dst=t, data=a, op0=nl.add, operand0=1.0, op1=nl.add, operand1=b)  # psum
        nl.store(out, value=t)
        return out

    x = _rand(8, 16)
    both = r"scalar_tensor_tensor: data t\d+ and operand1 t\d+ are both in PSUM"
    with pytest.raises(ValidationError, match=both) as info:
        nki.simulate(both_in_psum)(x)
    assert info.value.rule == "psum-both-inputs"
    assert info.value.location == _line_of(both_in_psum, "# psum")

    def kernel(call):
        @nki.jit
        def k(x):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            t = nl.load(x)
            call(t)
            nl.store(out, value=t)
            return out

        return k

    shapes = r"scalar_tensor_tensor: operand1 has shape \[8, 8\] but dst has shape \[8, 16\]"
    with pytest.raises(TraceError, match=shapes):
        nki.simulate(
            kernel(
                lambda t: nisa.scalar_tensor_tensor(
                    dst=t, data=t, op0=nl.add, operand0=1.0, op1=nl.add, operand1=t[:, 0:8]
                )
            )
        )(x)
    with pytest.raises(TypeError, match=r"nisa\.scalar_tensor_tensor: operand1 must be a tile"):
        nki.simulate(
            kernel(
                lambda t: nisa.scalar_tensor_tensor(
                    dst=t, data=t, op0=nl.add, operand0=1.0, op1=nl.add, operand1=2.0
                )
            )
        )(x)


@nki.jit
def mix_with_row_stats(x, c, y):
    """``out = x * c + y`` with, per row, the max of ``x * c + y`` and the sum of ``(x - 0.5) * y``
    (each over the fp32 results) in ``stats`` ``[P, 2]``: ``scalar_tensor_tensor`` with
    ``reduce_op``/``reduce_res``."""
    p = x.shape[0]
    out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
    stats = nl.ndarray((p, 2), dtype=nl.float32, buffer=nl.shared_hbm)
    tx, tc, ty = nl.load(x), nl.load(c), nl.load(y)
    t = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    u = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.sbuf)
    s = nl.ndarray((p, 2), dtype=nl.float32, buffer=nl.sbuf)
    nisa.scalar_tensor_tensor(
        dst=t,
        data=tx,
        op0=nl.multiply,
        operand0=tc,
        op1=nl.add,
        operand1=ty,
        reduce_op=nl.maximum,
        reduce_res=s[:, 0:1],
    )
    nisa.scalar_tensor_tensor(
        dst=u,
        data=tx,
        op0=nl.subtract,
        operand0=0.5,
        op1=nl.multiply,
        operand1=ty,
        reduce_op=nl.add,
        reduce_res=s[:, 1:2],
    )
    nl.store(out, value=t)
    nl.store(stats, value=s)
    return out, stats


def test_scalar_tensor_tensor_reduce_matches_numpy_and_torch_and_traces_back() -> None:
    x, c, y = _rand(100, 70, seed=7), _rand(100, 1, seed=8), _rand(100, 70, seed=9)
    out, stats = nki.simulate(mix_with_row_stats)(x, c, y)
    r = x * c + y
    np.testing.assert_array_equal(out, r)
    np.testing.assert_array_equal(stats[:, 0], r.max(axis=1))
    np.testing.assert_allclose(stats[:, 1], ((x - np.float32(0.5)) * y).sum(axis=1), rtol=1e-5, atol=1e-5)

    # bf16 tiles: dst is rounded to bf16, the reductions are of the fp32 results.
    xb, yb = torch.from_numpy(x).to(torch.bfloat16), torch.from_numpy(y).to(torch.bfloat16)
    cf = torch.from_numpy(c) * 3.3
    out_bf16, stats_bf16 = mix_with_row_stats(xb, cf, yb)
    assert out_bf16.dtype == torch.bfloat16 and stats_bf16.dtype == torch.float32
    rf = xb.float() * cf + yb.float()
    torch.testing.assert_close(out_bf16, rf.to(torch.bfloat16), rtol=0, atol=0)
    torch.testing.assert_close(stats_bf16[:, 0], rf.max(dim=1).values, rtol=0, atol=0)
    assert not torch.equal(stats_bf16[:, 0], out_bf16.float().max(dim=1).values)
    sums = ((xb.float() - 0.5) * yb.float()).sum(dim=1)
    torch.testing.assert_close(stats_bf16[:, 1], sums, rtol=1e-5, atol=1e-5)

    program = nki.trace(mix_with_row_stats, x, c, y)
    source = program.emit()
    assert "op1=nl.add, operand1=t2, reduce_op=nl.maximum, reduce_res=t5[0:100, 0:1])" in source
    assert "op1=nl.multiply, operand1=t2, reduce_op=nl.add, reduce_res=t5[0:100, 1:2])" in source
    again = nki.trace(nki.load_source(source, "mix_with_row_stats").mix_with_row_stats, x, c, y)
    assert again.difference(program) is None


def test_scalar_tensor_tensor_reduce_errors() -> None:
    @nki.jit
    def reduce_op_alone(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        nisa.scalar_tensor_tensor(
            dst=t, data=t, op0=nl.multiply, operand0=2.0, op1=nl.add, operand1=t, reduce_op=nl.add
        )
        nl.store(out, value=t)
        return out

    x = _rand(8, 16)
    # NKI 0.7 keeps such a reduction in the accumulator registers, which is not implemented.
    alone = r"does not implement nisa\.scalar_tensor_tensor\(reduce_op=nl\.add\)"
    with pytest.raises(NotImplementedError, match=alone) as info:
        nki.simulate(reduce_op_alone)(x)
    assert _line_of(reduce_op_alone, "nisa.scalar_tensor_tensor(") in str(info.value)

    def reducing(res_cols: int, **reduce: Any) -> Any:
        """A kernel whose one ``scalar_tensor_tensor`` passes ``reduce`` (``reduce_res`` the
        first ``res_cols`` columns of a ``[P, 2]`` tile)."""

        @nki.jit
        def k(x):
            out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
            t = nl.load(x)
            res = nl.ndarray((x.shape[0], 2), dtype=nl.float32, buffer=nl.sbuf)
            if res_cols:
                reduce["reduce_res"] = res[:, 0:res_cols]
            nisa.scalar_tensor_tensor(t, t, nl.multiply, 2.0, nl.add, t, **reduce)
            nl.store(out, value=t)
            return out

        return k

    with pytest.raises(ValueError, match=r"nisa\.scalar_tensor_tensor: reduce_res needs reduce_op"):
        nki.simulate(reducing(1))(x)
    not_a_reduction = r"scalar_tensor_tensor: Subtract is not a reduction operator"
    with pytest.raises(TraceError, match=not_a_reduction):
        nki.simulate(reducing(1, reduce_op=nl.subtract))(x)
    wide = r"scalar_tensor_tensor: reduce_res must be a \(8, 1\) column, got shape \[8, 2\]"
    with pytest.raises(TraceError, match=wide):
        nki.simulate(reducing(2, reduce_op=nl.add))(x)
    idle = nisa.reduce_cmd.idle
    with pytest.raises(NotImplementedError, match=r"nisa\.scalar_tensor_tensor\(reduce_cmd="):
        nki.simulate(reducing(1, reduce_op=nl.add, reduce_cmd=idle))(x)


def test_observer_receives_each_stage() -> None:
    @nki.jit
    def copy(x: Any) -> Any:
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(x))
        return out

    events: list[tuple[str, str, str | None]] = []
    with nki.observe(lambda k, stage, e: events.append((k.__name__, stage, type(e).__name__ if e else None))):
        copy(np.ones((2, 2), np.float32))
        with pytest.raises(ValidationError, match="partition"):
            copy(np.ones((200, 2), np.float32))
    copy(np.ones((2, 2), np.float32))  # no observer any more
    assert events == [
        ("copy", "trace", None),
        ("copy", "validate", None),
        ("copy", "simulate", None),
        ("copy", "trace", None),
        ("copy", "validate", "ValidationError"),
    ]
    assert copy.target == "trn2" and copy.pinned_target is None
    with nki.default_target("trn1"):
        assert copy.target == "trn1" and nki.jit(target="trn3")(copy.fn).target == "trn3"
    assert copy.target == "trn2"
