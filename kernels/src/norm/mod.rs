//! Normalisation kernels: RMSNorm (plain and fused with the residual add) and LayerNorm, and
//! the tiling pieces they share: the broadcast weight, row-tile column chunks, and the
//! cross-row reductions of their weight and bias gradients on the tensor engine.

mod few_rows;
pub mod layernorm;
mod one_pass;
pub mod rmsnorm;

pub use layernorm::*;
pub use rmsnorm::*;

use crate::partials::{store_share, sum_row_shares};
use crate::tiling::{CHUNK, column_chunks, psum_banks, spans};
use nki_core::prelude::*;

/// `weight` `[D]` loaded once into SBUF, broadcast across the partitions a row tile uses.
fn broadcast_weight(weight: &Hbm, n: usize, d: usize) -> Tile {
    let p = n.min(PMAX);
    let w = sbuf([p, d], weight.dtype());
    dma_copy(&w, weight.view().broadcast_to(&[p, d]));
    w
}

/// `rsqrt(Σ x² / D + eps)` per row of the tile `xt` (`[rows, D]`), fp32, with the squares
/// summed on the scalar engine 2048 columns at a time (into a one-chunk fp32 scratch tile).
fn reciprocal_rms(xt: &Tile, eps: f32) -> Tile {
    let [rows, d] = xt.shape();
    let scratch = sbuf([rows, CHUNK.min(d)], DType::F32);
    let rstd = sbuf([rows, 1], DType::F32);
    for (i, (c0, cols)) in column_chunks(d).into_iter().enumerate() {
        let part = if i == 0 {
            rstd.clone()
        } else {
            sbuf([rows, 1], DType::F32)
        };
        activation_reduce(
            scratch.cols(0, cols),
            ActFn::Square,
            xt.cols(c0, cols),
            BinOp::Add,
            &part,
            None,
            1.0,
        );
        if i > 0 {
            tensor_tensor(&rstd, &rstd, &part, BinOp::Add);
        }
    }
    tensor_scalar(&rstd, &rstd, BinOp::Multiply, 1.0 / d as f32).then(BinOp::Add, eps);
    activation(&rstd, ActFn::Rsqrt, &rstd, None, 1.0);
    rstd
}

/// Columns `c0..c0+cols` of a row tile of a `[N, D]` view.
fn chunk_of(v: &HbmView, rows: &TileSpan, c0: impl Into<AffineExpr>, cols: usize) -> HbmView {
    v.clone().rows(rows.start.clone(), rows.size).cols(c0, cols)
}

/// The operands of [`affine_gradients`], all `[N, D]` or `[N, 1]` row views.
struct AffineGrads<'a> {
    /// The output gradient.
    grad_y: &'a HbmView,
    /// The forward input.
    x: &'a HbmView,
    /// The saved per-row mean (LayerNorm), subtracted before scaling; `None` for RMSNorm.
    mean: Option<&'a HbmView>,
    /// The saved per-row `rstd`, fp32.
    rstd: &'a HbmView,
    /// Where `Σ_rows grad_y · x̂` goes, `[D]`.
    grad_weight: Option<&'a Hbm>,
    /// Where `Σ_rows grad_y` goes, `[D]`.
    grad_bias: Option<&'a Hbm>,
}

/// The cross-row reductions of a normalisation's backward: `grad_weight[c] = Σ_rows grad_y ·
/// x̂` with `x̂ = (x − mean) · rstd`, and `grad_bias[c] = Σ_rows grad_y`.
///
/// The sum over rows crosses partitions, so it runs on the tensor engine: a ones column as the
/// stationary operand sums each 128-row tile into fp32 PSUM banks (512 columns each), all
/// eight banks in use per column block. The row tiles are split across the cores of a logical
/// NeuronCore and each block's partial sums combined in one order ([`sum_row_shares`]); the
/// blocks are unrolled, so each block's exchange is at the top level of the kernel.
fn affine_gradients(g: &AffineGrads) {
    let [n, d] = [g.x.shape()[0], g.x.shape()[1]];
    let dt = g.grad_y.dtype();
    let outs: Vec<&Hbm> = [g.grad_weight, g.grad_bias].into_iter().flatten().collect();
    let per_block = PSUM_BANKS / outs.len().max(1);
    let ones = sbuf([n.min(PMAX), 1], DType::F32);
    memset(&ones, 1.0);
    let ones_dt = sbuf([n.min(PMAX), 1], dt);
    memset(&ones_dt, 1.0);
    for (b0, width) in spans(d, PSUM_BANK_FMAX * per_block) {
        let banks: Vec<(usize, usize)> = psum_banks(width).collect();
        // The weight gradient's banks, then the bias gradient's.
        let sums: Vec<[usize; 2]> = outs
            .iter()
            .flat_map(|_| banks.iter().map(|&(_, w)| [1, w]))
            .collect();
        let totals = sum_row_shares(n, &sums, |share, accs| {
            let (weight_accs, bias_accs) = accs.split_at(if g.grad_weight.is_some() {
                banks.len()
            } else {
                0
            });
            for_each_tile_in(share, PMAX, |rows| {
                let gt = sbuf([rows.size, width], dt);
                dma_copy(&gt, chunk_of(g.grad_y, &rows, b0, width));
                if g.grad_weight.is_some() {
                    let xt = sbuf([rows.size, width], g.x.dtype());
                    dma_copy(&xt, chunk_of(g.x, &rows, b0, width));
                    let r = sbuf([rows.size, 1], DType::F32);
                    dma_copy(&r, g.rstd.clone().rows(rows.start.clone(), rows.size));
                    let m = sbuf([rows.size, width], DType::F32);
                    match g.mean {
                        Some(mean) => {
                            let mu = sbuf([rows.size, 1], DType::F32);
                            dma_copy(&mu, mean.clone().rows(rows.start.clone(), rows.size));
                            tensor_scalar(&m, &xt, BinOp::Subtract, &mu).then(BinOp::Multiply, &r);
                        }
                        None => {
                            tensor_scalar(&m, &xt, BinOp::Multiply, &r);
                        }
                    }
                    tensor_tensor(&m, &m, &gt, BinOp::Multiply);
                    for (acc, &(c0, w)) in weight_accs.iter().zip(&banks) {
                        nc_matmul(acc, ones.rows(rows.size), m.cols(c0, w), true);
                    }
                }
                for (acc, &(c0, w)) in bias_accs.iter().zip(&banks) {
                    nc_matmul(acc, ones_dt.rows(rows.size), gt.cols(c0, w), true);
                }
            });
        });
        for (out, totals) in outs.iter().zip(totals.chunks(banks.len().max(1))) {
            for (total, &(c0, w)) in totals.iter().zip(&banks) {
                let res = sbuf([1, w], dt);
                tensor_copy(&res, total.clone());
                store_share(out.reshape(&[1, d]).cols(b0 + c0, w), &res);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nki_core::testing::*;

    fn arr(shape: &[usize], seed: usize) -> HostArray {
        let n: usize = shape.iter().product();
        HostArray::new(
            shape,
            DType::F32,
            (0..n).map(|i| ((i + seed) % 7) as f32 / 3.0 - 1.0),
        )
    }

    /// An empty batch runs forward (nothing to write) and backward: `grad_x` is empty and the
    /// weight and bias gradients, sums over no rows, are zeros, as in torch; on the one-pass
    /// path (4096 columns or fewer) and the long-row path.
    #[test]
    fn an_empty_batch_has_zero_weight_gradients() {
        for d in [8, 5000] {
            let (rows, col, stat) = (arr(&[0, d], 0), arr(&[d], 1), arr(&[0], 2));
            let cases: [(&nki_core::KernelDef, Vec<HostArray>); 3] = [
                (
                    &RMSNORM_BACKWARD_KERNEL,
                    vec![rows.clone(), rows.clone(), col.clone(), stat.clone()],
                ),
                (
                    &ADD_RMSNORM_BACKWARD_KERNEL,
                    vec![
                        rows.clone(),
                        rows.clone(),
                        rows.clone(),
                        col.clone(),
                        stat.clone(),
                    ],
                ),
                (
                    &LAYERNORM_BACKWARD_KERNEL,
                    vec![
                        rows.clone(),
                        rows.clone(),
                        col.clone(),
                        stat.clone(),
                        stat.clone(),
                    ],
                ),
            ];
            for (def, inputs) in cases {
                let out = run_kernel(def, &inputs, &[], Target::Trn2)
                    .unwrap_or_else(|e| panic!("{} at D = {d}: {e}", def.name));
                for o in &out {
                    if o.shape == [d] {
                        assert!(
                            o.values.iter().all(|&v| v == 0.0),
                            "{} at D = {d}",
                            def.name
                        );
                    } else {
                        assert_eq!(o.shape, [0, d], "{}", def.name);
                    }
                }
            }
        }
    }

    /// A norm over no columns is refused by the contract, naming `D`.
    #[test]
    fn rows_of_no_columns_are_contract_errors() {
        let (x, w) = (arr(&[4, 0], 0), arr(&[0], 1));
        for (def, inputs) in [
            (&RMSNORM_KERNEL, vec![x.clone(), w.clone()]),
            (&LAYERNORM_KERNEL, vec![x.clone(), w.clone(), w.clone()]),
        ] {
            let err =
                run_kernel(def, &inputs, &[ScalarValue::Float(1e-5)], Target::Trn2).unwrap_err();
            assert!(err.to_string().contains("D >= 1"), "{}: {err}", def.name);
        }
    }
}
