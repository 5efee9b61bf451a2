//! `tensor_copy_predicated`: `src` (a tile or an immediate) copied into `dst` where the
//! predicate is nonzero (zero with `reverse_pred`), `dst` keeping its values elsewhere; the
//! trace checks (shapes, one dtype for `src` and `dst`), the PSUM rule, cost and codegen.

use nki_core::NkiError;
use nki_core::codegen::emit_nki;
use nki_core::cost::{Engine, estimate};
use nki_core::ir::Program;
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::sim::{SimOptions, simulate_to_vecs};
use nki_core::validate::validate;

/// `x` `[rows, cols]` and `y` of the same shape, in `dtype`.
fn inputs(rows: usize, cols: usize, dtype: DType) -> Vec<InputSpec> {
    ["x", "y"]
        .map(|name| InputSpec {
            name: name.into(),
            shape: vec![rows, cols],
            dtype,
        })
        .to_vec()
}

fn run(p: &Program, x: &[f32], y: &[f32]) -> Vec<f32> {
    let dt = p.inputs().next().unwrap().1.dtype;
    let encode = |v: &[f32]| {
        let mut b = vec![0; v.len() * dt.size_bytes()];
        for (i, x) in v.iter().enumerate() {
            dt.write(&mut b, i, *x);
        }
        b
    };
    let (bx, by) = (encode(x), encode(y));
    let out = simulate_to_vecs(p, &[&bx, &by], SimOptions::default()).unwrap();
    let odt = p.hbm[p.outputs[0].0 as usize].dtype;
    (0..out[0].len() / odt.size_bytes())
        .map(|i| odt.read(&out[0], i))
        .collect()
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
    // src and the predicate: 64 + 2 · ⌈600 / 2⌉ cycles at 0.96 GHz.
    let want = (64.0 + 600.0) / 0.96;
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
