//! DMAs between whole tile rows and HBM rows that follow one another move as one contiguous
//! copy (`sim/dma.rs`, `one_run`); the others row by row. Both must put the same elements in
//! the same places, convert dtypes the same way, and leave what they do not cover alone.

mod common;

use common::{input, run, values};
use nki_core::dtype::DType;
use nki_core::ir::Program;
use nki_core::lang::trace;
use nki_core::prelude::*;

/// `x [P, F]` loaded whole into a tile of `tile_dtype` (one run), doubled, and stored three
/// ways: whole into `out [P, F]` (one run), into columns `1..F + 1` of `wide [P, F + 2]` (rows
/// that do not follow one another), and rows `1..P` of the tile into rows `0..P − 1` of
/// `shifted [P, F]` (a partial tile: one run from partition 1).
fn program(p: usize, f: usize, x_dtype: DType, tile_dtype: DType) -> Program {
    trace("runs", Target::Trn2, &input([p, f], x_dtype), |h| {
        let x = &h[0];
        let out = shared_hbm(&[p, f], x_dtype);
        let wide = shared_hbm(&[p, f + 2], x_dtype);
        let shifted = shared_hbm(&[p, f], x_dtype);
        let t = sbuf([p, f], tile_dtype);
        dma_copy(&t, x);
        tensor_scalar(&t, &t, BinOp::Multiply, 2.0);
        dma_copy(&out, &t);
        dma_copy(wide.cols(1, f), &t);
        dma_copy(shifted.rows(0, p - 1), t.region().slice(1, p - 1, 0, f));
        vec![out, wide, shifted]
    })
    .unwrap()
}

fn check(p: usize, f: usize, x_dtype: DType, tile_dtype: DType) {
    let x: Vec<f32> = values(p * f, 7, 3.0)
        .into_iter()
        .map(|v| x_dtype.round(v))
        .collect();
    let got = run(&program(p, f, x_dtype, tile_dtype), &[&x]);
    // The tile holds x rounded to its dtype, doubled (exact), and stores round to x's dtype.
    let want: Vec<f32> = x
        .iter()
        .map(|&v| x_dtype.round(tile_dtype.round(v) * 2.0))
        .collect();
    let case = format!("[{p}, {f}] {x_dtype} into {tile_dtype}");
    assert_eq!(got[0], want, "{case}: whole store");
    for r in 0..p {
        let row = &got[1][r * (f + 2)..(r + 1) * (f + 2)];
        assert_eq!(row[0], 0.0, "{case}: wide row {r} left of the columns");
        assert_eq!(
            &row[1..=f],
            &want[r * f..(r + 1) * f],
            "{case}: wide row {r}"
        );
        assert_eq!(row[f + 1], 0.0, "{case}: wide row {r} right of the columns");
    }
    assert_eq!(
        &got[2][..(p - 1) * f],
        &want[f..],
        "{case}: rows 1.. into rows 0.."
    );
    assert!(
        got[2][(p - 1) * f..].iter().all(|&v| v == 0.0),
        "{case}: the last row is not written"
    );
}

#[test]
fn contiguous_and_row_by_row_dmas_place_and_convert_the_same_elements() {
    for (p, f) in [(2, 1), (3, 5), (128, 64), (7, 33)] {
        for (x_dtype, tile_dtype) in [
            (DType::F32, DType::F32),
            (DType::BF16, DType::BF16),
            (DType::F32, DType::BF16),
            (DType::BF16, DType::F32),
        ] {
            check(p, f, x_dtype, tile_dtype);
        }
    }
}
