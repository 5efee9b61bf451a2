//! Normalisation kernels: RMSNorm (plain and fused with the residual add) and LayerNorm, and
//! the tiling pieces they share: the broadcast weight, row-tile column chunks, and the
//! cross-row reductions of their weight and bias gradients on the tensor engine.

mod few_rows;
pub mod layernorm;
mod one_pass;
pub mod rmsnorm;

pub use layernorm::*;
pub use rmsnorm::*;

use crate::tiling::{CHUNK, column_chunks, psum_banks};
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
/// eight banks in use per column block.
fn affine_gradients(g: &AffineGrads) {
    let [n, d] = [g.x.shape()[0], g.x.shape()[1]];
    let dt = g.grad_y.dtype();
    let outs = [g.grad_weight, g.grad_bias];
    let per_block = PSUM_BANKS / outs.iter().flatten().count().max(1);
    let ones = sbuf([n.min(PMAX), 1], DType::F32);
    memset(&ones, 1.0);
    let ones_dt = sbuf([n.min(PMAX), 1], dt);
    memset(&ones_dt, 1.0);
    for_each_tile(d, PSUM_BANK_FMAX * per_block, |blk| {
        let banks: Vec<(usize, usize)> = psum_banks(blk.size).collect();
        let accs: Vec<Vec<Tile>> = outs
            .iter()
            .map(|o| match o {
                Some(_) => banks
                    .iter()
                    .map(|&(_, w)| psum([1, w], DType::F32))
                    .collect(),
                None => Vec::new(),
            })
            .collect();
        for acc in accs.iter().flatten() {
            memset(acc, 0.0);
        }
        for_each_tile(n, PMAX, |rows| {
            let gt = sbuf([rows.size, blk.size], dt);
            dma_copy(&gt, chunk_of(g.grad_y, &rows, blk.start.clone(), blk.size));
            if g.grad_weight.is_some() {
                let xt = sbuf([rows.size, blk.size], g.x.dtype());
                dma_copy(&xt, chunk_of(g.x, &rows, blk.start.clone(), blk.size));
                let r = sbuf([rows.size, 1], DType::F32);
                dma_copy(&r, g.rstd.clone().rows(rows.start.clone(), rows.size));
                let m = sbuf([rows.size, blk.size], DType::F32);
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
                for (acc, &(c0, w)) in accs[0].iter().zip(&banks) {
                    nc_matmul(acc, ones.rows(rows.size), m.cols(c0, w), true);
                }
            }
            for (acc, &(c0, w)) in accs[1].iter().zip(&banks) {
                nc_matmul(acc, ones_dt.rows(rows.size), gt.cols(c0, w), true);
            }
        });
        for (out, accs) in outs.iter().zip(&accs) {
            let Some(out) = out else { continue };
            for (acc, &(c0, w)) in accs.iter().zip(&banks) {
                let res = sbuf([1, w], dt);
                tensor_copy(&res, acc);
                dma_copy(out.reshape(&[1, d]).cols(blk.start.clone() + c0, w), &res);
            }
        }
    });
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
