//! The cross-partition instructions. `tensor_partition_reduce`: `data` `(P, F)` reduced over its
//! partitions into the one-partition `dst`, in fp32 in partition order and rounded once; in
//! place, among partition-local instructions the simulator would run band by band; its trace
//! checks, the GpSimd PSUM rule, cost and codegen.

mod common;

use common::{input, run, values};
use nki_core::NkiError;
use nki_core::codegen::emit_nki;
use nki_core::cost::{Engine, estimate};
use nki_core::ir::Program;
use nki_core::lang::trace;
use nki_core::prelude::*;
use nki_core::validate::validate;

fn bits(v: &[f32]) -> Vec<u32> {
    v.iter().map(|f| f.to_bits()).collect()
}

/// `x` `[rows, cols]` (in `data`) scaled by 2 (`tensor_scalar`), reduced over partitions with
/// `op` into a `(1, cols)` `dst` of dtype `out`, then plus 1 (`tensor_scalar`), as output 0.
/// With `in_place` the result goes to partition 0 of the scaled tile instead.
fn reduce_program(
    (rows, cols): (usize, usize),
    (data, out): (DType, DType),
    op: BinOp,
    in_place: bool,
) -> Program {
    trace("k", Target::Trn2, &input([rows, cols], data), |h| {
        let result = shared_hbm(&[1, cols], out);
        let x = sbuf([rows, cols], data);
        dma_copy(&x, &h[0]);
        let scaled = sbuf([rows, cols], data);
        tensor_scalar(&scaled, &x, BinOp::Multiply, 2.0);
        let dst = if in_place {
            scaled.rows(1)
        } else {
            sbuf([1, cols], out).region()
        };
        tensor_partition_reduce(&dst, op, &scaled);
        let y = sbuf([1, cols], out);
        tensor_scalar(&y, &dst, BinOp::Add, 1.0);
        dma_copy(&result, &y);
        vec![result]
    })
    .unwrap()
}

/// The reference: `2·x` rounded to `data`, reduced in fp32 from partition 0, rounded to `out`,
/// plus 1 rounded to `out`.
fn reference(
    (rows, cols): (usize, usize),
    x: &[f32],
    (data, out): (DType, DType),
    op: BinOp,
) -> Vec<f32> {
    (0..cols)
        .map(|f| {
            let scaled = |r: usize| data.round(x[r * cols + f] * 2.0);
            let acc = (1..rows).fold(scaled(0), |acc, r| op.apply(acc, scaled(r)));
            out.round(out.round(acc) + 1.0)
        })
        .collect()
}

#[test]
fn reduces_over_partitions_in_fp32_and_rounds_once() {
    for (rows, cols) in [(1, 5), (7, 33), (128, 512)] {
        let x = values(rows * cols, 5, 6.0);
        for (data, out) in [
            (DType::F32, DType::F32),
            (DType::BF16, DType::BF16),
            (DType::BF16, DType::F32),
        ] {
            let x: Vec<f32> = x.iter().map(|v| data.round(*v)).collect();
            for op in [BinOp::Add, BinOp::Maximum] {
                for in_place in [false, true] {
                    if in_place && data != out {
                        continue;
                    }
                    let p = reduce_program((rows, cols), (data, out), op, in_place);
                    validate(&p).unwrap();
                    let got = run(&p, &[&x]);
                    let want = reference((rows, cols), &x, (data, out), op);
                    assert_eq!(
                        bits(&got[0]),
                        bits(&want),
                        "{rows}x{cols} {data:?}→{out:?} {op:?} in place {in_place}"
                    );
                }
            }
        }
    }
}

#[test]
fn a_bf16_sum_is_not_rounded_per_partition() {
    // 1 + 64 · 2^-9 in fp32 is 1.125; rounding the running sum to bf16 (step 2^-7 at 1.0) after
    // each partition would keep it at 1.0.
    let rows = 65;
    let mut x = vec![2f32.powi(-10); rows];
    x[0] = 0.5;
    let p = reduce_program((rows, 1), (DType::BF16, DType::BF16), BinOp::Add, false);
    let got = run(&p, &[&x]);
    assert_eq!(got[0], vec![1.125 + 1.0]);
}

#[test]
fn operands_are_checked_when_traced_and_psum_when_validated() {
    let attempt = |op: BinOp, dst_shape: [usize; 2]| {
        trace("k", Target::Trn2, &[], |_| {
            let out = shared_hbm(&dst_shape, DType::F32);
            let data = sbuf([8, 16], DType::F32);
            memset(&data, 1.0);
            let dst = sbuf(dst_shape, DType::F32);
            tensor_partition_reduce(&dst, op, &data);
            dma_copy(&out, &dst);
            vec![out]
        })
        .map(|_| ())
        .unwrap_err()
        .to_string()
    };
    let e = attempt(BinOp::Subtract, [1, 16]);
    assert!(
        e.contains("tensor_partition_reduce: op must be add or maximum"),
        "{e}"
    );
    let e = attempt(BinOp::Add, [8, 16]);
    assert!(
        e.contains(
            "tensor_partition_reduce: dst must be one partition of data's free size, shape \
             [1, 16], got shape [8, 16]"
        ),
        "{e}"
    );
    let in_psum = trace("k", Target::Trn2, &[], |_| {
        let out = shared_hbm(&[1, 16], DType::F32);
        let data = psum([8, 16], DType::F32);
        memset(&data, 1.0);
        let dst = sbuf([1, 16], DType::F32);
        tensor_partition_reduce(&dst, BinOp::Add, &data);
        dma_copy(&out, &dst);
        vec![out]
    })
    .unwrap();
    match validate(&in_psum).unwrap_err() {
        NkiError::Validation(v) => {
            assert_eq!(v.rule, "gpsimd-psum");
            assert!(
                v.message.contains("tensor_partition_reduce runs on GpSimd"),
                "{}",
                v.message
            );
        }
        e => panic!("{e}"),
    }
}

#[test]
fn runs_on_gpsimd_and_emits_its_nki_call() {
    let p = reduce_program((128, 600), (DType::F32, DType::F32), BinOp::Maximum, false);
    let report = estimate(&p);
    let slice = report
        .slices
        .iter()
        .find(|s| s.name == "tensor_partition_reduce")
        .unwrap();
    assert_eq!(slice.engine, Engine::GpSimd);
    let source = emit_nki(&p);
    assert!(
        source.contains("nisa.tensor_partition_reduce(dst=t2, op=nl.maximum, data=t1)"),
        "{source}"
    );
}
