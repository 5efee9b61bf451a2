"""``nki.isa`` as the frontend builds it from the Rust declarations (``nki_spec``): every NKI
0.7 instruction is there with its keyword signature, the enums too, and each kind of bad call
gets its error: a keyword NKI does not have (``TypeError``), a value of the wrong kind
(``TypeError``), an engine the instruction does not run on (``ValueError``), an instruction or a
keyword value the frontend does not implement (``NotImplementedError``), each naming the call
and its line. ``docs/nki-coverage.md`` is the generated table."""

from __future__ import annotations

import inspect
import subprocess
import sys
from pathlib import Path
from typing import Any

import numpy as np
import pytest

import torch_nki.nki.isa as nisa
import torch_nki.nki.language as nl
from torch_nki import nki
from torch_nki.nki import coverage

DOC = Path(__file__).resolve().parents[2] / "docs" / "nki-coverage.md"


def _rand(*shape: int) -> np.ndarray:
    return np.random.default_rng(0).uniform(-1, 1, shape).astype(np.float32)


def _line_of(fn: Any, marker: str) -> str:
    fn = inspect.unwrap(fn)
    lines, start = inspect.getsourcelines(fn)
    offset = next(i for i, text in enumerate(lines) if marker in text)
    return f"{inspect.getsourcefile(fn)}:{start + offset}"


def test_every_declared_instruction_has_its_signature() -> None:
    assert len(nisa.INSTRUCTIONS) >= 50
    for name, spec in nisa.INSTRUCTIONS.items():
        params = inspect.signature(getattr(nisa, name)).parameters
        assert list(params) == [p["name"] for p in spec["params"]], name
        for p in spec["params"]:
            default = params[p["name"]].default
            if p["default"] == "required":
                assert default is inspect.Parameter.empty, (name, p["name"])
            elif p["default"] == "enum":
                enum_name, variant = p["value"]
                assert default is nisa.ENUMS[enum_name][variant], (name, p["name"])


def test_enums_are_declared_once_and_reachable_as_constants() -> None:
    assert nisa.engine.gpsimd.value == 3
    assert nisa.reduce_cmd.reset_reduce.name == "reset_reduce"
    assert nisa.matmul_perf_mode.double_row.value == "double_row"
    assert nisa.constants.engine is nisa.engine
    with nki.as_nki():
        from nki.isa import constants  # type: ignore[import-not-found]

        assert constants.dge_mode is nisa.dge_mode


def _one_call(body: Any) -> Any:
    @nki.jit
    def kernel(x):
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        t = nl.load(x)
        body(t, x)
        nl.store(out, value=t)
        return out

    return kernel


def test_a_keyword_nki_does_not_have_is_a_type_error_at_the_line() -> None:
    kernel = _one_call(lambda t, x: nisa.tensor_copy(dst=t, src=t, mask=None))  # here
    with pytest.raises(
        TypeError, match=r"nisa\.tensor_copy: got an unexpected keyword argument 'mask'"
    ) as info:
        nki.simulate(kernel)(_rand(4, 4))
    assert _line_of(test_a_keyword_nki_does_not_have_is_a_type_error_at_the_line, "# here") in str(info.value)


def test_a_value_of_the_wrong_kind_is_a_type_error_naming_the_keyword() -> None:
    kernel = _one_call(lambda t, x: nisa.tensor_tensor(dst=t, data1=t, data2=x, op=nl.add))
    with pytest.raises(TypeError, match=r"nisa\.tensor_tensor: data2 is an HBM tensor"):
        nki.simulate(kernel)(_rand(4, 4))
    kernel = _one_call(lambda t, x: nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.exp))
    with pytest.raises(
        TypeError, match=r"nisa\.tensor_tensor: op must be an nl operator \(e\.g\. nl\.add\), got nl\.exp"
    ):
        nki.simulate(kernel)(_rand(4, 4))
    kernel = _one_call(lambda t, x: nisa.memset(dst=t, value=0.0, engine=nisa.reduce_cmd.idle))
    with pytest.raises(TypeError, match=r"nisa\.memset: engine must be a nisa\.engine value"):
        nki.simulate(kernel)(_rand(4, 4))


def test_an_engine_the_instruction_does_not_run_on_is_a_value_error() -> None:
    kernel = _one_call(
        lambda t, x: nisa.tensor_tensor(dst=t, data1=t, data2=t, op=nl.add, engine=nisa.engine.scalar)
    )
    with pytest.raises(ValueError, match=r"engine must be one of nisa\.engine\.vector, nisa\.engine\.gpsimd"):
        nki.simulate(kernel)(_rand(4, 4))


def test_unimplemented_values_and_instructions_name_themselves() -> None:
    def body(t: Any, x: Any) -> None:
        nisa.tensor_scalar_reduce(dst=t, data=t, op0=nl.add, operand0=1.0, reduce_op=nl.add)  # here

    kernel = _one_call(body)
    with pytest.raises(NotImplementedError, match=r"nisa\.tensor_scalar_reduce\(reduce_res=None") as info:
        nki.simulate(kernel)(_rand(4, 4))
    assert _line_of(test_unimplemented_values_and_instructions_name_themselves, "# here") in str(info.value)


def test_engine_keywords_that_match_the_modelled_engine_run() -> None:
    x = _rand(4, 8)

    def body(t: Any, _: Any) -> None:
        nisa.tensor_scalar(dst=t, data=t, op0=nl.multiply, operand0=2.0, engine=nisa.engine.vector)
        nisa.tensor_copy(dst=t, src=t, engine=nisa.engine.vector)
        # Copies and fills run on any engine their declaration names, with the same values.
        nisa.tensor_copy(dst=t, src=t, engine=nisa.scalar_engine)
        nisa.tensor_scalar(dst=t, data=t, op0=nl.add, operand0=0.0, engine=nisa.engine.gpsimd)

    np.testing.assert_array_equal(nki.simulate(_one_call(body))(x), x * 2)


def test_get_nc_version_answers_the_target() -> None:
    seen = []

    @nki.jit
    def kernel(x):
        seen.append(nisa.get_nc_version())
        out = nl.ndarray(x.shape, dtype=x.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=nl.load(x))
        return out

    nki.simulate(kernel)(_rand(2, 2))
    assert seen == [nisa.nc_version.gen3]


def test_docs_nki_coverage_md_is_the_generated_table() -> None:
    text = coverage.markdown()
    assert "| `tensor_tensor` | implemented | vector, gpsimd |" in text
    assert "| `core_barrier` | implemented | gpsimd | v3+ (Trn2) |" in text
    assert DOC.read_text(encoding="utf-8") == text, (
        "regenerate it: torch-nki coverage -o docs/nki-coverage.md"
    )


def test_cli_writes_the_coverage_table(tmp_path: Path) -> None:
    out = tmp_path / "coverage.md"
    done = subprocess.run(
        [sys.executable, "-m", "torch_nki", "coverage", "-o", str(out)],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    assert out.read_text(encoding="utf-8") == coverage.markdown()


def test_tile_level_operators_and_activations_lower_to_one_instruction() -> None:
    @nki.jit
    def kernel(a_in, b_in):
        a, b = nl.load(a_in), nl.load(b_in)
        c = nl.multiply(nl.add(a, b), 2.0)
        d = nl.exp(c)
        out = nl.ndarray(a_in.shape, dtype=a_in.dtype, buffer=nl.shared_hbm)
        nl.store(out, value=d)
        return out

    a, b = _rand(8, 16), _rand(8, 16) * 0.5
    got = nki.simulate(kernel)(a, b)
    np.testing.assert_allclose(got, np.exp((a + b) * 2.0), rtol=1e-5)
    names = [
        line.split("(")[0].strip() for line in nki.trace(kernel, a, b).emit().splitlines() if "nisa." in line
    ]
    assert names.count("nisa.tensor_tensor") == 1 and names.count("nisa.activation") == 1, names


def test_tile_level_operators_do_not_broadcast() -> None:
    @nki.jit
    def kernel(a_in, b_in):
        a, b = nl.load(a_in), nl.load(b_in)
        nl.add(a, b)  # shapes differ
        return a_in

    with pytest.raises(
        ValueError,
        match=r"nl\.add: shapes \(8, 16\) and \(8, 1\) differ; NKI's tile-level operators do not broadcast",
    ):
        nki.simulate(kernel)(_rand(8, 16), _rand(8, 1))
