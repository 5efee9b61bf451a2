//! Kernels defined with `#[kernel]` against the real nki-core: the emitted definitions (schema,
//! params, contract, location, registration) and tracing through the generated trace function.

use nki_core::Target;
use nki_core::contract::{DimExpr, DimOp, OutDim, OutputDtype, OutputMeta};
use nki_core::kernel_def::{ParamKind, ScalarValue, Signature, registered_kernels};
use nki_core::prelude::*;
use std::sync::Mutex;

/// RMSNorm over the last dim: x * rsqrt(mean(x²) + eps) * weight.
///
/// (The body here only scales by `eps`; these tests are about the macro.)
#[kernel(
    shape(x = [N, D], weight = [D]) -> [N, D],
    dtype(x in {f32, bf16, f16}, weight = x) -> x,
    require(D <= 16384),
    replaces("torch.nn.RMSNorm", "*.LlamaRMSNorm"),
)]
pub fn rmsnorm(x: &Hbm, weight: &Hbm, #[default(1e-6)] eps: f32) -> Hbm {
    let _ = weight;
    let out = shared_hbm(x.shape(), x.dtype());
    for_each_tile(x.dim(0), PMAX, |rows| {
        let t = sbuf([rows.size, x.dim(1)], x.dtype());
        dma_copy(&t, x.rows(rows.start.clone(), rows.size));
        tensor_scalar(&t, &t, BinOp::Multiply, eps);
        dma_copy(out.rows(rows.start, rows.size), &t);
    });
    out
}

/// Drops the last dimension of a tensor of any rank.
#[kernel(
    shape(x = [..S, D]) -> [..S, D / 2 + 1],
    dtype(x in {f32}) -> bf16,
    require(D % 2 == 0),
)]
pub fn half_last(x: &Hbm) -> Hbm {
    let mut shape = x.shape().to_vec();
    let last = shape.len() - 1;
    shape[last] = shape[last] / 2 + 1;
    let out = shared_hbm(&shape, DType::BF16);
    zero_fill(&out);
    out
}

/// Writes zeros to every element of `out` (kernels must write all of their outputs).
fn zero_fill(out: &Hbm) {
    let cols = *out.shape().last().unwrap_or(&1);
    let rows = out.numel() / cols.max(1);
    let view = out.reshape(&[rows, cols]);
    for_each_tile(rows, PMAX, |r| {
        let t = sbuf([r.size, cols], out.dtype());
        memset(&t, 0.0);
        dma_copy(view.clone().rows(r.start, r.size), &t);
    });
}

/// What the last `moments` trace received: `(k, flag, scale)`.
static SEEN: Mutex<Option<(usize, bool, f64)>> = Mutex::new(None);

/// Per-row mean and variance.
#[kernel(shape(x = [N, D]) -> ([N, D], [N]), dtype(x in {f32, bf16}) -> (x, f32))]
fn moments(x: &Hbm, #[default(2)] k: usize, #[default(true)] flag: bool, scale: f64) -> (Hbm, Hbm) {
    *SEEN.lock().unwrap() = Some((k, flag, scale));
    let (y, m) = (
        shared_hbm(x.shape(), x.dtype()),
        shared_hbm(&[x.dim(0)], DType::F32),
    );
    zero_fill(&y);
    zero_fill(&m);
    (y, m)
}

fn sig(tensors: &[(&[u64], DType)], scalars: &[ScalarValue]) -> Signature {
    Signature::new(tensors, scalars, Target::Trn2)
}

#[test]
fn emits_name_doc_schema_and_params() {
    assert_eq!(RMSNORM_KERNEL.name, "rmsnorm");
    assert_eq!(
        RMSNORM_KERNEL.doc,
        "RMSNorm over the last dim: x * rsqrt(mean(x²) + eps) * weight.\n\n\
         (The body here only scales by `eps`; these tests are about the macro.)"
    );
    assert_eq!(
        RMSNORM_KERNEL.schema,
        "rmsnorm(Tensor x, Tensor weight, float eps=1e-06) -> Tensor"
    );
    let kinds: Vec<(&str, ParamKind)> = RMSNORM_KERNEL
        .params
        .iter()
        .map(|p| (p.name, p.kind))
        .collect();
    assert_eq!(
        kinds,
        [
            ("x", ParamKind::Tensor),
            ("weight", ParamKind::Tensor),
            (
                "eps",
                ParamKind::Float {
                    default: Some(1e-6),
                    optional: false
                }
            )
        ]
    );
    assert_eq!(
        RMSNORM_KERNEL.replaces,
        ["torch.nn.RMSNorm", "*.LlamaRMSNorm"]
    );

    assert_eq!(
        MOMENTS_KERNEL.schema,
        "moments(Tensor x, int k=2, bool flag=True, float scale) -> (Tensor, Tensor)"
    );
    let kinds: Vec<ParamKind> = MOMENTS_KERNEL.params.iter().map(|p| p.kind).collect();
    assert_eq!(
        kinds,
        [
            ParamKind::Tensor,
            ParamKind::Int {
                default: Some(2),
                optional: false
            },
            ParamKind::Bool {
                default: Some(true),
                optional: false
            },
            ParamKind::Float {
                default: None,
                optional: false
            },
        ]
    );
    assert_eq!(HALF_LAST_KERNEL.schema, "half_last(Tensor x) -> Tensor");
}

#[test]
fn emits_the_contract() {
    let c = &HALF_LAST_KERNEL.contract;
    assert_eq!(c.inputs[0].param, "x");
    assert_eq!(
        c.inputs[0]
            .dims
            .iter()
            .map(ToString::to_string)
            .collect::<Vec<_>>(),
        ["..S", "D"]
    );
    assert_eq!(c.outputs[0].shape[0], OutDim::Rest { name: "S" });
    let OutDim::Expr { expr } = c.outputs[0].shape[1] else {
        panic!("expected an expression")
    };
    assert_eq!(expr.to_string(), "D / 2 + 1");
    assert!(matches!(expr, DimExpr::Binary { op: DimOp::Add, .. }));
    assert!(matches!(
        c.outputs[0].dtype,
        OutputDtype::Fixed { dtype: DType::BF16 }
    ));
    assert_eq!(c.requires[0].to_string(), "D % 2 == 0");
    assert!(matches!(
        RMSNORM_KERNEL.contract.outputs[0].dtype,
        OutputDtype::SameAs { param: "x" }
    ));
}

#[test]
fn location_points_at_the_function_name() {
    let loc = RMSNORM_KERNEL.location;
    assert!(loc.file.ends_with("kernels.rs"), "{loc}");
    let line = include_str!("kernels.rs")
        .lines()
        .position(|l| l.starts_with("pub fn rmsnorm("))
        .unwrap()
        + 1;
    assert_eq!(loc.line as usize, line);
    assert_eq!(loc.column, 8, "the column of `rmsnorm` in `pub fn rmsnorm`");
}

#[test]
fn kernels_are_registered() {
    let names: Vec<&str> = registered_kernels().map(|k| k.name).collect();
    for name in ["rmsnorm", "half_last", "moments"] {
        assert!(names.contains(&name), "{name} not in {names:?}");
    }
}

#[test]
fn checks_and_traces_through_the_generated_trace_function() {
    let s = sig(
        &[(&[256, 64], DType::BF16), (&[64], DType::BF16)],
        &[ScalarValue::Float(1e-6)],
    );
    let program = RMSNORM_KERNEL.check(&s).and_then(|c| c.trace()).unwrap();
    assert_eq!(program.outputs.len(), 1);
    assert_eq!(program.hbm[program.outputs[0].0 as usize].shape, [256, 64]);

    let too_wide = sig(
        &[(&[8, 32768], DType::F32), (&[32768], DType::F32)],
        &[ScalarValue::Float(1e-6)],
    );
    let e = RMSNORM_KERNEL.check(&too_wide).unwrap_err().to_string();
    assert!(e.contains("the contract requires D <= 16384"), "{e}");

    let s = sig(&[(&[2, 3, 8], DType::F32)], &[]);
    assert_eq!(
        HALF_LAST_KERNEL.check(&s).unwrap().outputs(),
        [OutputMeta {
            shape: vec![2, 3, 5],
            dtype: DType::BF16
        }]
    );
    let program = HALF_LAST_KERNEL.check(&s).and_then(|c| c.trace()).unwrap();
    assert_eq!(program.hbm[program.outputs[0].0 as usize].shape, [2, 3, 5]);
}

#[test]
fn traces_two_outputs_and_passes_scalars_by_position() {
    let s = sig(
        &[(&[4, 16], DType::F32)],
        &[
            ScalarValue::Int(7),
            ScalarValue::Bool(false),
            ScalarValue::Float(0.25),
        ],
    );
    let program = MOMENTS_KERNEL.check(&s).and_then(|c| c.trace()).unwrap();
    let shapes: Vec<&[usize]> = program
        .outputs
        .iter()
        .map(|o| &program.hbm[o.0 as usize].shape[..])
        .collect();
    assert_eq!(shapes, [&[4, 16][..], &[4][..]]);
    assert_eq!(*SEEN.lock().unwrap(), Some((7, false, 0.25)));
}

/// Adds an optional per-column bias: `x + bias` when given, `x` otherwise.
#[kernel(shape(x = [N, D], bias = [D]) -> [N, D], dtype(x in {f32}, bias = x) -> x)]
pub fn maybe_bias(x: &Hbm, bias: Option<&Hbm>) -> Hbm {
    let (n, d) = (x.dim(0), x.dim(1));
    let out = shared_hbm(x.shape(), x.dtype());
    for_each_tile(n, PMAX, |rows| {
        let t = sbuf([rows.size, d], x.dtype());
        dma_copy(&t, x.rows(rows.start.clone(), rows.size));
        if let Some(bias) = bias {
            let b = sbuf([rows.size, d], x.dtype());
            dma_copy(&b, bias.view().broadcast_to(&[rows.size, d]));
            tensor_tensor(&t, &t, &b, BinOp::Add);
        }
        dma_copy(out.rows(rows.start, rows.size), &t);
    });
    out
}

#[test]
fn optional_tensors_are_tensor_question_mark_and_may_be_left_out() {
    use nki_core::testing::{HostArray, run_kernel_with};
    assert_eq!(
        MAYBE_BIAS_KERNEL.schema,
        "maybe_bias(Tensor x, Tensor? bias=None) -> Tensor"
    );
    assert_eq!(MAYBE_BIAS_KERNEL.params[1].kind, ParamKind::OptionalTensor);
    let x = HostArray::new(&[3, 2], DType::F32, [1.0, 2.0, 3.0, 4.0, 5.0, 6.0]);
    let b = HostArray::new(&[2], DType::F32, [10.0, 20.0]);
    let with =
        run_kernel_with(&MAYBE_BIAS_KERNEL, &[Some(&x), Some(&b)], &[], Target::Trn2).unwrap();
    assert_eq!(with[0].values, [11.0, 22.0, 13.0, 24.0, 15.0, 26.0]);
    let without =
        run_kernel_with(&MAYBE_BIAS_KERNEL, &[Some(&x), None], &[], Target::Trn2).unwrap();
    assert_eq!(without[0].values, x.values);
    let bad = HostArray::new(&[3], DType::F32, [0.0; 3]);
    let err = run_kernel_with(
        &MAYBE_BIAS_KERNEL,
        &[Some(&x), Some(&bad)],
        &[],
        Target::Trn2,
    )
    .unwrap_err();
    assert_eq!(
        err.to_string(),
        "neuron::maybe_bias: bias has shape [3], but the contract bias[D] needs D = 2 (bound by x[N, D] = [3, 2])"
    );
    let err =
        run_kernel_with(&MAYBE_BIAS_KERNEL, &[None, Some(&b)], &[], Target::Trn2).unwrap_err();
    assert_eq!(
        err.to_string(),
        "neuron::maybe_bias: x is None, but it is a required tensor (only `Tensor?` parameters may be None)"
    );
}
