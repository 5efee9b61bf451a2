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
    def uses_iota(x):
        nl.arange(128)  # unsupported
        return x

    with pytest.raises(NotImplementedError, match=r"nl\.arange") as info:
        nki.simulate(uses_iota)(_rand(4, 4))
    assert _line_of(uses_iota, "# unsupported") in str(info.value)

    @nki.jit
    def transposing_matmul(x):
        out = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.shared_hbm)
        a = nl.load(x)
        acc = nl.ndarray((4, 4), dtype=nl.float32, buffer=nl.psum)
        nisa.nc_matmul(dst=acc, stationary=a, moving=a, is_transpose=True)  # unsupported
        return out

    with pytest.raises(NotImplementedError, match=r"nisa.nc_matmul: keyword\(s\) \['is_transpose'\]") as info:
        nki.simulate(transposing_matmul)(_rand(4, 4))
    assert _line_of(transposing_matmul, "# unsupported") in str(info.value)

    with pytest.raises(NotImplementedError, match=r"nisa\.iota"):
        nisa.iota  # noqa: B018


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

    @nki.jit
    def writes_its_input(x):
        t = nl.load(x)
        nl.store(x, value=t)  # read-only
        return x

    with pytest.raises(TraceError, match="read-only"):
        nki.simulate(writes_its_input)(_rand(4, 4))


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

    with pytest.raises(TypeError, match=r"must return its nl\.shared_hbm outputs"):
        nki.simulate(returns_a_tile)(_rand(4, 4))

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
            prefix, attr = name.split(".", 1)
            target = getattr(modules[prefix], attr)
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
