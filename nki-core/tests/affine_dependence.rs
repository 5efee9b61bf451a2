//! `affine-range-dependence`: iterations of an `affine_range` that depend on each other are a
//! validation error naming both lines and the loop; the associative reductions the NKI docs
//! allow pass; what cannot be decided is a warning; and the simulator's iteration orders show
//! an order dependence as different bits.

use nki_core::ir::{Program, unroll};
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::sim::IterationOrder;
use nki_core::testing::order_difference;
use nki_core::validate::{validate, validate_with_warnings};
use nki_core::{NkiError, Target};

const ROWS: usize = 128;
const COLS: usize = 64;

fn program(body: impl FnOnce(&Hbm) -> Hbm) -> Program {
    let inputs = [InputSpec {
        name: "x".into(),
        shape: vec![ROWS, COLS],
        dtype: DType::F32,
    }];
    trace("k", Target::Trn2, &inputs, |h| vec![body(&h[0])]).unwrap()
}

fn input() -> Vec<u8> {
    (0..ROWS * COLS)
        .flat_map(|v| (v as f32 * 0.25).to_le_bytes())
        .collect()
}

/// The rule's error, its message and line.
fn dependence(p: &Program) -> (String, u32) {
    match validate(p).unwrap_err() {
        NkiError::Validation(v) => {
            assert_eq!(v.rule, "affine-range-dependence", "{v}");
            (v.to_string(), v.loc.line)
        }
        other => panic!("expected a validation error, got {other}"),
    }
}

/// Every iteration stores its rows of `x` to rows 0..32 of the output: two iterations write
/// the same elements.
fn same_rows(sequential: bool) -> (Program, [u32; 2]) {
    let mut lines = [0; 2];
    let p = program(|x| {
        let out = shared_hbm(&[32, COLS], DType::F32);
        lines[1] = line!() + 4;
        let body = |i: AffineExpr| {
            let t = sbuf([32, COLS], DType::F32);
            dma_copy(&t, x.rows(i * 32usize, 32));
            dma_copy(out.rows(0usize, 32), &t);
        };
        lines[0] = line!() + 2;
        if !sequential {
            affine_range(4, body);
        } else {
            sequential_range(4, body);
        }
        out
    });
    (p, lines)
}

#[test]
fn iterations_writing_one_region_are_an_error() {
    let (p, [loop_line, store]) = same_rows(false);
    let (msg, line) = dependence(&p);
    assert_eq!(line, store, "{msg}");
    assert!(
        msg.contains(&format!("affine_range at {}:{loop_line}", file!())),
        "{msg}"
    );
    assert!(
        msg.contains(&format!("dma_copy at {}:{store}", file!())),
        "{msg}"
    );
    assert!(
        msg.contains("two iterations write the same element"),
        "{msg}"
    );
    // The unrolled form (as the NKI frontend traces it) is the same error.
    let (msg, _) = dependence(&unroll(&p));
    assert!(msg.contains("iteration 0 writes tensor out"), "{msg}");
    // And the bits show it: the last iteration in the order wins.
    let x = input();
    let orders = [IterationOrder::Program, IterationOrder::Reversed];
    for q in [&p, &unroll(&p)] {
        let diff = order_difference(q, &[&x], orders).unwrap();
        assert!(diff.is_some_and(|d| d.contains("output 0 (out")));
    }
}

#[test]
fn sequential_range_is_not_checked() {
    let (p, _) = same_rows(true);
    assert_eq!(validate_with_warnings(&p).unwrap(), []);
}

#[test]
fn a_read_of_what_another_iteration_writes_names_both_lines() {
    let (mut write, mut read, mut at) = (0, 0, 0);
    let p = program(|x| {
        let out = shared_hbm(&[ROWS, COLS], DType::F32);
        let copy = shared_hbm(&[ROWS, COLS], DType::F32);
        at = line!() + 1;
        affine_range(4, |i| {
            let t = sbuf([32, COLS], DType::F32);
            dma_copy(&t, x.rows(i.clone() * 32usize, 32));
            write = line!() + 1;
            dma_copy(out.rows(i.clone() * 32usize, 32), &t);
            let u = sbuf([32, COLS], DType::F32);
            read = line!() + 1;
            dma_copy(&u, out.rows(0usize, 32));
            dma_copy(copy.rows(i * 32usize, 32), &u);
        });
        out
    });
    let (msg, _) = dependence(&p);
    for line in [at, write, read] {
        assert!(
            msg.contains(&format!("{}:{line}", file!())),
            "{line}: {msg}"
        );
    }
    assert!(
        msg.contains("one iteration reads what another writes"),
        "{msg}"
    );
}

#[test]
fn disjoint_iterations_pass_and_keep_their_bits_in_any_order() {
    let p = program(|x| {
        let out = shared_hbm(&[ROWS, COLS], DType::F32);
        // Column blocks: the rows of different iterations interleave in memory, their
        // elements do not.
        affine_range(4, |j| {
            let t = sbuf([ROWS, 16], DType::F32);
            dma_copy(&t, x.cols(j.clone() * 16usize, 16));
            tensor_scalar(&t, &t, BinOp::Multiply, 2.0);
            dma_copy(out.cols(j * 16usize, 16), &t);
        });
        out
    });
    assert_eq!(validate_with_warnings(&p).unwrap(), []);
    assert_eq!(validate_with_warnings(&unroll(&p)).unwrap(), []);
    let x = input();
    for order in [
        IterationOrder::Reversed,
        IterationOrder::Shuffled { seed: 3 },
    ] {
        let orders = [IterationOrder::Program, order];
        assert_eq!(order_difference(&p, &[&x], orders).unwrap(), None);
        assert_eq!(order_difference(&unroll(&p), &[&x], orders).unwrap(), None);
    }
}

#[test]
fn matmul_accumulation_into_psum_is_allowed() {
    let p = program(|x| {
        let out = shared_hbm(&[COLS, COLS], DType::F32);
        let acc = psum([COLS, COLS], DType::F32);
        let first = sbuf([32, COLS], DType::F32);
        dma_copy(&first, x.rows(0usize, 32));
        nc_matmul(&acc, &first, &first, false);
        affine_range(3, |k| {
            let t = sbuf([32, COLS], DType::F32);
            dma_copy(&t, x.rows(k * 32usize + 32usize, 32));
            nc_matmul(&acc, &t, &t, true);
        });
        let r = sbuf([COLS, COLS], DType::F32);
        tensor_copy(&r, &acc);
        dma_copy(&out, &r);
        out
    });
    assert_eq!(validate_with_warnings(&p).unwrap(), []);
    assert_eq!(validate_with_warnings(&unroll(&p)).unwrap(), []);
}

/// A running sum into an SBUF accumulator; with `peek`, every iteration also copies the
/// accumulator out, which reads what the others accumulate.
fn accumulator(peek: bool) -> Program {
    program(|x| {
        let out = shared_hbm(&[32, COLS], DType::F32);
        let acc = sbuf([32, COLS], DType::F32);
        memset(&acc, 0.0);
        affine_range(4, |i| {
            let t = sbuf([32, COLS], DType::F32);
            dma_copy(&t, x.rows(i * 32usize, 32));
            tensor_tensor(&acc, &acc, &t, BinOp::Maximum);
            if peek {
                let u = sbuf([32, COLS], DType::F32);
                tensor_copy(&u, &acc);
            }
        });
        dma_copy(&out, &acc);
        out
    })
}

#[test]
fn an_accumulator_the_loop_only_accumulates_into_is_allowed() {
    let p = accumulator(false);
    assert_eq!(validate_with_warnings(&p).unwrap(), []);
    assert_eq!(validate_with_warnings(&unroll(&p)).unwrap(), []);
    // max is exact: any order gives the same bits.
    let orders = [IterationOrder::Program, IterationOrder::Reversed];
    assert_eq!(order_difference(&p, &[&input()], orders).unwrap(), None);
    let (msg, _) = dependence(&accumulator(true));
    assert!(msg.contains("accumulates into it (tensor_tensor"), "{msg}");
    assert!(
        msg.contains("an accumulator may only be accumulated into"),
        "{msg}"
    );
}

#[test]
fn a_runtime_offset_is_a_warning() {
    let inputs = [
        InputSpec {
            name: "x".into(),
            shape: vec![ROWS, COLS],
            dtype: DType::F32,
        },
        InputSpec {
            name: "idx".into(),
            shape: vec![32, 1],
            dtype: DType::I32,
        },
    ];
    let mut scatter = 0;
    let p = trace("k", Target::Trn2, &inputs, |h| {
        let out = shared_hbm(&[ROWS, COLS], DType::F32);
        let idx = sbuf([32, 1], DType::I32);
        dma_copy(&idx, &h[1]);
        affine_range(4, |i| {
            let t = sbuf([32, COLS], DType::F32);
            dma_copy(&t, h[0].rows(i * 32usize, 32));
            scatter = line!() + 1;
            dma_copy(out.rows(0usize, 32).vector_offset(&idx, COLS as i64), &t);
        });
        vec![out]
    })
    .unwrap();
    let warnings = validate_with_warnings(&p).unwrap();
    assert_eq!(warnings.len(), 1, "{warnings:?}");
    let w = &warnings[0];
    assert_eq!((w.rule, w.loc.line), ("affine-range-dependence", scatter));
    assert!(w.message.contains("runtime offset"), "{w}");
}

#[test]
fn every_iteration_overwriting_a_psum_tile_is_an_error() {
    let p = program(|x| {
        let out = shared_hbm(&[COLS, COLS], DType::F32);
        let acc = psum([COLS, COLS], DType::F32);
        affine_range(4, |k| {
            let t = sbuf([32, COLS], DType::F32);
            dma_copy(&t, x.rows(k * 32usize, 32));
            nc_matmul(&acc, &t, &t, false);
        });
        let r = sbuf([COLS, COLS], DType::F32);
        tensor_copy(&r, &acc);
        dma_copy(&out, &r);
        out
    });
    let (msg, _) = dependence(&p);
    assert!(
        msg.contains("overwrites (nc_matmul, accumulate off)"),
        "{msg}"
    );
}
