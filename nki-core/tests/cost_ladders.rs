//! Ranking ladders: kernels written here that differ in one thing only, each asserting the
//! direction the NKI documentation predicts for it (docs/cost-model.md cites the sources).
//!
//! - transfer size: the same bytes in fewer, larger DMA transfers are faster, up to ~4 KiB per
//!   partition (the DMA overview's throughput curve);
//! - partitions per transfer: the same bytes over 128 partitions beat 32 (one DMA engine per 8);
//! - instruction length: the same elementwise work in longer instructions is faster until an
//!   instruction passes `MIN_II` (the per-instruction static overhead);
//! - stationary reuse: consecutive matmuls sharing a stationary operand load it once;
//! - engine balance: the same work split between the vector and scalar engines beats it all on
//!   one engine;
//! - access stride: the same elementwise work reading its operand with a most-minor stride of
//!   16 bytes or less beats a wider stride (SBUF's read interface at half bandwidth).

use nki_core::cost::{CostReport, Engine, estimate};
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;

fn cost(
    target: Target,
    inputs: &[(&str, &[usize], DType)],
    body: impl FnOnce(&[Hbm]) -> Vec<Hbm>,
) -> CostReport {
    let inputs: Vec<InputSpec> = inputs
        .iter()
        .map(|(n, s, d)| InputSpec {
            name: n.to_string(),
            shape: s.to_vec(),
            dtype: *d,
        })
        .collect();
    estimate(&trace("ladder", target, &inputs, body).expect("the ladder kernel traces"))
}

fn busy(r: &CostReport, engine: Engine) -> f64 {
    r.engines
        .iter()
        .find(|e| e.engine == engine)
        .map_or(0.0, |e| e.busy_ns)
}

/// Asserts `times` strictly decrease, naming the rungs.
fn strictly_faster(what: &str, rungs: &[(String, f64)]) {
    for w in rungs.windows(2) {
        assert!(
            w[1].1 < w[0].1,
            "{what}: {} ({:.0} ns) is not faster than {} ({:.0} ns)",
            w[1].0,
            w[1].1,
            w[0].0,
            w[0].1
        );
    }
}

/// Loads `x[128, cols]` bf16 in `[128, f]` blocks into one SBUF tile and stores it whole: only
/// the loads' size changes between rungs.
fn blocked_load(target: Target, cols: usize, f: usize) -> CostReport {
    cost(target, &[("x", &[128, cols], DType::BF16)], |h| {
        let out = shared_hbm(&[128, cols], DType::BF16);
        let t = sbuf([128, cols], DType::BF16);
        for c in 0..cols / f {
            dma_copy(t.cols(c * f, f), h[0].cols(c * f, f));
        }
        dma_copy(&out, &t);
        vec![out]
    })
}

#[test]
fn fewer_larger_transfers_are_faster_up_to_a_few_kib_per_partition() {
    for target in Target::ALL {
        // 2 MiB loaded in blocks of 128 B .. 4 KiB per partition.
        let rungs: Vec<(String, f64)> = [64, 256, 512, 1024, 2048]
            .map(|f| {
                let r = blocked_load(target, 8192, f);
                (format!("{} B per partition", 2 * f), r.total_ns)
            })
            .into();
        strictly_faster(&format!("{target:?} transfer size"), &rungs);
        // Past the curve's knee the gain is small: 4 KiB to 16 KiB per partition gains < 10%.
        let knee = blocked_load(target, 8192, 2048).total_ns;
        let big = blocked_load(target, 8192, 8192).total_ns;
        assert!(
            big <= knee && big > 0.9 * knee,
            "{target:?}: {big} vs {knee}"
        );
    }
}

/// One load and one store of `x[p, f]` bf16.
fn one_copy(p: usize, f: usize) -> CostReport {
    cost(Target::Trn2, &[("x", &[p, f], DType::BF16)], |h| {
        let out = shared_hbm(&[p, f], DType::BF16);
        let t = sbuf([p, f], DType::BF16);
        dma_copy(&t, &h[0]);
        dma_copy(&out, &t);
        vec![out]
    })
}

#[test]
fn transfers_over_more_partitions_are_faster() {
    // The same 1 MiB as [32, 16384] (four DMA engines) and [128, 4096] (all 16).
    let narrow = one_copy(32, 16384);
    let wide = one_copy(128, 4096);
    assert_eq!(narrow.hbm_read_bytes, wide.hbm_read_bytes);
    assert_eq!(narrow.slices[0].tracks().len(), 4);
    assert_eq!(wide.slices[0].tracks().len(), 16);
    assert!(
        wide.total_ns < narrow.total_ns,
        "{} vs {}",
        wide.total_ns,
        narrow.total_ns
    );
}

/// Scales a `[128, 4096]` fp32 tile in place with independent `tensor_scalar`s of `f` columns.
fn scale_in_pieces(f: usize) -> CostReport {
    cost(Target::Trn2, &[("x", &[128, 4096], DType::F32)], |h| {
        let out = shared_hbm(&[128, 4096], DType::F32);
        let t = sbuf([128, 4096], DType::F32);
        dma_copy(&t, &h[0]);
        for c in 0..4096 / f {
            let piece = t.cols(c * f, f);
            tensor_scalar(piece.clone(), piece, BinOp::Multiply, 2.0);
        }
        dma_copy(&out, &t);
        vec![out]
    })
}

#[test]
fn longer_instructions_are_faster_until_they_pass_the_minimum_interval() {
    // fp32 on Trn2 streams two elements per lane-cycle: below 128 columns an instruction is
    // MIN_II-bound, above it its cost grows with its length.
    let rungs: Vec<(String, f64)> = [8, 32, 128]
        .map(|f| {
            let r = scale_in_pieces(f);
            (format!("{f} columns"), busy(&r, Engine::Vector))
        })
        .into();
    strictly_faster("instruction length", &rungs);
    let long = busy(&scale_in_pieces(4096), Engine::Vector);
    assert!(long <= rungs[2].1 + 1e-6, "{long} vs {}", rungs[2].1);
    // And the end-to-end estimate follows the vector engine's time.
    assert!(scale_in_pieces(8).total_ns > scale_in_pieces(4096).total_ns);
}

/// Four matmuls, each waiting for its own moving tile's load, with one shared stationary
/// operand or four distinct ones (loaded up front).
fn matmuls(shared_stationary: bool) -> CostReport {
    cost(
        Target::Trn2,
        &[
            ("w", &[128, 4 * 128], DType::BF16),
            ("x", &[128, 4 * 128], DType::BF16),
        ],
        |h| {
            let out = shared_hbm(&[128, 4 * 128], DType::F32);
            let w = sbuf([128, 4 * 128], DType::BF16);
            dma_copy(&w, &h[0]);
            for i in 0..4 {
                let x = sbuf([128, 128], DType::BF16);
                dma_copy(&x, h[1].cols(i * 128, 128));
                let acc = psum([128, 128], DType::F32);
                let s = if shared_stationary { 0 } else { i };
                nc_matmul(&acc, w.cols(s * 128, 128), &x, false);
                let res = sbuf([128, 128], DType::F32);
                tensor_copy(&res, &acc);
                dma_copy(out.cols(i * 128, 128), &res);
            }
            vec![out]
        },
    )
}

#[test]
fn a_reused_stationary_operand_is_loaded_once() {
    let (shared, distinct) = (matmuls(true), matmuls(false));
    let (a, b) = (
        busy(&shared, Engine::Tensor),
        busy(&distinct, Engine::Tensor),
    );
    // Each MultiplyMoving is max(128, 64) cycles at 2.4 GHz; each LoadStationary ⌈128 / 4⌉
    // cycles, exposed because every matmul waits for its moving tile's load.
    let mm = 128.0 / 2.4;
    let ls = 32.0 / 2.4;
    assert!((a - (4.0 * mm + ls)).abs() < 1e-6, "{a}");
    assert!((b - 4.0 * (mm + ls)).abs() < 1e-6, "{b}");
    assert!(shared.total_ns < distinct.total_ns);
}

#[test]
fn back_to_back_matmuls_hide_the_next_load_stationary() {
    // Background LoadStationary: with the operands already in SBUF the tensor engine runs the
    // matmuls back to back, and each new stationary loads behind the previous matmul.
    let r = cost(
        Target::Trn2,
        &[
            ("w", &[128, 512], DType::BF16),
            ("x", &[128, 512], DType::BF16),
        ],
        |h| {
            let out = shared_hbm(&[128, 512], DType::F32);
            let (w, x) = (sbuf([128, 512], DType::BF16), sbuf([128, 512], DType::BF16));
            dma_copy(&w, &h[0]);
            dma_copy(&x, &h[1]);
            let acc = psum([128, 512], DType::F32);
            for k in 0..4 {
                nc_matmul(&acc, w.cols(k * 128, 128), &x, k > 0);
            }
            let res = sbuf([128, 512], DType::F32);
            tensor_copy(&res, &acc);
            dma_copy(&out, &res);
            vec![out]
        },
    );
    // The first LoadStationary shows (nothing runs before it); the other three are hidden.
    let want = (4.0 * 512.0 + 32.0) / 2.4;
    let got = busy(&r, Engine::Tensor);
    assert!((got - want).abs() < 1e-6, "{got} vs {want}");
}

/// Eight `[128, 2048]` fp32 row tiles, each put through four in-place passes: on the vector
/// engine only, or alternating vector and scalar.
fn four_passes(balanced: bool) -> CostReport {
    cost(Target::Trn2, &[("x", &[8 * 128, 2048], DType::F32)], |h| {
        let out = shared_hbm(&[8 * 128, 2048], DType::F32);
        affine_range(8, |i| {
            let t = sbuf([128, 2048], DType::F32);
            dma_copy(&t, h[0].rows(i.clone() * 128usize, 128));
            for pass in 0..4 {
                if balanced && pass % 2 == 1 {
                    activation(&t, ActFn::Identity, &t, None, 2.0);
                } else {
                    tensor_tensor(&t, &t, &t, BinOp::Add);
                }
            }
            dma_copy(out.rows(i * 128usize, 128), &t);
        });
        vec![out]
    })
}

#[test]
fn the_same_work_over_two_engines_beats_one() {
    let (one, two) = (four_passes(false), four_passes(true));
    assert!(busy(&two, Engine::Scalar) > 0.0);
    assert!(busy(&two, Engine::Vector) < busy(&one, Engine::Vector));
    assert!(
        two.total_ns < one.total_ns,
        "{} vs {}",
        two.total_ns,
        one.total_ns
    );
}

/// Adds one `[128, 512]` fp32 operand to itself: read contiguously from a `[128, 512]` tile, or
/// every `step`-th element of a `[128, 512 · step]` one.
fn strided_add(step: usize) -> CostReport {
    cost(Target::Trn2, &[], |_| {
        let src = sbuf([128, 512 * step], DType::F32);
        memset(&src, 1.0);
        let dst = sbuf([128, 512], DType::F32);
        let x = src.ap(&[[512 * step, 128], [step, 512]], 0);
        for _ in 0..16 {
            tensor_tensor(&dst, x.clone(), x.clone(), BinOp::Add);
        }
        vec![]
    })
}

#[test]
fn a_most_minor_stride_over_16_bytes_halves_the_streaming_rate() {
    let vector = |step| busy(&strided_add(step), Engine::Vector);
    let same = |a: f64, b: f64| (a / b - 1.0).abs() < 1e-9;
    // 4 and 16 bytes stream at the full rate, 32 and 64 at half.
    let (contiguous, at_16, at_32, at_64) = (vector(1), vector(4), vector(8), vector(16));
    assert!(
        same(contiguous, at_16) && same(at_32, at_64),
        "{contiguous} {at_16} {at_32} {at_64}"
    );
    assert!(same(at_32, 2.0 * at_16), "{at_16} vs {at_32}");
}
