//! The backward of RMSNorm and LayerNorm in one pass over `x` and `grad_y`, for rows up to
//! 4096 columns: the weight gradient accumulates in PSUM across row tiles instead of a second
//! pass that reads both tensors again, and the elementwise passes are spread over the vector
//! engine, the scalar engine and GpSimd.
//!
//! RMSNorm, with `ĝ = grad_y · weight`, `S = Σ_D ĝ · x` and `k = −rstd² · S / D` per row:
//! `grad_x = rstd · (ĝ + k · x)` (its `rstd · (ĝ − x̂ · mean(ĝ · x̂))` with `x̂ = x · rstd`), and
//! `grad_weight = Σ_rows rstd · grad_y · x`, a matmul with the row tile's `rstd` column as the
//! stationary operand. LayerNorm is the same on the centred `x − mean`, with `b = −Σ ĝ / D`
//! added: `grad_x = rstd · (ĝ + k · (x − mean) + b)` (its `rstd · (ĝ − mean(ĝ) − x̂ ·
//! mean(ĝ · x̂))`), `grad_weight = Σ_rows rstd · grad_y · (x − mean)` and `grad_bias =
//! Σ_rows grad_y`, both in one PSUM bank per 512 columns.
//!
//! Each row tile goes through three stages ([`stages`]): A, the products and row sums of each
//! column piece (1024 columns, 2048 for 16-bit LayerNorm rows); B, the per-row factors `k` and
//! `rstd · b`; C, `grad_x`. The engines run their instructions in order, so the row tiles of a
//! group are software-pipelined: while tile i's pieces are written (C), tile i + 2's (16-bit
//! rows, and add_rmsnorm's) or tile i + 1's (other fp32 rows, bound by DMA; see
//! [`pipeline_depth`]) are loaded and multiplied (A), piece by piece and interleaved, and tile
//! i + 1's factors (B) follow. Every engine then has work from two tiles queued and none waits
//! for another's pass over the same piece. Groups are as long as SBUF allows the tiles in
//! flight (their tiles are freed as the pipeline moves on), so
//! the pipeline fills and drains once per group, not once per tile.

mod stages;

use crate::partials::{store_share, sum_row_shares};
use crate::tiling::{fill_zeros, psum_banks, rows_of, spans};
use nki_core::prelude::*;
use stages::{Pass, RowTile, Scaled};

/// Whether rows of `d` columns take this path: `[1, d]` fp32 fits the PSUM banks.
pub(super) fn fits(d: usize) -> bool {
    d <= PSUM_BANKS * PSUM_BANK_FMAX
}

/// What [`run`] reads and writes.
pub(super) struct Operands<'a> {
    /// The output gradient, `[..B, D]`.
    pub(super) grad_y: &'a Hbm,
    /// A gradient reaching `x` directly (add_rmsnorm's `grad_h`), added to `grad_x`.
    pub(super) extra: Option<&'a Hbm>,
    /// The forward input, `[..B, D]` with [`fits`]`(D)`.
    pub(super) x: &'a Hbm,
    /// The weight, `[D]` (LayerNorm's may be absent: `ĝ = grad_y`).
    pub(super) weight: Option<&'a Hbm>,
    /// LayerNorm's saved per-row mean; `None` for RMSNorm.
    pub(super) mean: Option<&'a Hbm>,
    /// The saved per-row `rstd`, fp32.
    pub(super) rstd: &'a Hbm,
    /// Where `grad_x` goes (add_rmsnorm writes it to both of its inputs' gradients).
    pub(super) grad_x_outs: &'a [&'a Hbm],
    /// Also compute the bias gradient `Σ_rows grad_y` (LayerNorm).
    pub(super) with_bias: bool,
}

/// Writes `grad_x` to every tensor of `grad_x_outs` and returns `grad_weight` and, when asked
/// for, `grad_bias`.
pub(super) fn run(o: &Operands<'_>) -> (Hbm, Option<Hbm>) {
    let (n, d) = rows_of(o.x);
    let dt = o.x.dtype();
    let grad_w = shared_hbm(&[d], dt);
    let grad_b = o.with_bias.then(|| shared_hbm(&[d], dt));
    if n == 0 {
        // An empty batch: `grad_x` is empty and the sums over rows are zeros.
        grad_b.iter().chain([&grad_w]).for_each(fill_zeros);
        return (grad_w, grad_b);
    }
    let pass = Pass::new(o);
    let group = group_tiles(&pass, n);
    let depth = pipeline_depth(dt, o.extra.is_some());
    // The row tiles split across the cores, each core's gradients accumulated in PSUM across
    // its share and the partials combined in one order.
    let acc_rows = 1 + usize::from(o.with_bias);
    let sums: Vec<[usize; 2]> = psum_banks(d).map(|(_, cols)| [acc_rows, cols]).collect();
    let totals = sum_row_shares(n, &sums, |share, accs| {
        for_each_tile_in(share, group * PMAX, |span| {
            let tiles: Vec<TileSpan> = spans(span.size, PMAX)
                .map(|(o, p)| TileSpan {
                    start: span.start.clone() + o,
                    size: p,
                })
                .collect();
            pipeline(&pass, accs, &tiles, depth);
        });
    });
    // The gradients, rounded once and stored.
    for (total, (c0, cols)) in totals.iter().zip(psum_banks(d)) {
        let res = sbuf([acc_rows, cols], dt);
        tensor_copy(&res, total.clone());
        for (row, out) in [Some(&grad_w), grad_b.as_ref()]
            .into_iter()
            .flatten()
            .enumerate()
        {
            store_share(
                out.reshape(&[1, d]).cols(c0, cols),
                res.region().slice(row, 1, 0, cols),
            );
        }
    }
    (grad_w, grad_b)
}

/// How many row tiles stage A runs ahead of stage C. Two where the engines bound the kernel
/// (16-bit rows: trn2 cost model at 8192×4096 bf16, layernorm_backward 782 µs with two, 1050
/// with one; rmsnorm_backward 703 vs 804), and for add_rmsnorm (fp32 1998 vs 2211 µs). fp32
/// rows of the other two are bound by DMA, where one tile ahead costs the device nothing
/// measurable (layernorm_backward 1215 vs 1221 µs, rmsnorm_backward 1211 vs 1208) and
/// keeps each tile's pieces closer in time, which the CPU simulator feels: layernorm_backward
/// there runs in about four fifths of the time (measured with 2048-column pieces, sim-only,
/// two threads: min 131.8 → 107.2 ms).
fn pipeline_depth(dt: DType, extra: bool) -> usize {
    if dt == DType::F32 && !extra { 1 } else { 2 }
}

/// The three stages over the row tiles of one group (the gradients accumulated into `accs`, one
/// PSUM bank per 512 columns), stage A running `depth` (1 or 2) tiles
/// ahead: tiles `0..depth` through stage A and tile 0 through B first; then, per tile i, its
/// pieces' outputs (C) interleaved with tile i + depth's loads and products (A), each piece
/// loaded one step ahead and its scalar-engine sum issued one step behind (so neither waits in
/// that engine's queue behind the other's work), and tile i + 1's factors (B) last.
fn pipeline(pass: &Pass, accs: &[Tile], tiles: &[TileSpan], depth: usize) {
    let pieces = pass.pieces.len();
    // Every tile's per-row operands first: their small loads then queue ahead of the pieces'.
    let mut started: std::collections::VecDeque<RowTile> = tiles
        .iter()
        .enumerate()
        .map(|(i, rows)| pass.start(rows.clone(), i))
        .collect();
    let mut whole = || {
        let mut t = started.pop_front()?;
        for j in 0..pieces {
            pass.load(&mut t, j);
            pass.products(&mut t, j, accs);
            pass.sum(&t, j);
        }
        Some(t)
    };
    let mut fresh: std::collections::VecDeque<RowTile> =
        (0..depth).filter_map(|_| whole()).collect();
    let mut ready: Option<Scaled> = fresh.pop_front().map(|t| pass.scaled(t));
    // The last piece's sum of the tile loaded in the previous iteration, still to be issued.
    let mut last_sum_due = false;
    for _ in 0..tiles.len() {
        let mut ahead = started.pop_front();
        if let Some(a) = &mut ahead {
            pass.load(a, 0);
        }
        for j in 0..pieces {
            if let Some(a) = &mut ahead
                && j + 1 < pieces
            {
                pass.load(a, j + 1);
            }
            if j == 0 && std::mem::take(&mut last_sum_due) {
                let prev = fresh
                    .back()
                    .expect("the previous iteration's tile waits in `fresh`");
                pass.sum(prev, pieces - 1);
            }
            if let Some(out) = &ready {
                pass.output(out, j);
            }
            if let Some(a) = &mut ahead {
                pass.products(a, j, accs);
                if j > 0 {
                    pass.sum(a, j - 1);
                }
            }
        }
        if let Some(a) = ahead {
            // One tile ahead, the tile just loaded is the next to be output: its sum cannot
            // wait for the next iteration's first piece.
            if depth == 1 {
                pass.sum(&a, pieces - 1);
            } else {
                last_sum_due = true;
            }
            fresh.push_back(a);
        }
        ready = fresh.pop_front().map(|t| pass.scaled(t));
    }
}

/// Row tiles per group: [`DEEP_GROUP`] when SBUF holds what the pipeline keeps in flight,
/// else two (the stages of two tiles, no interleaving) or one.
fn group_tiles(pass: &Pass, n: usize) -> usize {
    let budget = current_target().sbuf_bytes_per_partition() as isize - pass.held_bytes() as isize;
    // In the interleaved pipeline, tile i + 1 waits whole while tile i's pieces are freed as
    // they are written and tile i + 2's are loaded: two tiles, two pieces' kept tiles and one
    // piece's short-lived ones. Without it, the group's tiles are all whole at once.
    let deep = 2 * pass.tile_bytes() + 2 * pass.kept_piece_bytes() + pass.piece_bytes();
    let whole = |tiles: usize| tiles * pass.tile_bytes() + pass.piece_bytes();
    let group = if deep as isize <= budget {
        DEEP_GROUP
    } else if whole(2) as isize <= budget {
        2
    } else {
        1
    };
    group.min(n.div_ceil(PMAX)).max(1)
}

/// Row tiles per group when the pipeline fits: it fills and drains once per group (trn2 bf16
/// LayerNorm bench shape, 64 tiles, cost model: 859 µs with groups of 16, 807 µs with 32,
/// 782 µs with all 64 in one; the program grows with the group).
const DEEP_GROUP: usize = 64;

#[cfg(test)]
mod tests {
    use super::super::{
        ADD_RMSNORM_BACKWARD_KERNEL, LAYERNORM_BACKWARD_KERNEL, RMSNORM_BACKWARD_KERNEL,
    };
    use nki_core::compile::compile;
    use nki_core::prelude::*;
    use nki_core::testing::*;

    /// Every width this path takes, in every dtype on every target, compiles (the programs
    /// pass validation, SBUF capacity included) at a row count that fills the pipeline.
    #[test]
    fn every_width_fits_on_every_target() {
        let n = 5 * PMAX as u64 + 3;
        for target in [Target::Trn1, Target::Trn2, Target::Trn3] {
            for dt in [DType::F32, DType::BF16, DType::F16] {
                for d in [1, 96, 1000, 1024, 2047, 2048, 3000, 4095, 4096] {
                    let (rows, col, stat) = ([n, d], [d], [n]);
                    let (rows, col, stat) = (rows.as_slice(), col.as_slice(), stat.as_slice());
                    let signatures = [
                        (
                            &LAYERNORM_BACKWARD_KERNEL,
                            vec![
                                (rows, dt),
                                (rows, dt),
                                (col, dt),
                                (stat, DType::F32),
                                (stat, DType::F32),
                            ],
                        ),
                        (
                            &RMSNORM_BACKWARD_KERNEL,
                            vec![(rows, dt), (rows, dt), (col, dt), (stat, DType::F32)],
                        ),
                        (
                            &ADD_RMSNORM_BACKWARD_KERNEL,
                            vec![
                                (rows, dt),
                                (rows, dt),
                                (rows, dt),
                                (col, dt),
                                (stat, DType::F32),
                            ],
                        ),
                    ];
                    for (kernel, tensors) in signatures {
                        let sig = Signature::new(&tensors, &[], target);
                        if let Err(e) = compile(kernel, &sig) {
                            panic!("{} {dt:?} D = {d} on {target:?}: {e}", kernel.name);
                        }
                    }
                }
            }
        }
    }

    /// LayerNorm's gradients against closed forms in f64, over two pipeline groups and a
    /// ragged tail, with and without a weight; and over rows of several column pieces (three
    /// fp32 pieces, the last ragged).
    #[test]
    fn layernorm_backward_matches_closed_forms_across_groups() {
        for (n, d) in [(65 * PMAX + 3, 40), (2 * PMAX + 5, 2500)] {
            layernorm_backward_matches_closed_forms(n, d);
        }
    }

    fn layernorm_backward_matches_closed_forms(n: usize, d: usize) {
        let arr = |seed: usize, scale: f32, offset: f32| {
            let v =
                (0..n * d).map(|i| (((i + seed) * 7919) % 1000) as f32 / 500.0 * scale + offset);
            HostArray::new(&[n, d], DType::F32, v)
        };
        let (g, x) = (arr(3, 1.0, -1.0), arr(11, 3.0, 5.0));
        let w = HostArray::new(&[d], DType::F32, (0..d).map(|i| 0.5 + (i % 7) as f32 / 7.0));
        let row = |v: &[f32], i: usize| -> Vec<f64> {
            v[i * d..(i + 1) * d].iter().map(|&a| a as f64).collect()
        };
        let (mut mean, mut rstd) = (Vec::new(), Vec::new());
        for i in 0..n {
            let xs = row(&x.values, i);
            let m = xs.iter().sum::<f64>() / d as f64;
            let var = xs.iter().map(|a| (a - m).powi(2)).sum::<f64>() / d as f64;
            mean.push(m as f32);
            rstd.push((1.0 / (var + 1e-5).sqrt()) as f32);
        }
        let stat = |v: Vec<f32>| HostArray::new(&[n], DType::F32, v);
        for weight in [Some(&w), None] {
            let (mean, rstd) = (stat(mean.clone()), stat(rstd.clone()));
            let out = run_kernel_with(
                &LAYERNORM_BACKWARD_KERNEL,
                &[Some(&g), Some(&x), weight, Some(&mean), Some(&rstd)],
                &[],
                Target::Trn2,
            )
            .unwrap();
            let (mut gw, mut gb) = (vec![0f64; d], vec![0f64; d]);
            for i in 0..n {
                let (gs, xs) = (row(&g.values, i), row(&x.values, i));
                let (m, r) = (mean.values[i] as f64, rstd.values[i] as f64);
                let wj = |j: usize| weight.map_or(1.0, |w| w.values[j] as f64);
                let xhat: Vec<f64> = xs.iter().map(|a| (a - m) * r).collect();
                let ghat: Vec<f64> = (0..d).map(|j| gs[j] * wj(j)).collect();
                let mean_g = ghat.iter().sum::<f64>() / d as f64;
                let mean_gx = ghat.iter().zip(&xhat).map(|(a, b)| a * b).sum::<f64>() / d as f64;
                for j in 0..d {
                    let want = r * (ghat[j] - mean_g - xhat[j] * mean_gx);
                    let got = out[0].values[i * d + j] as f64;
                    assert!(
                        (got - want).abs() < 1e-4 * (1.0 + want.abs()),
                        "dx[{i},{j}] {got} vs {want}"
                    );
                    gw[j] += gs[j] * xhat[j];
                    gb[j] += gs[j];
                }
            }
            for (k, want) in [gw, gb].iter().enumerate() {
                for (j, want) in want.iter().enumerate() {
                    let got = out[1 + k].values[j] as f64;
                    assert!(
                        (got - want).abs() < 1e-4 * (1.0 + want.abs()),
                        "grad {k}[{j}] {got} vs {want}"
                    );
                }
            }
        }
    }
}
