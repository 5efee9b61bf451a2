//! `scalar_tensor_tensor`: `(data <op0> operand0) <op1> operand1` in one vector-engine
//! instruction. Simulated, it gives exactly the bits of a `tensor_scalar` into an fp32 tile
//! followed by a `tensor_tensor` (the intermediate stays fp32, the result is rounded once), with
//! a column or an immediate `operand0`, in place or not, on one thread or split across rows;
//! operands are checked when traced, PSUM inputs when validated; the cost model charges it as a
//! two-input vector instruction; codegen emits the NKI call.

use nki_core::NkiError;
use nki_core::codegen::emit_nki;
use nki_core::cost::{Engine, estimate};
use nki_core::ir::Program;
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::sim::{SimOptions, simulate_to_vecs};
use nki_core::validate::validate;

/// The inputs: `x` `[rows, cols]` in `data`, `c` `[rows, 1]` fp32, `y` `[rows, cols]` in
/// `other`.
fn specs(rows: usize, cols: usize, data: DType, other: DType) -> Vec<InputSpec> {
    let spec = |name: &str, shape: [usize; 2], dtype| InputSpec {
        name: name.into(),
        shape: shape.to_vec(),
        dtype,
    };
    vec![
        spec("x", [rows, cols], data),
        spec("c", [rows, 1], DType::F32),
        spec("y", [rows, cols], other),
    ]
}

/// How a program computes `(x <op0> c) <op1> y`.
#[derive(Clone, Copy, Debug)]
enum Form {
    /// One `scalar_tensor_tensor` into a fresh tile.
    Fused,
    /// One `scalar_tensor_tensor` writing over `x`'s tile (`dst` aliases `data`).
    FusedInPlace,
    /// `tensor_scalar` into an fp32 tile, then `tensor_tensor`.
    TwoSteps,
    /// As `TwoSteps` with the intermediate rounded to the output dtype (what the fused
    /// instruction must not do).
    TwoStepsNarrow,
}

/// `(x <op0> c) <op1> y`, in `out` dtype, computed in `form`.
fn program(
    rows: usize,
    cols: usize,
    (data, other, out): (DType, DType, DType),
    (op0, op1): (BinOp, BinOp),
    form: Form,
) -> Program {
    trace("k", Target::Trn2, &specs(rows, cols, data, other), |h| {
        let result = shared_hbm(&[rows, cols], out);
        let x = sbuf([rows, cols], data);
        dma_copy(&x, &h[0]);
        let c = sbuf([rows, 1], DType::F32);
        dma_copy(&c, &h[1]);
        let y = sbuf([rows, cols], other);
        dma_copy(&y, &h[2]);
        let dst = match form {
            Form::Fused => {
                let dst = sbuf([rows, cols], out);
                scalar_tensor_tensor(&dst, &x, op0, &c, op1, &y);
                dst
            }
            Form::FusedInPlace => {
                assert_eq!(data, out, "in place needs one dtype");
                scalar_tensor_tensor(&x, &x, op0, &c, op1, &y);
                x
            }
            Form::TwoSteps | Form::TwoStepsNarrow => {
                let tmp_dtype = match form {
                    Form::TwoSteps => DType::F32,
                    _ => out,
                };
                let tmp = sbuf([rows, cols], tmp_dtype);
                tensor_scalar(&tmp, &x, op0, &c);
                let dst = sbuf([rows, cols], out);
                tensor_tensor(&dst, &tmp, &y, op1);
                dst
            }
        };
        dma_copy(&result, &dst);
        vec![result]
    })
    .unwrap()
}

/// `n` pseudo-random values in about [-4, 4), with plenty of mantissa bits.
fn values(n: usize, seed: u64) -> Vec<f32> {
    let mut s = seed.wrapping_mul(0x9E37_79B9_7F4A_7C15) | 1;
    (0..n)
        .map(|_| {
            s ^= s << 13;
            s ^= s >> 7;
            s ^= s << 17;
            ((s >> 40) as f32 / (1u64 << 24) as f32) * 8.0 - 4.0
        })
        .collect()
}

fn encode(dtype: DType, v: &[f32]) -> Vec<u8> {
    let mut bytes = vec![0; v.len() * dtype.size_bytes()];
    for (i, x) in v.iter().enumerate() {
        dtype.write(&mut bytes, i, *x);
    }
    bytes
}

/// The output bytes of `p` for inputs `x`, `c`, `y` (encoded in the program's input dtypes).
fn run(p: &Program, x: &[f32], c: &[f32], y: &[f32]) -> Vec<u8> {
    run_with(p, x, c, y, SimOptions::default())
}

/// [`run`] with simulator options (`parallel: false` keeps every row on one thread).
fn run_with(p: &Program, x: &[f32], c: &[f32], y: &[f32], opts: SimOptions<'_>) -> Vec<u8> {
    let dtypes: Vec<DType> = p.inputs().map(|(_, d)| d.dtype).collect();
    let inputs = [
        encode(dtypes[0], x),
        encode(dtypes[1], c),
        encode(dtypes[2], y),
    ];
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let mut out = simulate_to_vecs(p, &refs, opts).unwrap();
    out.remove(0)
}

#[test]
fn bf16_inputs_with_an_fp32_column_give_the_bits_of_tensor_scalar_into_fp32_then_tensor_tensor() {
    let bf16 = (DType::BF16, DType::BF16, DType::BF16);
    // [5, 37] runs row by row; [128, 512] is large enough to split its rows across threads.
    for (rows, cols) in [(5, 37), (128, 512)] {
        let (x, y) = (values(rows * cols, 1), values(rows * cols, 2));
        // Scales of very different magnitudes, so the first result needs more than 8 bits.
        let c: Vec<f32> = values(rows, 3).iter().map(|v| v * 97.3).collect();
        let mut narrow_differs = false;
        for ops in [
            (BinOp::Subtract, BinOp::Multiply),
            (BinOp::Multiply, BinOp::Add),
            (BinOp::Divide, BinOp::Subtract),
            (BinOp::Maximum, BinOp::Add),
            (BinOp::Add, BinOp::Greater),
        ] {
            let want = run(&program(rows, cols, bf16, ops, Form::TwoSteps), &x, &c, &y);
            for form in [Form::Fused, Form::FusedInPlace] {
                let fused = program(rows, cols, bf16, ops, form);
                let got = run(&fused, &x, &c, &y);
                assert!(got == want, "{rows}x{cols} {ops:?} {form:?}");
                let serial = SimOptions {
                    parallel: false,
                    ..SimOptions::default()
                };
                let got = run_with(&fused, &x, &c, &y, serial);
                assert!(got == want, "{rows}x{cols} {ops:?} {form:?} serial");
            }
            let narrow = run(
                &program(rows, cols, bf16, ops, Form::TwoStepsNarrow),
                &x,
                &c,
                &y,
            );
            narrow_differs |= narrow != want;
        }
        // The inputs are such that keeping the intermediate in fp32 is observable.
        assert!(narrow_differs, "{rows}x{cols}");
    }
}

#[test]
fn mixed_dtypes_match_the_two_step_form() {
    // bf16 data and fp32 operand1 into fp32, and fp32 data with bf16 operand1 into bf16.
    for dtypes in [
        (DType::BF16, DType::F32, DType::F32),
        (DType::F32, DType::BF16, DType::BF16),
    ] {
        let (rows, cols) = (128, 300);
        let (x, y) = (values(rows * cols, 4), values(rows * cols, 5));
        let c = values(rows, 6);
        let ops = (BinOp::Multiply, BinOp::Add);
        let want = run(
            &program(rows, cols, dtypes, ops, Form::TwoSteps),
            &x,
            &c,
            &y,
        );
        let got = run(&program(rows, cols, dtypes, ops, Form::Fused), &x, &c, &y);
        assert!(got == want, "{dtypes:?}");
    }
}

/// `(x <op0> imm) <op1> y` in fp32, one instruction, read back as f32s.
fn with_immediate(imm: f32, op0: BinOp, op1: BinOp, x: &[f32], y: &[f32]) -> Vec<f32> {
    let (rows, cols) = (3, 10);
    let p = trace(
        "k",
        Target::Trn2,
        &specs(rows, cols, DType::F32, DType::F32),
        |h| {
            let result = shared_hbm(&[rows, cols], DType::F32);
            let (xt, yt) = (
                sbuf([rows, cols], DType::F32),
                sbuf([rows, cols], DType::F32),
            );
            dma_copy(&xt, &h[0]);
            dma_copy(&yt, &h[2]);
            let dst = sbuf([rows, cols], DType::F32);
            scalar_tensor_tensor(&dst, &xt, op0, imm, op1, &yt);
            dma_copy(&result, &dst);
            vec![result]
        },
    )
    .unwrap();
    validate(&p).unwrap();
    let out = run(&p, x, &[0.0; 3], y);
    (0..rows * cols).map(|i| DType::F32.read(&out, i)).collect()
}

#[test]
fn an_immediate_operand0_with_add_and_multiply() {
    let (x, y) = (values(30, 7), values(30, 8));
    let got = with_immediate(0.375, BinOp::Multiply, BinOp::Add, &x, &y);
    let want: Vec<f32> = x.iter().zip(&y).map(|(a, b)| a * 0.375 + b).collect();
    assert_eq!(got, want);
    let got = with_immediate(1.25, BinOp::Subtract, BinOp::Multiply, &x, &y);
    let want: Vec<f32> = x.iter().zip(&y).map(|(a, b)| (a - 1.25) * b).collect();
    assert_eq!(got, want);
}

/// The error tracing `body` gives.
fn trace_error(body: impl FnOnce()) -> String {
    trace("k", Target::Trn2, &[], |_| {
        body();
        vec![]
    })
    .map(|_| ())
    .unwrap_err()
    .to_string()
}

#[test]
fn operand_shapes_are_checked_when_traced() {
    let e = trace_error(|| {
        let (x, y) = (sbuf([4, 8], DType::F32), sbuf([4, 7], DType::F32));
        let c = sbuf([4, 1], DType::F32);
        scalar_tensor_tensor(&x, &x, BinOp::Multiply, &c, BinOp::Add, &y);
    });
    assert!(
        e.contains("scalar_tensor_tensor: operand1 has shape [4, 7] but dst has shape [4, 8]"),
        "{e}"
    );
    let e = trace_error(|| {
        let (x, d) = (sbuf([4, 8], DType::F32), sbuf([4, 6], DType::F32));
        scalar_tensor_tensor(&d, &x, BinOp::Multiply, 2.0, BinOp::Add, &x);
    });
    assert!(
        e.contains("scalar_tensor_tensor: data has shape [4, 8] but dst has shape [4, 6]"),
        "{e}"
    );
    let e = trace_error(|| {
        let x = sbuf([4, 8], DType::F32);
        let c = sbuf([2, 1], DType::F32);
        scalar_tensor_tensor(&x, &x, BinOp::Multiply, &c, BinOp::Add, &x);
    });
    assert!(
        e.contains("scalar_tensor_tensor: operand0 must be a (4, 1) column, got shape [2, 1]"),
        "{e}"
    );
}

/// `dst = (data · 2) + operand1` with `data` and `operand1` each in PSUM or SBUF (both copied
/// there from SBUF tiles of ones), `dst` in SBUF.
fn psum_inputs(data_in_psum: bool, operand1_in_psum: bool, line: &mut u32) -> Program {
    trace("k", Target::Trn2, &[], |_| {
        let out = shared_hbm(&[4, 8], DType::F32);
        let ones = sbuf([4, 8], DType::F32);
        memset(&ones, 1.0);
        let place = |in_psum: bool| {
            let t = if in_psum {
                psum([4, 8], DType::F32)
            } else {
                sbuf([4, 8], DType::F32)
            };
            tensor_copy(&t, &ones);
            t
        };
        let (data, operand1) = (place(data_in_psum), place(operand1_in_psum));
        let dst = sbuf([4, 8], DType::F32);
        *line = line!() + 1;
        scalar_tensor_tensor(&dst, &data, BinOp::Multiply, 2.0, BinOp::Add, &operand1);
        dma_copy(&out, &dst);
        vec![out]
    })
    .unwrap()
}

#[test]
fn data_and_operand1_cannot_both_be_in_psum() {
    let mut line = 0;
    let p = psum_inputs(true, true, &mut line);
    let v = match validate(&p).unwrap_err() {
        NkiError::Validation(v) => v,
        other => panic!("expected a validation error, got {other}"),
    };
    assert_eq!(v.rule, "psum-both-inputs");
    assert_eq!(v.instruction, "scalar_tensor_tensor");
    assert_eq!(
        v.message,
        "scalar_tensor_tensor: data t1 and operand1 t2 are both in PSUM; at most one of them \
         may be (tensor_copy one of them to SBUF first)"
    );
    let text = validate(&p).unwrap_err().to_string();
    assert!(
        text.contains("[psum-both-inputs]") && text.contains(&format!("{}:{line}", file!())),
        "{text}"
    );
    // One of them in PSUM is fine, and computes the same.
    for (d, o) in [(true, false), (false, true), (false, false)] {
        let p = psum_inputs(d, o, &mut line);
        validate(&p).unwrap();
        let out = simulate_to_vecs(&p, &[], SimOptions::default()).unwrap();
        assert!(
            (0..32).all(|i| DType::F32.read(&out[0], i) == 3.0),
            "{d} {o}"
        );
    }
}

/// The one `scalar_tensor_tensor` slice of `p`'s estimate: `(engine, duration ns)`.
fn stt_slice(p: &Program) -> (Engine, f64) {
    let report = estimate(p);
    let slices: Vec<_> = report
        .slices
        .iter()
        .filter(|s| s.name == "scalar_tensor_tensor")
        .collect();
    assert_eq!(slices.len(), 1);
    (slices[0].engine, slices[0].end_ns - slices[0].start_ns)
}

#[test]
fn cost_is_the_two_input_vector_formula() {
    let ops = (BinOp::Subtract, BinOp::Multiply);
    let n = 1000.0_f64;
    // 64 + 2 · ⌈N / r⌉ cycles at 0.96 GHz on Trn2: r = 4 only when data, operand1 and dst are
    // all 16-bit (the fp32 (P, 1) column does not set the rate), else 2.
    for (dtypes, r) in [
        ((DType::BF16, DType::BF16, DType::BF16), 4.0),
        ((DType::BF16, DType::BF16, DType::F32), 2.0),
        ((DType::BF16, DType::F32, DType::BF16), 2.0),
        ((DType::F32, DType::BF16, DType::BF16), 2.0),
        ((DType::F32, DType::F32, DType::F32), 2.0),
    ] {
        let (engine, ns) = stt_slice(&program(128, 1000, dtypes, ops, Form::Fused));
        assert_eq!(engine, Engine::Vector);
        let want = (64.0 + 2.0 * (n / r).ceil()) / 0.96;
        assert!((ns - want).abs() < 1e-6, "{dtypes:?}: {ns} vs {want}");
    }
}

#[test]
fn codegen_emits_the_nki_call() {
    let p = program(
        4,
        8,
        (DType::BF16, DType::BF16, DType::F32),
        (BinOp::Subtract, BinOp::Multiply),
        Form::Fused,
    );
    let src = emit_nki(&p);
    assert!(
        src.contains(
            "nisa.scalar_tensor_tensor(dst=t3, data=t0, op0=nl.subtract, operand0=t1, \
             op1=nl.multiply, operand1=t2)  # nki-core/tests/scalar_tensor_tensor.rs:"
        ),
        "{src}"
    );
}
