//! The cost model against published device measurements.
//!
//! The nki-samples matrix-multiplication tutorial reports device times (neuron-bench, trn1.2xlarge,
//! NeuronCore-v2, Neuron SDK 2.25) for `lhsT[1024, 4096] · rhs[1024, 2048]` in bf16:
//! `nki_matmul_tiled_` 463 µs, `nki_matmul_fully_optimized_` 273 µs. Both kernels are written
//! here in the tile language with the tutorial's tiling, costed on Trn1, and the estimates are
//! printed beside the measurements (`cargo test -p nki-core --test calibration -- --nocapture`).
//!
//! The fully optimised kernel (tensor-bound, every operand read once in transfers of 2–4 KiB per
//! partition) must be within ±20% of its measurement. The tiled kernel cannot be fitted from the
//! documented constants, and the test says why instead: as written it reads 168 MB, which at the
//! documented peak of 16 × 17 B/ns (the DMA overview's Trainium1 row) takes longer than the
//! 463 µs the device took, so the measured program is not the written one (the legacy compiler
//! that produced the measurement hoists loop-invariant loads and merges transfers, as NKIBench's
//! published profile counters show). The model estimates the written instruction stream, so
//! the test checks that the measurement is below the documented bandwidth floor of that stream,
//! and that the estimate ranks the two kernels in the tutorial's order.

use nki_core::cost::{CostReport, CostTable, estimate};
use nki_core::lang::{InputSpec, trace};
use nki_core::prelude::*;

/// `(K, M, N)` of the tutorial's measurement.
const K: usize = 1024;
const M: usize = 4096;
const N: usize = 2048;

/// Published device times, ns.
const TILED_NS: f64 = 463_000.0;
const FULLY_OPTIMIZED_NS: f64 = 273_000.0;

/// Traces `body` on Trn1 with bf16 `lhsT[K, M]` and `rhs[K, N]` and costs it.
fn cost(name: &str, body: impl FnOnce(&Hbm, &Hbm) -> Hbm) -> CostReport {
    let inputs = [("lhsT", [K, M]), ("rhs", [K, N])].map(|(name, shape)| InputSpec {
        name: name.to_string(),
        shape: shape.to_vec(),
        dtype: DType::BF16,
    });
    let program = trace(name, Target::Trn1, &inputs, |h| vec![body(&h[0], &h[1])])
        .expect("the tutorial kernel traces");
    estimate(&program)
}

/// `nki_matmul_tiled_`: one `[128, 512]` PSUM tile per output tile, both operand tiles loaded
/// for every K step (nothing reused). PSUM is zeroed before accumulating, where the tutorial
/// relies on the first matmul overwriting it.
fn matmul_tiled(lhs_t: &Hbm, rhs: &Hbm) -> Hbm {
    let (tile_m, tile_k, tile_n) = (GEMM_STATIONARY_FMAX, PMAX, GEMM_MOVING_FMAX);
    let result = shared_hbm(&[M, N], lhs_t.dtype());
    affine_range(M / tile_m, |m| {
        affine_range(N / tile_n, |n| {
            let acc = psum([tile_m, tile_n], DType::F32);
            memset(&acc, 0.0);
            affine_range(K / tile_k, |k| {
                let lhs_tile = sbuf([tile_k, tile_m], lhs_t.dtype());
                let rhs_tile = sbuf([tile_k, tile_n], rhs.dtype());
                dma_copy(
                    &lhs_tile,
                    lhs_t
                        .rows(k.clone() * tile_k as i64, tile_k)
                        .cols(m.clone() * tile_m as i64, tile_m),
                );
                dma_copy(
                    &rhs_tile,
                    rhs.rows(k * tile_k as i64, tile_k)
                        .cols(n.clone() * tile_n as i64, tile_n),
                );
                nc_matmul(&acc, &lhs_tile, &rhs_tile, true);
            });
            let res = sbuf([tile_m, tile_n], result.dtype());
            tensor_copy(&res, &acc);
            dma_copy(
                result
                    .rows(m.clone() * tile_m as i64, tile_m)
                    .cols(n * tile_n as i64, tile_n),
                &res,
            );
        });
    });
    result
}

/// `nki_matmul_fully_optimized_` with its default blocking (16 × 2 × 8 tiles per M × N × K
/// block): `rhs` rows loaded `[128, BLOCK_N]` at a time once per N block, `lhsT` rows
/// `[128, BLOCK_M]` once per (N block, M block), PSUM results added into SBUF accumulators,
/// results packed `[128, BLOCK_N]` per store. The tutorial packs in fp32 and casts in the
/// store DMA; here the pack casts to bf16 first (as this calibration kernel was written before
/// the DMA converted dtypes), which halves the store's SBUF-side bytes but not the HBM bytes
/// written.
fn matmul_fully_optimized(lhs_t: &Hbm, rhs: &Hbm) -> Hbm {
    const TILES_IN_BLOCK_M: usize = 16;
    const TILES_IN_BLOCK_N: usize = 2;
    const TILES_IN_BLOCK_K: usize = 8;
    let (tile_m, tile_k, tile_n) = (GEMM_STATIONARY_FMAX, PMAX, GEMM_MOVING_FMAX);
    let (block_m, block_n, block_k) = (
        tile_m * TILES_IN_BLOCK_M,
        tile_n * TILES_IN_BLOCK_N,
        tile_k * TILES_IN_BLOCK_K,
    );
    let dt = lhs_t.dtype();
    let result = shared_hbm(&[M, N], dt);
    for n in 0..N / block_n {
        let acc: Vec<Vec<Vec<Tile>>> = (0..M / block_m)
            .map(|_| {
                (0..TILES_IN_BLOCK_M)
                    .map(|_| {
                        (0..TILES_IN_BLOCK_N)
                            .map(|_| {
                                let t = sbuf([tile_m, tile_n], dt);
                                memset(&t, 0.0);
                                t
                            })
                            .collect()
                    })
                    .collect()
            })
            .collect();
        for k in 0..K / block_k {
            let rhs_tiles: Vec<Tile> = (0..TILES_IN_BLOCK_K)
                .map(|bk| {
                    let t = sbuf([tile_k, block_n], dt);
                    dma_copy(
                        &t,
                        rhs.rows((k * TILES_IN_BLOCK_K + bk) * tile_k, tile_k)
                            .cols(n * block_n, block_n),
                    );
                    t
                })
                .collect();
            for (m, acc_m) in acc.iter().enumerate() {
                let lhs_tiles: Vec<Tile> = (0..TILES_IN_BLOCK_K)
                    .map(|bk| {
                        let t = sbuf([tile_k, block_m], dt);
                        dma_copy(
                            &t,
                            lhs_t
                                .rows((k * TILES_IN_BLOCK_K + bk) * tile_k, tile_k)
                                .cols(m * block_m, block_m),
                        );
                        t
                    })
                    .collect();
                for bn in 0..TILES_IN_BLOCK_N {
                    for (bm, acc_bm) in acc_m.iter().enumerate() {
                        let part = psum([tile_m, tile_n], DType::F32);
                        for (bk, (l, r)) in lhs_tiles.iter().zip(&rhs_tiles).enumerate() {
                            nc_matmul(
                                &part,
                                l.cols(bm * tile_m, tile_m),
                                r.cols(bn * tile_n, tile_n),
                                bk > 0,
                            );
                        }
                        tensor_tensor(&acc_bm[bn], &acc_bm[bn], &part, BinOp::Add);
                    }
                }
            }
        }
        for (m, acc_m) in acc.iter().enumerate() {
            for (bm, acc_bm) in acc_m.iter().enumerate() {
                let packed = sbuf([tile_m, block_n], dt);
                for (bn, t) in acc_bm.iter().enumerate() {
                    tensor_copy(packed.cols(bn * tile_n, tile_n), t);
                }
                dma_copy(
                    result
                        .rows((m * TILES_IN_BLOCK_M + bm) * tile_m, tile_m)
                        .cols(n * block_n, block_n),
                    &packed,
                );
            }
        }
    }
    result
}

fn line(name: &str, measured_ns: f64, r: &CostReport) -> f64 {
    let off = r.total_ns / measured_ns - 1.0;
    println!(
        "{name:<28} measured {:>7.1} µs   estimate {:>7.1} µs ({:+.0}%), {} bound at {:.0}%",
        measured_ns / 1e3,
        r.total_ns / 1e3,
        off * 100.0,
        r.bound,
        r.roofline_fraction * 100.0
    );
    off
}

#[test]
fn matmul_tutorial_estimates_match_trn1_measurements() {
    let tiled = cost("nki_matmul_tiled_", matmul_tiled);
    let optimized = cost("nki_matmul_fully_optimized_", matmul_fully_optimized);
    // Both compute the same product: 2·M·N·K tensor FLOPs.
    let flops = 2.0 * (M * N * K) as f64;
    assert_eq!((tiled.flops, optimized.flops), (flops, flops));
    line("nki_matmul_tiled_", TILED_NS, &tiled);
    let off_opt = line(
        "nki_matmul_fully_optimized_",
        FULLY_OPTIMIZED_NS,
        &optimized,
    );
    let measured_ratio = TILED_NS / FULLY_OPTIMIZED_NS;
    let ratio = tiled.total_ns / optimized.total_ns;
    let off_ratio = ratio / measured_ratio - 1.0;
    println!(
        "tiled / fully optimized      measured {measured_ratio:.2}x   estimate {ratio:.2}x ({:+.0}%)",
        off_ratio * 100.0
    );
    assert!(
        off_opt.abs() <= 0.20,
        "optimized estimate off by {off_opt:+.2}"
    );
    // The written tiled kernel's bytes at the documented peak take longer than the device took.
    let table = CostTable::for_target(Target::Trn1);
    let floor_ns =
        (tiled.hbm_read_bytes + tiled.hbm_write_bytes) / table.dma_peak_bytes_per_s() * 1e9;
    println!(
        "tiled kernel's HBM bytes at the documented 272 GB/s: {:.1} µs (measured {:.1} µs)",
        floor_ns / 1e3,
        TILED_NS / 1e3
    );
    assert!(floor_ns > TILED_NS, "{floor_ns} ns");
    assert!(tiled.total_ns >= floor_ns);
    assert!(ratio > 1.0, "the tiled kernel ranks slower: {ratio}");
}
