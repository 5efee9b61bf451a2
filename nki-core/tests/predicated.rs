//! `tensor_copy_predicated`: `src` (a tile or an immediate) copied into `dst` where the
//! predicate is nonzero (zero with `reverse_pred`), `dst` keeping its values elsewhere; and
//! `affine_select`: `on_true_tile` where an affine function of the indices compares true with 0
//! (a causal mask, every comparison, regions of a tile), `on_false_value` elsewhere. The trace
//! checks, the PSUM rules, cost and codegen of both.

mod common;

use nki_core::NkiError;
use nki_core::codegen::emit_nki;
use nki_core::cost::{Engine, estimate};
use nki_core::ir::Program;
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::validate::validate;

/// `x` `[rows, cols]` and `y` of the same shape, in `dtype`.
fn inputs(rows: usize, cols: usize, dtype: DType) -> Vec<InputSpec> {
    common::named_inputs(&["x", "y"], [rows, cols], dtype)
}

fn run(p: &Program, x: &[f32], y: &[f32]) -> Vec<f32> {
    common::run(p, &[x, y]).remove(0)
}

/// `dst = y`, then `x` (or `imm`) copied into it where `x > 0` (the predicate, 1.0 / 0.0 in an
/// fp32 tile; or `x` itself as the predicate with `raw`).
fn program(
    rows: usize,
    cols: usize,
    dtype: DType,
    imm: Option<f32>,
    reverse: bool,
    raw: bool,
) -> Program {
    trace("k", Target::Trn2, &inputs(rows, cols, dtype), |h| {
        let out = shared_hbm(&[rows, cols], dtype);
        let x = sbuf([rows, cols], dtype);
        dma_copy(&x, &h[0]);
        let dst = sbuf([rows, cols], dtype);
        dma_copy(&dst, &h[1]);
        let pred = sbuf([rows, cols], DType::F32);
        if raw {
            tensor_copy(&pred, &x);
        } else {
            tensor_scalar(&pred, &x, BinOp::Greater, 0.0);
        }
        match imm {
            Some(v) => tensor_copy_predicated(&dst, v, &pred, reverse),
            None => tensor_copy_predicated(&dst, &x, &pred, reverse),
        }
        dma_copy(&out, &dst);
        vec![out]
    })
    .unwrap()
}

#[test]
fn copies_where_the_predicate_holds_and_keeps_dst_elsewhere() {
    // [128, 300] splits rows across threads.
    for (rows, cols) in [(3, 10), (128, 300)] {
        let n = rows * cols;
        let x: Vec<f32> = (0..n)
            .map(|i| ((i * 37 % 23) as f32 - 11.0) * 0.3)
            .collect();
        let y: Vec<f32> = (0..n).map(|i| 1000.0 + i as f32).collect();
        for reverse in [false, true] {
            let got = run(
                &program(rows, cols, DType::F32, None, reverse, false),
                &x,
                &y,
            );
            let want: Vec<f32> = (0..n)
                .map(|i| if (x[i] > 0.0) != reverse { x[i] } else { y[i] })
                .collect();
            assert_eq!(got, want, "{rows}x{cols} reverse={reverse}");
            let got = run(
                &program(rows, cols, DType::F32, Some(-7.5), reverse, false),
                &x,
                &y,
            );
            let want: Vec<f32> = (0..n)
                .map(|i| if (x[i] > 0.0) != reverse { -7.5 } else { y[i] })
                .collect();
            assert_eq!(got, want, "{rows}x{cols} imm reverse={reverse}");
        }
    }
}

#[test]
fn any_nonzero_predicate_holds_nan_included_and_an_immediate_rounds_to_dst() {
    let x = [0.0, -0.0, 2.0, -3.0, f32::NAN, 0.5];
    let y = [10.0, 20.0, 30.0, 40.0, 50.0, 60.0];
    let got = run(&program(1, 6, DType::BF16, Some(0.1), false, true), &x, &y);
    let v = half::bf16::from_f32(0.1).to_f32();
    assert_eq!(got, [10.0, 20.0, v, v, v, v]);
    let got = run(&program(1, 6, DType::BF16, Some(0.1), true, true), &x, &y);
    assert_eq!(got, [v, v, 30.0, 40.0, 50.0, 60.0]);
}

#[test]
fn operands_are_checked_when_traced_and_psum_when_validated() {
    let attempt = |pred_cols: usize, src_dtype: DType| {
        trace("k", Target::Trn2, &[], |_| {
            let out = shared_hbm(&[4, 8], DType::F32);
            let dst = sbuf([4, 8], DType::F32);
            memset(&dst, 1.0);
            let src = sbuf([4, 8], src_dtype);
            memset(&src, 2.0);
            let pred = sbuf([4, pred_cols], DType::F32);
            memset(&pred, 1.0);
            tensor_copy_predicated(&dst, &src, &pred, false);
            dma_copy(&out, &dst);
            vec![out]
        })
        .map(|_| ())
        .unwrap_err()
        .to_string()
    };
    let e = attempt(6, DType::F32);
    assert!(
        e.contains("tensor_copy_predicated: predicate has shape [4, 6] but dst has shape [4, 8]"),
        "{e}"
    );
    let e = attempt(8, DType::BF16);
    assert!(
        e.contains("tensor_copy_predicated: src is bf16 but dst is f32; they must share one dtype"),
        "{e}"
    );
    let both = trace("k", Target::Trn2, &[], |_| {
        let out = shared_hbm(&[4, 8], DType::F32);
        let dst = sbuf([4, 8], DType::F32);
        memset(&dst, 1.0);
        let (src, pred) = (psum([4, 8], DType::F32), psum([4, 8], DType::F32));
        memset(&src, 2.0);
        memset(&pred, 1.0);
        tensor_copy_predicated(&dst, &src, &pred, false);
        dma_copy(&out, &dst);
        vec![out]
    })
    .unwrap();
    match validate(&both).unwrap_err() {
        NkiError::Validation(v) => {
            assert_eq!(v.rule, "psum-both-inputs");
            assert!(
                v.message.contains("tensor_copy_predicated: src"),
                "{}",
                v.message
            );
        }
        e => panic!("{e}"),
    }
}

#[test]
fn costs_a_vector_pass_per_streamed_input_and_emits_its_nki_call() {
    let p = program(128, 600, DType::F32, None, true, false);
    validate(&p).unwrap();
    let report = estimate(&p);
    let slice = report
        .slices
        .iter()
        .find(|s| s.name == "tensor_copy_predicated")
        .unwrap();
    assert_eq!(slice.engine, Engine::Vector);
    // src and the predicate: 2 · ⌈600 / 2⌉ cycles at 0.96 GHz, plus 100 for reading what the
    // previous vector instruction wrote.
    let want = (100.0 + 600.0) / 0.96;
    assert!(
        ((slice.end_ns - slice.start_ns) - want).abs() < 1e-6,
        "{slice:?}"
    );
    let source = emit_nki(&p);
    assert!(
        source.contains(
            "nisa.tensor_copy_predicated(dst=t1, src=t0, predicate=t2, reverse_pred=True)"
        ),
        "{source}"
    );
    let source = emit_nki(&program(4, 8, DType::F32, Some(0.25), false, false));
    assert!(
        source.contains("nisa.tensor_copy_predicated(dst=t1, src=0.25, predicate=t2)"),
        "{source}"
    );
}

/// `affine_select` of `x` `[rows, cols]` (in `data`) into a `dst` of dtype `out`, over the
/// region rows `r0..`, columns `c0..` of both (the rest of `dst` is 0).
#[allow(clippy::too_many_arguments)]
fn select_program(
    (rows, cols): (usize, usize),
    (r0, c0): (usize, usize),
    (data, out): (DType, DType),
    (step, multiplier, offset): (i32, i32, i32),
    cmp: BinOp,
    on_false: f32,
) -> Program {
    trace("k", Target::Trn2, &inputs(rows, cols, data), |h| {
        let result = shared_hbm(&[rows, cols], out);
        let x = sbuf([rows, cols], data);
        dma_copy(&x, &h[0]);
        let dst = sbuf([rows, cols], out);
        memset(&dst, 0.0);
        let (np, nf) = (rows - r0, cols - c0);
        affine_select(
            dst.region().slice(r0, np, c0, nf),
            step,
            multiplier,
            x.region().slice(r0, np, c0, nf),
            on_false,
            cmp,
            offset,
        );
        dma_copy(&result, &dst);
        vec![result]
    })
    .unwrap()
}

#[test]
fn affine_select_keeps_on_true_where_the_affine_value_compares_true_with_zero() {
    let (rows, cols) = (96, 80);
    let x: Vec<f32> = (0..rows * cols).map(|i| i as f32 * 0.5 - 7.0).collect();
    let y = vec![0.0; rows * cols];
    // A causal mask (f <= p), then every comparison with other coefficients, on the whole tile
    // and on a region (indices count from the region's first partition and element).
    let mut cases = vec![((-1, 1, 0), BinOp::GreaterEqual)];
    for cmp in [
        BinOp::Equal,
        BinOp::NotEqual,
        BinOp::Greater,
        BinOp::GreaterEqual,
        BinOp::Less,
        BinOp::LessEqual,
    ] {
        cases.push(((3, -2, 5), cmp));
    }
    for (coeffs @ (step, multiplier, offset), cmp) in cases {
        for (r0, c0) in [(0, 0), (32, 16)] {
            let p = select_program(
                (rows, cols),
                (r0, c0),
                (DType::F32, DType::F32),
                coeffs,
                cmp,
                f32::NEG_INFINITY,
            );
            validate(&p).unwrap();
            let got = run(&p, &x, &y);
            for r in 0..rows {
                for c in 0..cols {
                    let want = if r < r0 || c < c0 {
                        0.0
                    } else {
                        let value = offset + multiplier * (r - r0) as i32 + step * (c - c0) as i32;
                        if cmp.apply(value as f32, 0.0) != 0.0 {
                            x[r * cols + c]
                        } else {
                            f32::NEG_INFINITY
                        }
                    };
                    assert_eq!(got[r * cols + c], want, "{cmp:?} {coeffs:?} at {r}, {c}");
                }
            }
        }
    }
}

#[test]
fn affine_select_rounds_both_values_to_dst() {
    let x = [1.0 + 1.0 / 256.0, 2.0, 3.0, 4.0];
    let p = select_program(
        (1, 4),
        (0, 0),
        (DType::F32, DType::BF16),
        (1, 0, -2),
        BinOp::Less,
        0.1,
    );
    let got = run(&p, &x, &[0.0; 4]);
    let bf = |v: f32| half::bf16::from_f32(v).to_f32();
    assert_eq!(got, [bf(1.0 + 1.0 / 256.0), 2.0, bf(0.1), bf(0.1)]);
}

#[test]
fn affine_select_is_checked_when_traced_and_stays_out_of_psum() {
    let attempt = |cmp: BinOp, cols: usize, psum_dst: bool| {
        trace("k", Target::Trn2, &[], |_| {
            let out = shared_hbm(&[4, 8], DType::F32);
            let x = sbuf([4, 8], DType::F32);
            memset(&x, 1.0);
            let dst = if psum_dst {
                psum([4, cols], DType::F32)
            } else {
                sbuf([4, cols], DType::F32)
            };
            affine_select(&dst, 1, 0, &x, 0.0, cmp, 0);
            dma_copy(&out, &x);
            vec![out]
        })
    };
    let e = attempt(BinOp::Add, 8, false)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("affine_select: cmp_op is nl.add, but it must be a comparison"),
        "{e}"
    );
    let e = attempt(BinOp::Equal, 6, false)
        .map(|_| ())
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("affine_select: on_true_tile has shape [4, 8] but dst has shape [4, 6]"),
        "{e}"
    );
    let p = attempt(BinOp::Equal, 8, true).unwrap();
    match validate(&p).unwrap_err() {
        NkiError::Validation(v) => {
            assert_eq!(v.rule, "gpsimd-psum");
            assert!(
                v.message.contains("affine_select runs on GpSimd"),
                "{}",
                v.message
            );
        }
        e => panic!("{e}"),
    }
}

#[test]
fn affine_select_runs_on_gpsimd_and_emits_its_nki_call() {
    let p = select_program(
        (128, 600),
        (0, 0),
        (DType::F32, DType::F32),
        (-1, 1, 0),
        BinOp::GreaterEqual,
        f32::NEG_INFINITY,
    );
    let report = estimate(&p);
    let slice = report
        .slices
        .iter()
        .find(|s| s.name == "affine_select")
        .unwrap();
    assert_eq!(slice.engine, Engine::GpSimd);
    // max(64, N) GpSimd cycles at 1.2 GHz.
    let want = 600.0 / 1.2;
    assert!(
        ((slice.end_ns - slice.start_ns) - want).abs() < 1e-6,
        "{slice:?}"
    );
    let source = emit_nki(&p);
    assert!(
        source.contains(
            "nisa.affine_select(dst=t1, pattern=[[-1, 600]], channel_multiplier=1, on_true_tile=t0, \
             on_false_value=float('-inf'), cmp_op=nl.greater_equal, offset=0)"
        ),
        "{source}"
    );
}
