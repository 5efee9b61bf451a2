//! `bn_stats` and `bn_aggr`: per-partition mean and variance on the vector engine, checked
//! against f64 references in the simulator, with their trace-time operand errors, their cost
//! and their generated NKI.

use nki_core::codegen::emit_nki;
use nki_core::cost::{Engine, estimate};
use nki_core::ir::Program;
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;
use nki_core::sim::{HostTensor, HostTensorMut, SimOptions, simulate};

/// Mean and variance of each row of `x[rows, cols]` through `bn_stats` on 512-column groups and
/// one `bn_aggr`: output `[rows, 2]` fp32.
fn moments_program(rows: usize, cols: usize) -> Program {
    let input = [InputSpec {
        name: "x".into(),
        shape: vec![rows, cols],
        dtype: DType::F32,
    }];
    trace("moments", Target::Trn2, &input, |ins| {
        let x = &ins[0];
        let out = shared_hbm(&[rows, 2], DType::F32);
        let xt = sbuf([rows, cols], DType::F32);
        dma_copy(&xt, x);
        let groups = cols.div_ceil(BN_STATS_FMAX);
        let stats = sbuf([rows, 6 * groups], DType::F32);
        for g in 0..groups {
            let c0 = g * BN_STATS_FMAX;
            bn_stats(
                stats.cols(6 * g, 6),
                xt.cols(c0, BN_STATS_FMAX.min(cols - c0)),
            );
        }
        let moments = sbuf([rows, 2], DType::F32);
        bn_aggr(&moments, &stats);
        dma_copy(&out, &moments);
        vec![out]
    })
    .unwrap()
}

fn run(p: &Program, x: &[f32], rows: usize) -> Vec<f32> {
    let bytes: Vec<u8> = x.iter().flat_map(|v| v.to_le_bytes()).collect();
    let shape = p.hbm[p.outputs[0].0 as usize].shape.clone();
    let in_shape = p.inputs().next().unwrap().1.shape.clone();
    let mut out = vec![0u8; rows * 2 * 4];
    simulate(
        p,
        &[HostTensor {
            dtype: DType::F32,
            shape: &in_shape,
            data: &bytes,
        }],
        &mut [HostTensorMut {
            dtype: DType::F32,
            shape: &shape,
            data: &mut out,
        }],
        SimOptions::default(),
    )
    .unwrap();
    out.chunks_exact(4)
        .map(|b| f32::from_le_bytes([b[0], b[1], b[2], b[3]]))
        .collect()
}

#[test]
fn mean_and_biased_variance_match_f64_across_groups_and_offsets() {
    for (rows, cols) in [(3, 1), (4, 5), (128, 512), (7, 1300), (2, 4096)] {
        let p = moments_program(rows, cols);
        // A large offset per row with a small spread: the case two-pass statistics exist for.
        let x: Vec<f32> = (0..rows * cols)
            .map(|i| {
                let (r, c) = (i / cols, i % cols);
                1000.0 * r as f32 + ((c * 37 % 101) as f32 - 50.0) * 0.01
            })
            .collect();
        let got = run(&p, &x, rows);
        for r in 0..rows {
            let row: Vec<f64> = x[r * cols..(r + 1) * cols]
                .iter()
                .map(|&v| v as f64)
                .collect();
            let mean = row.iter().sum::<f64>() / cols as f64;
            let var = row.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / cols as f64;
            let (m, v) = (got[2 * r] as f64, got[2 * r + 1] as f64);
            assert!(
                (m - mean).abs() <= 1e-6 * mean.abs().max(1.0),
                "{rows}x{cols} row {r}: mean {m} vs {mean}"
            );
            // fp32 arithmetic: the mean carries a few ulps of its magnitude, which the squared
            // deviations add to the variance.
            let mean_ulps = 4.0 * f32::EPSILON as f64 * mean.abs();
            assert!(
                (v - var).abs() <= 1e-4 * var + mean_ulps * mean_ulps + 1e-9,
                "{rows}x{cols} row {r}: var {v} vs {var}"
            );
        }
    }
}

#[test]
fn nan_and_inf_poison_their_row_only() {
    let (rows, cols) = (3, 600);
    let mut x: Vec<f32> = (0..rows * cols).map(|i| (i % 13) as f32).collect();
    x[5] = f32::NAN;
    x[cols + 550] = f32::INFINITY;
    let got = run(&moments_program(rows, cols), &x, rows);
    assert!(got[0].is_nan() && got[1].is_nan(), "{:?}", &got[..2]);
    assert!(
        got[3].is_nan(),
        "an infinite element has no finite variance: {}",
        got[3]
    );
    assert!(got[4].is_finite() && got[5].is_finite(), "{:?}", &got[4..]);
}

fn trace_error(body: impl FnOnce()) -> String {
    trace("k", Target::Trn2, &[], |_| {
        body();
        vec![]
    })
    .unwrap_err()
    .to_string()
}

#[test]
fn operand_shapes_are_checked_when_traced() {
    let e = trace_error(|| {
        let (x, s) = (sbuf([4, 600], DType::F32), sbuf([4, 6], DType::F32));
        bn_stats(&s, &x);
    });
    assert!(
        e.contains("bn_stats: data has 600 elements per partition") && e.contains("at most 512"),
        "{e}"
    );
    let e = trace_error(|| {
        let (x, s) = (sbuf([4, 64], DType::F32), sbuf([4, 3], DType::F32));
        bn_stats(&s, &x);
    });
    assert!(e.contains("bn_stats: dst must be (4, 6)"), "{e}");
    let e = trace_error(|| {
        let (s, m) = (sbuf([4, 7], DType::F32), sbuf([4, 2], DType::F32));
        bn_aggr(&m, &s);
    });
    assert!(
        e.contains("bn_aggr: data must hold") && e.contains("got 7"),
        "{e}"
    );
    let e = trace_error(|| {
        let (s, m) = (sbuf([4, 6], DType::F32), sbuf([4, 1], DType::F32));
        bn_aggr(&m, &s);
    });
    assert!(e.contains("bn_aggr: dst must be (4, 2)"), "{e}");
}

#[test]
fn cost_and_codegen() {
    let p = moments_program(128, 1024);
    let report = estimate(&p);
    let stats: Vec<_> = report
        .slices
        .iter()
        .filter(|s| s.name == "bn_stats")
        .collect();
    assert_eq!(stats.len(), 2);
    // One fp32 input of 512 elements: max(64, 512 / 2) cycles at 0.96 GHz on Trn2.
    for s in &stats {
        assert_eq!(s.engine, Engine::Vector);
        let want = 256.0 / 0.96;
        assert!(((s.end_ns - s.start_ns) - want).abs() < 1e-6, "{s:?}");
    }
    let aggr: Vec<_> = report
        .slices
        .iter()
        .filter(|s| s.name == "bn_aggr")
        .collect();
    // max(64, 13 · 12 / 3) cycles, plus 100: it reads what bn_stats, the previous vector
    // instruction, wrote.
    assert_eq!(aggr.len(), 1);
    assert!(((aggr[0].end_ns - aggr[0].start_ns) - (64.0 + 100.0) / 0.96).abs() < 1e-6);
    let src = emit_nki(&p);
    assert!(
        src.contains("nisa.bn_stats(dst=t1[0:128, 6:12], data=t0[0:128, 512:1024])"),
        "{src}"
    );
    assert!(src.contains("nisa.bn_aggr(dst=t2, data=t1)"), "{src}");
}
