"""Bad inputs: contract violations in words, dtype policy, devices, native error mapping."""

from __future__ import annotations

import json
import re

import pytest
import torch

import torch_nki
from torch_nki import _native, testing

from refs import rand

neuron = torch.ops.neuron


def test_wrong_rank_names_op_argument_and_expectation() -> None:
    with pytest.raises(ValueError) as err:
        neuron.bmm(rand(8, 2), rand(8, 2, 2))
    assert str(err.value) == (
        "neuron::bmm: x has rank 2 (shape [8, 2]), but the contract x[B, M, K] needs rank 3"
    )
    with pytest.raises(
        ValueError, match=r"^neuron::add: x has rank 0 \(shape \[\]\), but the contract x\[\.\.S, D\]"
    ):
        neuron.add(torch.tensor(1.0), torch.tensor(2.0))


def test_mismatched_dim_gives_the_exact_contract_message() -> None:
    with pytest.raises(ValueError) as err:
        neuron.rmsnorm(rand(8, 1024), rand(512))
    assert str(err.value) == (
        "neuron::rmsnorm: weight has shape [512], but the contract weight[D] needs D = 1024 "
        "(bound by x[..B, D] = [8, 1024])"
    )
    with pytest.raises(ValueError) as err:
        neuron.matmul(rand(3, 4), rand(5, 6))
    assert str(err.value) == (
        "neuron::matmul: w has shape [5, 6], but the contract w[K, N] needs K = 4 "
        "(bound by x[..B, K] = [3, 4])"
    )
    with pytest.raises(ValueError, match=re.escape("y has shape [2, 4], but the contract y[..S, D] needs")):
        neuron.add(rand(2, 3), rand(2, 4))


def test_requirement_violation() -> None:
    with pytest.raises(
        ValueError, match=re.escape("neuron::rmsnorm: the contract requires D <= 16384, but D = 16385")
    ):
        neuron.rmsnorm(rand(2, 16385), rand(16385))


def test_disallowed_dtype_is_a_type_error() -> None:
    x, w = torch.ones(4, 8, dtype=torch.int16), torch.ones(8, dtype=torch.int16)
    with pytest.raises(TypeError) as err:
        neuron.rmsnorm(x, w)
    assert (
        str(err.value)
        == "neuron::rmsnorm: x has dtype torch.int16 (i16), but the contract allows x in {f32, bf16, f16}"
    )
    with pytest.raises(TypeError) as err:
        neuron.rmsnorm(rand(4, 8), w)
    assert (
        str(err.value) == "neuron::rmsnorm: weight has dtype torch.int16, but the contract needs weight = x "
        "(x has dtype torch.float32)"
    )
    with pytest.raises(TypeError) as err:
        neuron.matmul(rand(2, 2), rand(2, 2, dtype=torch.bfloat16))
    assert (
        str(err.value) == "neuron::matmul: w has dtype torch.bfloat16, but the contract needs w = x "
        "(x has dtype torch.float32)"
    )
    with pytest.raises(
        TypeError, match=r"neuron::add: x has dtype torch\.bool \(bool\), but the contract allows x in"
    ):
        neuron.add(torch.ones(3, dtype=torch.bool), torch.ones(3, dtype=torch.bool))


def test_disallowed_dtype_under_fake_tensors() -> None:
    x = torch.ones(4, 8, dtype=torch.int64, device="meta")
    with pytest.raises(
        TypeError, match=re.escape("x has dtype torch.int64, but the contract allows x in {f32, bf16, f16}")
    ):
        neuron.matmul(x, x.t())


@pytest.mark.usefixtures("fresh_warnings")
def test_float64_is_computed_in_float32_with_one_warning() -> None:
    x, w = rand(6, 40, dtype=torch.float64), rand(40, dtype=torch.float64)
    with pytest.warns(
        UserWarning, match=r"neuron::rmsnorm: float64 inputs are computed in float32"
    ) as record:
        out = neuron.rmsnorm(x, w)
        neuron.rmsnorm(x, w)
    assert len([r for r in record if "neuron::rmsnorm" in str(r.message)]) == 1
    assert record[0].filename == __file__  # points at the caller, not at torch internals
    assert out.dtype == torch.float64
    sample = testing.SampleInput("rmsnorm", torch.float64, (x, w, 1e-6), 0)
    torch.testing.assert_close(out, testing.reference(sample)[0], rtol=1e-5, atol=1e-5)
    with pytest.warns(UserWarning, match="neuron::matmul: float64 inputs"):
        y = neuron.matmul(x.t().contiguous(), x.float())  # mixed float64/float32: f32 compute, f64 result
    assert y.dtype == torch.float64
    meta = neuron.matmul(x.to("meta"), x.t().to("meta"))
    assert meta.dtype == torch.float64 and meta.shape == (6, 6)


def test_meta_tensors_get_contract_shapes() -> None:
    out = neuron.matmul(torch.empty(7, 3, device="meta"), torch.empty(3, 11, device="meta"))
    assert out.device.type == "meta" and out.shape == (7, 11) and out.dtype == torch.float32
    with pytest.raises(
        ValueError, match=re.escape("w has shape [4, 11], but the contract w[K, N] needs K = 3")
    ):
        neuron.matmul(torch.empty(7, 3, device="meta"), torch.empty(4, 11, device="meta"))


def test_mixed_devices_are_rejected() -> None:
    with pytest.raises(ValueError, match=r"neuron::rmsnorm: weight is on device meta, but x is on cpu"):
        neuron.rmsnorm(rand(4, 8), torch.empty(8, device="meta"))


def test_backend_without_a_kernel() -> None:
    sparse = torch.ones(2, 2).to_sparse()  # SparseCPU: neither the CPU nor the fake kernel applies
    with pytest.raises(NotImplementedError, match="neuron::add"):
        neuron.add(sparse, sparse)


def test_native_errors_map_to_python_exceptions() -> None:
    assert issubclass(torch_nki.NkiError, RuntimeError)
    assert torch_nki.NkiError.__name__ == "NkiError"
    registered = ", ".join(torch_nki.ops())
    with pytest.raises(KeyError, match=re.escape(f"no kernel named `no_such_op` (registered: {registered})")):
        _native.Signature("no_such_op", [], [], []).outputs()
    # float64 is a caller dtype computed in f32; outputs come back as f64.
    assert _native.Signature("add", [[2], [2]], ["f64", "f64"], []).outputs() == [((2,), "f64")]
    with pytest.raises(torch_nki.ContractShapeError, match="expected 2 tensor arguments, got 1"):
        _native.Signature("add", [[2]], ["f64"], []).outputs()
    with pytest.raises(TypeError, match="neuron::rmsnorm: argument eps expects float, got bool"):
        _native.Signature("rmsnorm", [[2, 2], [2]], ["f32", "f32"], [True]).outputs()
    with pytest.raises(TypeError, match=r"expected 1 scalar arguments \(eps\), got 0"):
        _native.Signature("rmsnorm", [[2, 2], [2]], ["f32", "f32"], []).outputs()
    assert _native.Signature("rmsnorm", [[2, 3], [3]], ["bf16", "bf16"], [1]).outputs() == [
        ((2, 3), "bf16"),
        ((2,), "f32"),
    ]


def test_run_verifies_its_buffers_before_touching_memory() -> None:
    x, y = rand(4, 4), rand(4, 4)
    sig = _native.Signature("add", [[4, 4], [4, 4]], ["f32", "f32"], [])
    wrong = torch.zeros(4, 5)
    before = wrong.clone()
    with pytest.raises(
        torch_nki.NkiError, match=r"output buffers \[f32 \[4, 5\]\] do not match the compiled outputs"
    ):
        sig.run([x, y], [wrong])
    assert torch.equal(wrong, before)
    with pytest.raises(torch_nki.NkiError, match="output 0 overlaps another argument's memory"):
        sig.run([x, y], [x])
    with pytest.raises(ValueError, match=r"output 0 is not contiguous \(outputs are written in place\)"):
        sig.run([x, y], [torch.empty(4, 4).t()])
    with pytest.raises(ValueError, match=r"input 1 is not a tensor \(got tuple\)"):
        sig.run([x, (0, (4, 4), "f32")], [torch.empty(4, 4)])
    with pytest.raises(ValueError, match="input 0 is on device meta, but the CPU simulator needs cpu"):
        sig.run([x.to("meta"), y], [torch.empty(4, 4)])
    with pytest.raises(TypeError, match="unknown dtype `complex64`"):
        sig.run([x.to(torch.complex64), y.to(torch.complex64)], [torch.empty(4, 4)])
    # The tensors must be the signature's: it was checked once, for those shapes and dtypes.
    with pytest.raises(
        torch_nki.NkiError, match=r"input 0 is i8 \[4, 4\], but the signature is for f32 \[4, 4\]"
    ):
        sig.run([x.to(torch.int8), y], [torch.empty(4, 4)])
    with pytest.raises(
        torch_nki.NkiError, match=r"input 1 is f32 \[2, 8\], but the signature is for f32 \[4, 4\]"
    ):
        sig.run([x, y.reshape(2, 8)], [torch.empty(4, 4)])
    with pytest.raises(ValueError, match="input 1 is left out, but the signature has it a tensor"):
        sig.run([x, None], [torch.empty(4, 4)])
    with pytest.raises(ValueError, match=r"expected 2 tensor arguments \(None for one left out\), got 1"):
        sig.run([x], [torch.empty(4, 4)])
    with pytest.raises(TypeError, match=r"x has dtype torch\.int8 \(i8\), but the contract allows x in"):
        _native.Signature("add", [[4, 4], [4, 4]], ["i8", "i8"], [])
    out = torch.empty(4, 4)
    sig.run([x, y], [out])
    torch.testing.assert_close(out, x + y)
    # A non-contiguous input is read through a contiguous copy.
    sig.run([x.t(), y], [out])
    torch.testing.assert_close(out, x.t() + y)


@pytest.mark.parametrize("op", testing.ops_with_reference())
def test_every_op_reports_contract_violations_as_value_and_type_errors(op: str) -> None:
    """For every op: a last dimension off by one is a ValueError and an fp8 input a TypeError,
    both naming the op (the exact wording of every op is snapshotted on the Rust side)."""
    sample = testing.sample_inputs(op, dtypes=[torch.float32])[0]
    last = max(i for i, a in enumerate(sample.args) if isinstance(a, torch.Tensor))
    t = sample.args[last]
    wider = torch.zeros((*t.shape[:-1], t.shape[-1] + 1), dtype=t.dtype) if t.dim() else t
    args = tuple(wider if i == last else a for i, a in enumerate(sample.args))
    fn = getattr(neuron, op)
    if t.dim():
        try:
            fn(*args)
        except ValueError as err:
            assert str(err).startswith(f"neuron::{op}: ")
    first = next(i for i, a in enumerate(sample.args) if isinstance(a, torch.Tensor))
    f8 = tuple(a.to(torch.float8_e4m3fn) if i == first else a for i, a in enumerate(sample.args))
    with pytest.raises(TypeError, match=rf"^neuron::{op}: "):
        fn(*f8)


def test_errors_are_typed_and_carry_the_op_and_argument() -> None:
    with pytest.raises(torch_nki.ContractShapeError) as shape_err:
        neuron.rmsnorm(rand(8, 1024), rand(512))
    assert isinstance(shape_err.value, ValueError) and isinstance(shape_err.value, torch_nki.NkiError)
    assert (shape_err.value.op, shape_err.value.param) == ("rmsnorm", "weight")
    with pytest.raises(torch_nki.ContractDtypeError) as dtype_err:
        neuron.matmul(rand(2, 2), rand(2, 2, dtype=torch.bfloat16))
    assert isinstance(dtype_err.value, TypeError) and isinstance(dtype_err.value, torch_nki.NkiError)
    assert (dtype_err.value.op, dtype_err.value.param) == ("matmul", "w")
    for cls in (torch_nki.ValidationError, torch_nki.NoBackwardError, torch_nki.UnsupportedTransformError):
        assert issubclass(cls, torch_nki.NkiError)
    assert {"rule", "limit", "actual", "location"} <= set(vars(torch_nki.ValidationError))


def test_messages_name_the_dtypes_the_caller_passed() -> None:
    """float64 is computed in float32, but a message about it says float64."""
    with pytest.raises(torch_nki.ContractDtypeError) as err:
        neuron.add(rand(3, dtype=torch.float64), rand(3, dtype=torch.bfloat16))
    assert (
        str(err.value)
        == "neuron::add: y has dtype torch.bfloat16, but the contract needs y = x (x has dtype torch.float64)"
    )


@pytest.mark.parametrize("op", testing.ops_with_reference())
def test_forward_mode_ad_and_func_transforms_raise_naming_the_op(op: str) -> None:
    import torch.autograd.forward_ad as fwad

    sample = testing.sample_inputs(op, dtypes=[torch.float32])[0]
    first = next(i for i, a in enumerate(sample.args) if isinstance(a, torch.Tensor))
    fn = getattr(neuron, op)

    def call(t: torch.Tensor) -> torch.Tensor:
        args = tuple(t if i == first else a for i, a in enumerate(sample.args))
        return testing.public_outputs(fn(*args))[0]

    x = sample.args[first]
    with (
        fwad.dual_level(),
        pytest.raises(torch_nki.UnsupportedTransformError, match=rf"^neuron::{op}: forward-mode"),
    ):
        call(fwad.make_dual(x, torch.ones_like(x)))
    with pytest.raises(torch_nki.UnsupportedTransformError, match=rf"^neuron::{op}: torch.func.grad"):
        torch.func.jvp(call, (x,), (torch.ones_like(x),))
    with pytest.raises(torch_nki.UnsupportedTransformError, match=rf"^neuron::{op}: torch.func.grad"):
        torch.func.grad(lambda t: call(t).sum())(x)
    with pytest.raises(torch_nki.UnsupportedTransformError, match=rf"^neuron::{op}: torch.func.grad"):
        torch.func.vjp(call, x)


def test_vmap_runs_per_sample() -> None:
    x = rand(3, 4, 5)
    torch.testing.assert_close(torch.func.vmap(lambda a: neuron.add(a, a))(x), x + x)


@pytest.mark.parametrize("op", testing.ops_with_reference())
def test_autocast_follows_the_declared_policy(op: str) -> None:
    """`lower`: float inputs run in the autocast dtype; `promote`: mixed inputs run in the widest;
    `fp32`: in float32; `keep`: as given."""
    spec = testing.op_spec(op)
    sample = next(s for s in testing.sample_inputs(op, dtypes=[torch.float32]))
    tensors = [i for i, a in enumerate(sample.args) if isinstance(a, torch.Tensor)]
    # The first tensor as autocast would hand it over from a matmul (bf16), the others f32.
    args = tuple(a.to(torch.bfloat16) if i == tensors[0] else a for i, a in enumerate(sample.args))
    expected = {
        "lower": torch.bfloat16,
        "fp32": torch.float32,
        "promote": torch.float32 if len(tensors) > 1 else torch.bfloat16,
        "keep": None,
    }[spec.autocast]
    with torch.autocast("cpu", dtype=torch.bfloat16):
        if expected is None:
            return  # runs on the dtypes given; mixed dtypes are the contract's business
        outs = testing.public_outputs(getattr(neuron, op)(*args))
    assert outs[0].dtype == expected, spec.autocast


@pytest.mark.parametrize(
    ("kind", "cls", "attrs"),
    [
        (
            "validation",
            torch_nki.ValidationError,
            {
                "rule": "partition-dim",
                "limit": "128",
                "actual": "256",
                "instruction": "alloc t0 [256, 64] f32 in sbuf",
                "location": "kernels/src/example.rs:12",
                "op": "example",
            },
        ),
        ("trace", torch_nki.errors.TraceError, {"location": "kernels/src/example.rs:12", "op": "example"}),
        ("simulation", torch_nki.errors.SimulationError, {"location": "kernels/src/example.rs:12"}),
        ("index", torch_nki.errors.ContractIndexError, {"op": "example", "param": "target"}),
        ("internal", torch_nki.NkiError, {"op": "example"}),
    ],
)
def test_kernel_failures_are_typed_with_their_fields(kind: str, cls: type, attrs: dict[str, str]) -> None:
    with pytest.raises(cls) as err:
        _native._error_example(kind)
    assert isinstance(err.value, torch_nki.NkiError) and isinstance(err.value, RuntimeError)
    for name, value in attrs.items():
        assert getattr(err.value, name) == value, name
    assert "kernels/src/example.rs:12" in str(err.value) or kind in ("internal", "index")
    if kind == "index":
        assert isinstance(err.value, IndexError)
        assert str(err.value) == (
            "neuron::example: target[3] = 7 is out of range: the kernel takes indices in [0, 5) or -100"
        )


def test_int64_indices_narrow_to_int32_or_raise_an_index_error() -> None:
    from torch_nki._dtypes import narrow_indices

    t = torch.tensor([0, 5, -100, 2**31 - 1], dtype=torch.int64)
    narrowed = narrow_indices("cross_entropy", "target", t)
    assert narrowed.dtype == torch.int32 and narrowed.tolist() == t.tolist()
    assert narrow_indices("op", "target", torch.empty(0, dtype=torch.int64)).dtype == torch.int32
    for bad in (2**31, -(2**31) - 1):
        with pytest.raises(torch_nki.errors.ContractIndexError) as err:
            narrow_indices("cross_entropy", "target", torch.tensor([1, bad]))
        assert isinstance(err.value, IndexError)
        assert (err.value.op, err.value.param) == ("cross_entropy", "target")
        assert str(err.value).startswith(f"neuron::cross_entropy: target holds {bad}, which does not fit")


def test_int64_computes_in_int32_without_widening_float_outputs() -> None:
    # An int64 input is accepted wherever the contract allows i32, and unlike float64 it does
    # not make float32 outputs come back as float64.
    doc = json.loads(_native.symbolic("rmsnorm", [["s0", 8], [8]], ["f32", "f32"], [1e-6]))
    assert doc["dtypes"] == ["f32", "f32"]
    with pytest.raises(TypeError, match=r"x has dtype torch\.int64, but the contract allows x in"):
        _native.Signature("rmsnorm", [[2, 8], [8]], ["int64", "f32"], [1e-6]).outputs()
