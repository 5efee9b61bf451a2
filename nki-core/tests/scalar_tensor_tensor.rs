//! `scalar_tensor_tensor`: `(data <op0> operand0) <op1> operand1` in one vector-engine
//! instruction. Simulated, it gives exactly the bits of a `tensor_scalar` into an fp32 tile
//! followed by a `tensor_tensor` (the intermediate stays fp32, the result is rounded once), with
//! a column or an immediate `operand0`, in place or not, on one thread or split across rows;
//! operands are checked when traced, PSUM inputs when validated; the cost model charges it as a
//! two-input vector instruction; codegen emits the NKI call. With a free-dim reduction
//! (`scalar_tensor_tensor_reduce`), `reduce_res` gets each row's fp32 results reduced before
//! they are rounded to `dst` (the bits of `tensor_reduce` over an fp32 result), for each
//! reduction operator; a bad operator or `reduce_res` shape is a trace error; the reduction
//! costs 64 more vector cycles; codegen adds `reduce_op=`/`reduce_res=`.

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
fn run_with(p: &Program, x: &[f32], c: &[f32], y: &[f32], opts: SimOptions) -> Vec<u8> {
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
        let want = (2.0 * (n / r).ceil()).max(64.0) / 0.96;
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

/// How a program computes `r = (x · c) + y` and a reduction of each row of `r`.
#[derive(Clone, Copy, Debug)]
enum ReduceForm {
    /// One `scalar_tensor_tensor_reduce`, into a fresh tile.
    Fused,
    /// The same writing over `x`'s tile.
    FusedInPlace,
    /// `tensor_scalar` and `tensor_tensor` into fp32 tiles, `tensor_reduce` of the fp32 result,
    /// and a `tensor_copy` to the output dtype.
    Steps,
}

/// bf16 `x`, fp32 `c`, bf16 `y` `[rows, cols]`; outputs the bf16 `r` and an fp32 `[rows, 1]`
/// reduction of it with `reduce_op`, computed in `form`.
fn reduce_program(rows: usize, cols: usize, reduce_op: BinOp, form: ReduceForm) -> Program {
    let bf16 = DType::BF16;
    trace("k", Target::Trn2, &specs(rows, cols, bf16, bf16), |h| {
        let (out, out_res) = (
            shared_hbm(&[rows, cols], bf16),
            shared_hbm(&[rows, 1], DType::F32),
        );
        let (x, c, y) = (
            sbuf([rows, cols], bf16),
            sbuf([rows, 1], DType::F32),
            sbuf([rows, cols], bf16),
        );
        dma_copy(&x, &h[0]);
        dma_copy(&c, &h[1]);
        dma_copy(&y, &h[2]);
        let res = sbuf([rows, 1], DType::F32);
        let (mul, add) = (BinOp::Multiply, BinOp::Add);
        let dst = match form {
            ReduceForm::Fused => {
                let dst = sbuf([rows, cols], bf16);
                scalar_tensor_tensor_reduce(&dst, &x, mul, &c, add, &y, reduce_op, &res);
                dst
            }
            ReduceForm::FusedInPlace => {
                scalar_tensor_tensor_reduce(&x, &x, mul, &c, add, &y, reduce_op, &res);
                x
            }
            ReduceForm::Steps => {
                let tmp = sbuf([rows, cols], DType::F32);
                tensor_scalar(&tmp, &x, mul, &c);
                tensor_tensor(&tmp, &tmp, &y, add);
                tensor_reduce(&res, reduce_op, &tmp, 1, false);
                let dst = sbuf([rows, cols], bf16);
                tensor_copy(&dst, &tmp);
                dst
            }
        };
        dma_copy(&out, &dst);
        dma_copy(&out_res, &res);
        vec![out, out_res]
    })
    .unwrap()
}

/// The two outputs of a [`reduce_program`]: `r` and the reductions, as f32s.
fn run_reduce(p: &Program, x: &[f32], c: &[f32], y: &[f32], opts: SimOptions) -> [Vec<f32>; 2] {
    let inputs = [
        encode(DType::BF16, x),
        encode(DType::F32, c),
        encode(DType::BF16, y),
    ];
    let refs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
    let out = simulate_to_vecs(p, &refs, opts).unwrap();
    let read = |bytes: &[u8], dtype: DType| {
        (0..bytes.len() / dtype.size_bytes())
            .map(|i| dtype.read(bytes, i))
            .collect()
    };
    [read(&out[0], DType::BF16), read(&out[1], DType::F32)]
}

/// Inputs whose `r = x · c + y` lies in about [0.7, 1.3] with many mantissa bits (so rounding
/// it to bf16 shows, and a product of a few hundred stays finite): `x`, `c`, `y`.
fn reduce_inputs(rows: usize, cols: usize) -> (Vec<f32>, Vec<f32>, Vec<f32>) {
    let x = values(rows * cols, 11);
    let c: Vec<f32> = values(rows, 12).iter().map(|v| v / 64.0).collect();
    let y: Vec<f32> = values(rows * cols, 13)
        .iter()
        .map(|v| 1.0 + v / 64.0)
        .collect();
    (x, c, y)
}

/// The hand-computed reference: each row's fp32 results `r` (from the bf16-rounded inputs) and
/// the row's `r` rounded to bf16.
fn reference_rows(cols: usize, (x, c, y): (&[f32], &[f32], &[f32])) -> Vec<(Vec<f32>, Vec<f32>)> {
    let bf16 = |v: f32| DType::BF16.round(v);
    c.iter()
        .enumerate()
        .map(|(row, &c)| {
            let at = |v: &[f32], i: usize| bf16(v[row * cols + i]);
            let r: Vec<f32> = (0..cols).map(|i| at(x, i) * c + at(y, i)).collect();
            let rounded = r.iter().map(|&v| bf16(v)).collect();
            (r, rounded)
        })
        .collect()
}

/// `reduce_op` over `row` in f64 (in order).
fn reduce_f64(reduce_op: BinOp, row: &[f32]) -> f64 {
    let row = row.iter().map(|&v| f64::from(v));
    match reduce_op {
        BinOp::Add => row.sum(),
        BinOp::Multiply => row.product(),
        BinOp::Maximum => row.fold(f64::NEG_INFINITY, f64::max),
        BinOp::Minimum => row.fold(f64::INFINITY, f64::min),
        other => panic!("{other:?} is not a reduction"),
    }
}

#[test]
fn the_reduction_is_of_the_fp32_results_before_they_are_rounded_to_dst() {
    // [5, 37] runs row by row; [128, 512] is large enough to split its rows across threads.
    for (rows, cols) in [(5, 37), (128, 512)] {
        let (x, c, y) = reduce_inputs(rows, cols);
        let reference = reference_rows(cols, (&x, &c, &y));
        let want_dst: Vec<f32> = reference.iter().flat_map(|(_, d)| d.clone()).collect();
        for reduce_op in [BinOp::Add, BinOp::Multiply, BinOp::Maximum, BinOp::Minimum] {
            let steps = reduce_program(rows, cols, reduce_op, ReduceForm::Steps);
            let [_, steps_res] = run_reduce(&steps, &x, &c, &y, SimOptions::default());
            let mut rounded_differs = false;
            for form in [ReduceForm::Fused, ReduceForm::FusedInPlace] {
                let p = reduce_program(rows, cols, reduce_op, form);
                validate(&p).unwrap();
                for parallel in [true, false] {
                    let opts = SimOptions {
                        parallel,
                        ..SimOptions::default()
                    };
                    let what = format!("{rows}x{cols} {reduce_op:?} {form:?} parallel {parallel}");
                    let [dst, res] = run_reduce(&p, &x, &c, &y, opts);
                    // dst is the plain instruction's; the reduction the same bits as
                    // tensor_reduce of the fp32 result.
                    assert!(dst == want_dst, "{what}");
                    assert!(res == steps_res, "{what}");
                    for (row, (r, rounded)) in reference.iter().enumerate() {
                        let (want, of_rounded) =
                            (reduce_f64(reduce_op, r), reduce_f64(reduce_op, rounded));
                        let got = f64::from(res[row]);
                        // fp32 rounding of a sum or product of these values is far below
                        // this; bf16 rounding of each term is not.
                        let tol = 1e-5 * want.abs().max(1.0);
                        assert!(
                            (got - want).abs() <= tol,
                            "{what} row {row}: {got} vs {want}"
                        );
                        rounded_differs |= (of_rounded - want).abs() > tol;
                    }
                }
            }
            // The inputs are such that reducing the rounded dst instead would be observable.
            assert!(rounded_differs, "{rows}x{cols} {reduce_op:?}");
        }
    }
}

#[test]
fn max_and_min_reductions_are_exact() {
    let (rows, cols) = (6, 50);
    let (x, c, y) = reduce_inputs(rows, cols);
    let reference = reference_rows(cols, (&x, &c, &y));
    for reduce_op in [BinOp::Maximum, BinOp::Minimum] {
        let p = reduce_program(rows, cols, reduce_op, ReduceForm::Fused);
        let [_, res] = run_reduce(&p, &x, &c, &y, SimOptions::default());
        let want: Vec<f32> = reference
            .iter()
            .map(|(r, _)| reduce_f64(reduce_op, r) as f32)
            .collect();
        assert_eq!(res, want, "{reduce_op:?}");
    }
}

#[test]
fn reduce_operands_are_checked_when_traced() {
    let reduce = |res: [usize; 2], reduce_op: BinOp| {
        trace_error(move || {
            let (x, y) = (sbuf([4, 8], DType::F32), sbuf([4, 8], DType::F32));
            let res = sbuf(res, DType::F32);
            let (mul, add) = (BinOp::Multiply, BinOp::Add);
            scalar_tensor_tensor_reduce(&x, &x, mul, 2.0, add, &y, reduce_op, &res);
        })
    };
    for bad in [BinOp::Subtract, BinOp::Divide, BinOp::Greater] {
        let e = reduce([4, 1], bad);
        assert!(
            e.contains(&format!(
                "scalar_tensor_tensor: {bad:?} is not a reduction operator"
            )),
            "{e}"
        );
    }
    let e = reduce([4, 2], BinOp::Add);
    assert!(
        e.contains("scalar_tensor_tensor: reduce_res must be a (4, 1) column, got shape [4, 2]"),
        "{e}"
    );
    let e = reduce([2, 1], BinOp::Maximum);
    assert!(
        e.contains("scalar_tensor_tensor: reduce_res must be a (4, 1) column, got shape [2, 1]"),
        "{e}"
    );
}

#[test]
fn a_reduction_adds_one_fixed_vector_cost_and_keeps_the_rate() {
    for (rows, cols) in [(128, 1000), (16, 100)] {
        let plain = program(
            rows,
            cols,
            (DType::BF16, DType::BF16, DType::BF16),
            (BinOp::Multiply, BinOp::Add),
            Form::Fused,
        );
        let (_, plain_ns) = stt_slice(&plain);
        // All-bf16 streams at 4 per lane per cycle: the fp32 (P, 1) reduce_res does not slow it.
        let want_plain = (2.0 * (cols as f64 / 4.0).ceil()).max(64.0) / 0.96;
        assert!(
            (plain_ns - want_plain).abs() < 1e-6,
            "{plain_ns} vs {want_plain}"
        );
        for reduce_op in [BinOp::Add, BinOp::Maximum] {
            let fused = reduce_program(rows, cols, reduce_op, ReduceForm::Fused);
            let (engine, ns) = stt_slice(&fused);
            assert_eq!(engine, Engine::Vector);
            let want = plain_ns + 64.0 / 0.96;
            assert!(
                (ns - want).abs() < 1e-6,
                "{rows}x{cols} {reduce_op:?}: {ns} vs {want}"
            );
        }
    }
}

#[test]
fn codegen_emits_the_reduce_keywords() {
    let p = reduce_program(4, 8, BinOp::Maximum, ReduceForm::Fused);
    let src = emit_nki(&p);
    assert!(
        src.contains(
            "nisa.scalar_tensor_tensor(dst=t4, data=t0, op0=nl.multiply, operand0=t1, \
             op1=nl.add, operand1=t2, reduce_op=nl.maximum, reduce_res=t3)  \
             # nki-core/tests/scalar_tensor_tensor.rs:"
        ),
        "{src}"
    );
}
