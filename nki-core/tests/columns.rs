//! Narrow whole-width tiles (a `[rows, 1]` statistic, a few columns): the simulator runs an
//! elementwise instruction whose rows follow one another in storage as one row
//! (`sim::rows::as_one_row`). Each result here is checked element by element against the
//! instruction's arithmetic: in place and out of place, with immediate and per-partition
//! operands (which keep the row loop), from a tile that reads a wider input in place (whose
//! rows do not follow one another) and from a region shifted within its own tile.

use nki_core::ir::{ActFn, BinOp};
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::sim::{SimOptions, simulate_to_vecs};

const ROWS: usize = 100;
const COLS: usize = 3;

fn input(name: &str, shape: &[usize]) -> InputSpec {
    InputSpec {
        name: name.into(),
        shape: shape.to_vec(),
        dtype: DType::F32,
    }
}

fn bytes(v: &[f32]) -> Vec<u8> {
    v.iter().flat_map(|x| x.to_le_bytes()).collect()
}

fn floats(b: &[u8]) -> Vec<f32> {
    b.chunks(4)
        .map(|c| f32::from_le_bytes(c.try_into().unwrap()))
        .collect()
}

#[test]
fn narrow_instructions_compute_each_element() {
    // x: [ROWS, COLS]; w: [ROWS, 2·COLS], of which the tile reads the first COLS columns in place.
    let x: Vec<f32> = (0..ROWS * COLS)
        .map(|i| (i as f32 * 0.37).sin() * 3.0)
        .collect();
    let w: Vec<f32> = (0..ROWS * 2 * COLS)
        .map(|i| (i as f32 * 0.11).cos())
        .collect();
    let p = trace(
        "columns",
        Target::Trn2,
        &[input("x", &[ROWS, COLS]), input("w", &[ROWS, 2 * COLS])],
        |h| {
            let outs: Vec<Hbm> = (0..6)
                .map(|_| shared_hbm(&[ROWS, COLS], DType::F32))
                .collect();
            let xt = sbuf([ROWS, COLS], DType::F32);
            dma_copy(&xt, &h[0]);
            let wt = sbuf([ROWS, COLS], DType::F32);
            dma_copy(&wt, h[1].reshape(&[ROWS, 2 * COLS]).cols(0, COLS));
            // 0: out of place, two inputs (one read in place with a row stride of 2·COLS).
            let a = sbuf([ROWS, COLS], DType::F32);
            tensor_tensor(&a, &xt, &wt, BinOp::Multiply);
            // 1: in place with immediates, then 2: a copy of it.
            tensor_scalar(&a, &a, BinOp::Add, 0.5).then(BinOp::Multiply, 2.0);
            let b = sbuf([ROWS, COLS], DType::F32);
            tensor_copy(&b, &a);
            // 3: an activation with an immediate scale, in place.
            let c = sbuf([ROWS, COLS], DType::F32);
            tensor_copy(&c, &xt);
            activation(&c, ActFn::Exp, &c, None, 0.25);
            // 4: a per-partition operand (column 0 of x), which keeps the row loop.
            let d = sbuf([ROWS, COLS], DType::F32);
            tensor_scalar(&d, &xt, BinOp::Subtract, xt.cols(0, 1));
            // 5: rows 1.. of a tile written from its rows ..ROWS-1 (shifted in its own tile).
            let e = sbuf([ROWS, COLS], DType::F32);
            tensor_copy(&e, &xt);
            let (low, high) = (
                e.region().slice(0, ROWS - 1, 0, COLS),
                e.region().slice(1, ROWS - 1, 0, COLS),
            );
            tensor_tensor(
                high,
                low,
                xt.region().slice(1, ROWS - 1, 0, COLS),
                BinOp::Add,
            );
            for (o, t) in outs.iter().zip([&a, &b, &c, &d, &e]) {
                dma_copy(o, t);
            }
            outs
        },
    )
    .unwrap();
    let out = simulate_to_vecs(&p, &[&bytes(&x), &bytes(&w)], SimOptions::default()).unwrap();
    let wv = |r: usize, c: usize| w[r * 2 * COLS + c];
    let a: Vec<f32> = (0..ROWS * COLS)
        .map(|i| ((x[i] * wv(i / COLS, i % COLS)) + 0.5) * 2.0)
        .collect();
    assert_eq!(
        floats(&out[0]),
        a,
        "tensor_tensor, then tensor_scalar in place"
    );
    assert_eq!(floats(&out[1]), a, "tensor_copy");
    let c: Vec<f32> = x.iter().map(|v| ActFn::Exp.apply(v * 0.25)).collect();
    assert_eq!(floats(&out[2]), c, "activation in place");
    let d: Vec<f32> = (0..ROWS * COLS)
        .map(|i| x[i] - x[i / COLS * COLS])
        .collect();
    assert_eq!(floats(&out[3]), d, "a per-partition operand");
    // Row r ≥ 1 of e: the row above it plus x's row r, rows in order, each reading the row above as
    // the instruction has already written it (the row loop's order; one row would read every
    // old value first, so the shifted region must keep the row loop).
    let mut e = x.clone();
    for r in 1..ROWS {
        for col in 0..COLS {
            e[r * COLS + col] = e[(r - 1) * COLS + col] + x[r * COLS + col];
        }
    }
    assert_eq!(floats(&out[4]), e, "a shifted region in its own tile");
}
