//! `tensor_scalar_reduce`: `data <op0> operand0` with a free-dim reduction of its fp32 results.
//! Simulated, it gives the bits of `tensor_scalar` into an fp32 tile, `tensor_reduce` of it and
//! a cast to `dst`, for each reduction operator, on one thread or split across rows; with
//! `reduce_init` (NKI's `load_reduce`) and `reduce_res_negate`; operands are checked when traced;
//! it costs one MIN_II more than `tensor_scalar`; codegen emits its keywords.

mod common;

use common::{input, run, values};
use nki_core::codegen::emit_nki;
use nki_core::cost::{Engine, estimate};
use nki_core::ir::{Program, ScalarOperand};
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;

/// `tensor_scalar_reduce` of `x` `[rows, cols]` (in `data`) with `op0` and the column `c`
/// (input 1), into a `dst` of dtype `out` (output 0) and an fp32 `reduce_res` (output 1); or,
/// with `two_steps`, the same from `tensor_scalar` into an fp32 tile, `tensor_reduce` of it and a
/// `tensor_copy` to `out`.
fn tensor_scalar_reduce_program(
    (rows, cols): (usize, usize),
    (data, out): (DType, DType),
    (op0, reduce_op): (BinOp, BinOp),
    two_steps: bool,
) -> Program {
    let inputs = vec![
        InputSpec {
            name: "x".into(),
            shape: vec![rows, cols],
            dtype: data,
        },
        InputSpec {
            name: "c".into(),
            shape: vec![rows, 1],
            dtype: DType::F32,
        },
    ];
    trace("k", Target::Trn2, &inputs, |h| {
        let result = shared_hbm(&[rows, cols], out);
        let reduced = shared_hbm(&[rows, 1], DType::F32);
        let x = sbuf([rows, cols], data);
        dma_copy(&x, &h[0]);
        let c = sbuf([rows, 1], DType::F32);
        dma_copy(&c, &h[1]);
        let y = sbuf([rows, cols], out);
        let res = sbuf([rows, 1], DType::F32);
        if two_steps {
            let tmp = sbuf([rows, cols], DType::F32);
            tensor_scalar(&tmp, &x, op0, &c);
            tensor_reduce(&res, reduce_op, &tmp, 1, false);
            tensor_copy(&y, &tmp);
        } else {
            tensor_scalar_reduce(&y, &x, op0, &c, reduce_op, &res, false, None, false);
        }
        dma_copy(&result, &y);
        dma_copy(&reduced, &res);
        vec![result, reduced]
    })
    .unwrap()
}

#[test]
fn tensor_scalar_reduce_gives_the_bits_of_tensor_scalar_into_fp32_then_tensor_reduce() {
    for (rows, cols) in [(5, 37), (128, 512)] {
        let x = values(rows * cols, 3, 8.0);
        let c = values(rows, 4, 50.0);
        for (data, out) in [(DType::F32, DType::F32), (DType::BF16, DType::BF16)] {
            for ops in [
                (BinOp::Multiply, BinOp::Add),
                (BinOp::Subtract, BinOp::Maximum),
                (BinOp::Add, BinOp::Minimum),
                (BinOp::Divide, BinOp::Multiply),
                (BinOp::Greater, BinOp::Add),
            ] {
                let fused = tensor_scalar_reduce_program((rows, cols), (data, out), ops, false);
                let steps = tensor_scalar_reduce_program((rows, cols), (data, out), ops, true);
                let (got, want) = (run(&fused, &[&x, &c]), run(&steps, &[&x, &c]));
                assert!(got[0] == want[0], "{rows}x{cols} {out:?} {ops:?} dst");
                let bits = |v: &[f32]| v.iter().map(|f| f.to_bits()).collect::<Vec<_>>();
                assert_eq!(
                    bits(&got[1]),
                    bits(&want[1]),
                    "{rows}x{cols} {out:?} {ops:?}"
                );
            }
        }
    }
}

#[test]
fn tensor_scalar_reduce_load_reduce_negate_and_nan() {
    // `init`: none, an immediate, or (NaN) the column [10, 15].
    let run_one = |x: &[f32], reduce_op: BinOp, init: Option<f32>, negate: bool| {
        let n = x.len();
        let p = trace("k", Target::Trn2, &input([2, n / 2], DType::F32), |h| {
            let result = shared_hbm(&[2, 1], DType::F32);
            let t = sbuf([2, n / 2], DType::F32);
            dma_copy(&t, &h[0]);
            let col = sbuf([2, 1], DType::F32);
            iota(&col, 10, 5, 0); // 10, 15
            let init: Option<ScalarOperand> =
                init.map(|v| if v.is_nan() { (&col).into() } else { v.into() });
            let res = sbuf([2, 1], DType::F32);
            tensor_scalar_reduce(
                &t,
                &t,
                BinOp::Multiply,
                2.0,
                reduce_op,
                &res,
                false,
                init,
                negate,
            );
            dma_copy(&result, &res);
            vec![result]
        })
        .unwrap();
        run(&p, &[x]).remove(0)
    };
    let x = [1.0, 2.0, 3.0, 4.0, -1.0, -2.0, -3.0, 0.5];
    assert_eq!(run_one(&x, BinOp::Add, None, false), [20.0, -11.0]);
    assert_eq!(run_one(&x, BinOp::Add, None, true), [-20.0, 11.0]);
    assert_eq!(run_one(&x, BinOp::Add, Some(0.5), false), [20.5, -10.5]);
    let column = Some(f32::NAN);
    assert_eq!(run_one(&x, BinOp::Maximum, column, false), [10.0, 15.0]);
    assert_eq!(run_one(&x, BinOp::Minimum, column, true), [-2.0, 6.0]);
    assert_eq!(run_one(&x, BinOp::Multiply, None, false), [384.0, -48.0]);
    // Maximum passes over NaN (f32::max), add propagates it.
    let nan = [f32::NAN, 1.0, f32::NEG_INFINITY, 0.0, 1.0, 2.0, 3.0, 4.0];
    assert_eq!(run_one(&nan, BinOp::Maximum, None, false)[0], 2.0);
    assert!(run_one(&nan, BinOp::Add, None, false)[0].is_nan());
}

#[test]
fn tensor_scalar_reduce_operands_are_checked_when_traced() {
    let attempt = |reduce_op: BinOp, res_rows: usize, c_rows: usize, init_rows: usize| {
        trace("k", Target::Trn2, &[], |_| {
            let out = shared_hbm(&[4, 8], DType::F32);
            let x = sbuf([4, 8], DType::F32);
            memset(&x, 1.0);
            let c = sbuf([c_rows, 1], DType::F32);
            memset(&c, 1.0);
            let res = sbuf([res_rows, 1], DType::F32);
            let init = sbuf([init_rows, 1], DType::F32);
            memset(&init, 0.0);
            tensor_scalar_reduce(
                &x,
                &x,
                BinOp::Add,
                &c,
                reduce_op,
                &res,
                false,
                Some((&init).into()),
                false,
            );
            dma_copy(&out, &x);
            vec![out]
        })
        .map(|_| ())
        .unwrap_err()
        .to_string()
    };
    let e = attempt(BinOp::Subtract, 4, 4, 4);
    assert!(
        e.contains("tensor_scalar_reduce: Subtract is not a reduction operator"),
        "{e}"
    );
    let e = attempt(BinOp::Add, 2, 4, 4);
    assert!(
        e.contains("tensor_scalar_reduce: reduce_res must be a (4, 1) column, got shape [2, 1]"),
        "{e}"
    );
    let e = attempt(BinOp::Add, 4, 3, 4);
    assert!(
        e.contains("tensor_scalar_reduce: operand0 must be a (4, 1) column, got shape [3, 1]"),
        "{e}"
    );
    let e = attempt(BinOp::Add, 4, 4, 1);
    assert!(
        e.contains("tensor_scalar_reduce: reduce_init must be a (4, 1) column, got shape [1, 1]"),
        "{e}"
    );
}

#[test]
fn tensor_scalar_reduce_costs_one_min_ii_more_than_tensor_scalar_and_emits_its_keywords() {
    let ops = (BinOp::Multiply, BinOp::Add);
    let p = tensor_scalar_reduce_program((128, 600), (DType::F32, DType::F32), ops, false);
    let report = estimate(&p);
    let slice = report
        .slices
        .iter()
        .find(|s| s.name == "tensor_scalar_reduce")
        .unwrap();
    assert_eq!(slice.engine, Engine::Vector);
    let want = (300.0 + 64.0) / 0.96;
    assert!(
        ((slice.end_ns - slice.start_ns) - want).abs() < 1e-6,
        "{slice:?}"
    );
    let source = emit_nki(&p);
    assert!(
        source.contains(
            "nisa.tensor_scalar_reduce(dst=t2, data=t0, op0=nl.multiply, operand0=t1, \
             reduce_op=nl.add, reduce_res=t3)"
        ),
        "{source}"
    );
    let p = trace("k", Target::Trn2, &[], |_| {
        let out = shared_hbm(&[4, 1], DType::F32);
        let x = sbuf([4, 8], DType::F32);
        memset(&x, 1.0);
        let res = sbuf([4, 1], DType::F32);
        tensor_scalar_reduce(
            &x,
            &x,
            BinOp::Add,
            0.5,
            BinOp::Maximum,
            &res,
            false,
            Some(2.0.into()),
            true,
        );
        dma_copy(&out, &res);
        vec![out]
    })
    .unwrap();
    let source = emit_nki(&p);
    assert!(
        source.contains(
            "nisa.tensor_scalar_reduce(dst=t0, data=t0, op0=nl.add, operand0=0.5, \
             reduce_op=nl.maximum, reduce_res=t1, reduce_cmd=nisa.reduce_cmd.load_reduce, \
             reduce_init=2.0, reduce_res_negate=True)"
        ),
        "{source}"
    );
}
