//! The cross-partition instructions. `tensor_partition_reduce`: `data` `(P, F)` reduced over its
//! partitions into the one-partition `dst`, in fp32 in partition order and rounded once; in
//! place, among partition-local instructions the simulator would run band by band; its trace
//! checks, the GpSimd PSUM rule, cost and codegen. `nc_stream_shuffle`: partitions moved by a
//! 32-entry mask in every quadrant (255 keeps a partition), between regions of different starts
//! and sizes and in place, against a loop; its trace checks, the start-partition rule, cost and
//! codegen.

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
        e.contains("tensor_partition_reduce: op must be add, maximum, bitwise_or or bitwise_and"),
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

/// `nc_stream_shuffle` of `x` `[rows, cols]` (in `dtype`), its partitions `src_p0..` into a
/// `dst` of `dst_rows` partitions at `dst_p0` of a tile first set to −1 (output 0, the whole
/// `[128, cols]` tile); with `in_place` the shuffle writes over `x`'s tile itself.
fn shuffle_program(
    (rows, cols): (usize, usize),
    dtype: DType,
    (src_p0, dst_p0, dst_rows): (usize, usize, usize),
    mask: &[u8],
    in_place: bool,
) -> Program {
    let mask = mask.to_vec();
    trace("k", Target::Trn2, &input([rows, cols], dtype), move |h| {
        let result = shared_hbm(&[128, cols], dtype);
        let x = sbuf([128, cols], dtype);
        memset(&x, -1.0);
        dma_copy(x.region().slice(0, rows, 0, cols), &h[0]);
        let src = x.region().slice(src_p0, rows - src_p0, 0, cols);
        let out = if in_place {
            x.clone()
        } else {
            let t = sbuf([128, cols], dtype);
            memset(&t, -1.0);
            t
        };
        nc_stream_shuffle(out.region().slice(dst_p0, dst_rows, 0, cols), &src, &mask);
        dma_copy(&result, &out);
        vec![result]
    })
    .unwrap()
}

/// The reference: what the docs describe, on a `[128, cols]` tile of −1s holding `x` in its
/// first `rows` partitions.
fn shuffled(
    x: &[f32],
    (rows, cols): (usize, usize),
    (src_p0, dst_p0, dst_rows): (usize, usize, usize),
    mask: &[u8],
    in_place: bool,
) -> Vec<f32> {
    let mut tile = vec![-1.0; 128 * cols];
    tile[..rows * cols].copy_from_slice(x);
    let src = tile.clone();
    let mut out = if in_place {
        tile
    } else {
        vec![-1.0; 128 * cols]
    };
    for p in 0..dst_rows {
        let m = mask[p % 32];
        if m == SHUFFLE_KEEP {
            continue;
        }
        let from = src_p0 + p / 32 * 32 + usize::from(m);
        let to = dst_p0 + p;
        out[to * cols..(to + 1) * cols].copy_from_slice(&src[from * cols..(from + 1) * cols]);
    }
    out
}

#[test]
fn stream_shuffle_moves_partitions_within_each_quadrant() {
    let reversed: Vec<u8> = (0..32).rev().collect();
    let mut sparse: Vec<u8> = (0..32).map(|i| (i * 7 % 32) as u8).collect();
    sparse[3] = SHUFFLE_KEEP;
    sparse[30] = SHUFFLE_KEEP;
    let broadcast = vec![5u8; 32];
    // (x's shape, (src start, dst start, dst partitions), mask, in place).
    type Case<'m> = ((usize, usize), (usize, usize, usize), &'m [u8], bool);
    let cases: &[Case<'_>] = &[
        ((128, 9), (0, 0, 128), &reversed, false),
        ((128, 9), (0, 0, 128), &sparse, true),
        ((64, 3), (0, 64, 64), &sparse, false),
        ((64, 3), (32, 96, 32), &broadcast, true),
        ((20, 4), (0, 32, 20), &broadcast, false),
    ];
    for &((rows, cols), at, mask, in_place) in cases {
        for dtype in [DType::F32, DType::BF16] {
            let x: Vec<f32> = values(rows * cols, 9, 100.0)
                .iter()
                .map(|v| dtype.round(*v))
                .collect();
            let p = shuffle_program((rows, cols), dtype, at, mask, in_place);
            validate(&p).unwrap();
            let got = run(&p, &[&x]);
            let want = shuffled(&x, (rows, cols), at, mask, in_place);
            assert_eq!(bits(&got[0]), bits(&want), "{rows}x{cols} {at:?} {mask:?}");
        }
    }
}

#[test]
fn stream_shuffle_is_checked_when_traced_and_its_start_partitions_when_validated() {
    let attempt = |mask: &[u8], src: (usize, usize), dst: (usize, usize), dtype: DType| {
        let mask = mask.to_vec();
        trace("k", Target::Trn2, &[], move |_| {
            let out = shared_hbm(&[128, 8], DType::F32);
            let x = sbuf([128, 8], DType::F32);
            memset(&x, 0.0);
            let y = sbuf([128, 8], dtype);
            memset(&y, 0.0);
            nc_stream_shuffle(
                y.region().slice(0, dst.0, 0, dst.1),
                x.region().slice(0, src.0, 0, src.1),
                &mask,
            );
            dma_copy(&out, &x);
            vec![out]
        })
        .map(|_| ())
        .unwrap_err()
        .to_string()
    };
    let ident: Vec<u8> = (0..32).collect();
    let e = attempt(&ident[..31], (32, 8), (32, 8), DType::F32);
    assert!(
        e.contains("nc_stream_shuffle: shuffle_mask must have 32 entries, got 31"),
        "{e}"
    );
    let mut bad = ident.clone();
    bad[4] = 40;
    let e = attempt(&bad, (32, 8), (32, 8), DType::F32);
    assert!(
        e.contains("nc_stream_shuffle: shuffle_mask[4] is 40"),
        "{e}"
    );
    let e = attempt(&ident, (32, 8), (32, 4), DType::F32);
    assert!(
        e.contains("nc_stream_shuffle: dst has 4 elements per partition but src has 8"),
        "{e}"
    );
    let e = attempt(&ident, (32, 8), (32, 8), DType::BF16);
    assert!(
        e.contains("nc_stream_shuffle: src is f32 but dst is bf16; they must share one dtype"),
        "{e}"
    );
    let e = attempt(&ident, (16, 8), (32, 8), DType::F32);
    assert!(
        e.contains(
            "nc_stream_shuffle: dst partition 16 takes src partition 16 (shuffle_mask[16] is \
             16) but src has 16 partitions"
        ),
        "{e}"
    );
    // 96 source partitions from 32: 96 active partitions start at 0.
    let p = shuffle_program((128, 4), DType::F32, (32, 0, 64), &ident, false);
    match validate(&p).unwrap_err() {
        NkiError::Validation(v) => {
            assert_eq!(v.rule, "stream-shuffle-start");
            assert!(
                v.message.contains(
                    "nc_stream_shuffle: src t0 starts at partition 32; with 96 active \
                     partitions the start partitions must be multiples of 128"
                ),
                "{}",
                v.message
            );
        }
        e => panic!("{e}"),
    }
}

#[test]
fn stream_shuffle_runs_on_the_vector_engine_and_emits_its_nki_call() {
    let mask: Vec<u8> = (0..32).map(|i| if i == 0 { 255 } else { 31 - i }).collect();
    let p = shuffle_program((32, 16), DType::F32, (0, 0, 32), &mask, false);
    let report = estimate(&p);
    let slice = report
        .slices
        .iter()
        .find(|s| s.name == "nc_stream_shuffle")
        .unwrap();
    assert_eq!(slice.engine, Engine::Vector);
    let source = emit_nki(&p);
    let want: Vec<String> = mask.iter().map(u8::to_string).collect();
    let call = format!(
        "nisa.nc_stream_shuffle(dst=t1[0:32, 0:16], src=t0[0:32, 0:16], shuffle_mask=[{}])",
        want.join(", ")
    );
    assert!(source.contains(&call), "{source}");
}
