//! Multi-dimensional tiles in the Rust tile language: `sbuf([P, A, B], dtype)` keeps its free
//! dims, `Tile::at(&[i])` selects the run of free elements leading indices name, and a bad index
//! is a trace error at the kernel line.

mod common;

use common::{input, run};
use nki_core::NkiError;
use nki_core::ir::Program;
use nki_core::lang::trace;
use nki_core::prelude::*;

/// `x` `[A, B]` loaded row by row into one `[1, A, B]` tile, row `i` scaled by `i + 1`, and
/// stored back.
fn stacked(a: usize, b: usize) -> Result<Program, NkiError> {
    trace("stacked", Target::Trn2, &input([a, b], DType::F32), |h| {
        let x = &h[0];
        let out = shared_hbm(&[a, b], DType::F32);
        let t = sbuf([1, a, b], DType::F32);
        assert_eq!(t.dims(), [1, a, b]);
        assert_eq!(t.shape(), [1, a * b]);
        for i in 0..a {
            dma_copy(t.at(&[i]), x.rows(i, 1));
            tensor_scalar(t.at(&[i]), t.at(&[i]), BinOp::Multiply, (i + 1) as f32);
            dma_copy(out.rows(i, 1), t.at(&[i]));
        }
        vec![out]
    })
}

#[test]
fn a_three_dimensional_tile_is_indexed_by_its_leading_free_dims() {
    let (a, b) = (3, 5);
    let x: Vec<f32> = (0..a * b).map(|v| v as f32).collect();
    let got = run(&stacked(a, b).unwrap(), &[&x]).remove(0);
    let want: Vec<f32> = x
        .iter()
        .enumerate()
        .map(|(k, v)| v * (k / b + 1) as f32)
        .collect();
    assert_eq!(got, want);
}

#[test]
fn a_region_of_a_multi_dimensional_tile_round_trips_through_codegen_as_its_free_run() {
    let src = nki_core::codegen::emit_nki(&stacked(3, 5).unwrap());
    assert!(
        src.contains("nl.ndarray((1, 15), dtype=nl.float32, buffer=nl.sbuf)"),
        "{src}"
    );
    assert!(src.contains("t0[0:1, 5:10]"), "{src}");
}

#[test]
fn indices_past_a_dim_or_too_many_are_trace_errors_at_the_caller() {
    let line = line!() + 4;
    let err = trace("bad", Target::Trn2, &input([2, 2], DType::F32), |_| {
        let out = shared_hbm(&[2, 2], DType::F32);
        let t = sbuf([2, 3, 4], DType::F32);
        memset(t.at(&[3]), 0.0);
        vec![out]
    })
    .unwrap_err();
    let text = err.to_string();
    assert!(
        text.contains("index 3 is outside free dim 1 (size 3) of tile t0 [2, 3, 4]"),
        "{text}"
    );
    assert!(text.contains(&format!("tiles.rs:{line}")), "{text}");
    let err = trace("bad", Target::Trn2, &input([2, 2], DType::F32), |_| {
        let out = shared_hbm(&[2, 2], DType::F32);
        memset(sbuf([2, 3], DType::F32).at(&[0, 1]), 0.0);
        vec![out]
    })
    .unwrap_err();
    assert!(
        err.to_string()
            .contains("2 indices for the 1 free dims of tile t0 [2, 3]"),
        "{err}"
    );
}
