//! Normalisation kernels.

use crate::tiling::{CHUNK, column_chunks, rows_of};
use nki_core::prelude::*;

/// Columns of `grad_weight` accumulated together: one fp32 PSUM bank (512 columns) each, all
/// eight banks.
const WEIGHT_BLOCK: usize = PSUM_BANK_FMAX * PSUM_BANKS;

/// RMSNorm over the last dim: `x * rsqrt(mean(x²) + eps) * weight`, for `x` of any rank ≥ 1
/// (LlamaRMSNorm's `[B, S, H]` directly).
///
/// Rows (all leading dims flattened) are tiled 128 to the partitions with a ragged last tile;
/// the whole row stays on the free dim. The weight is loaded once, broadcast across
/// partitions. Statistics are computed in fp32 on the scalar engine (square with a free-dim sum
/// reduction, 2048 columns at a time so the fp32 scratch stays small: an f32 row of 16384 fits
/// Trn1's SBUF); the result is rounded once to the input dtype. `rstd = rsqrt(mean(x²) + eps)`
/// per row is saved in fp32 for the backward.
#[kernel(
    shape(x = [..B, D], weight = [D]) -> (y = [..B, D], saved rstd = [..B]),
    dtype(x in {f32, bf16, f16}, weight = x) -> (x, f32),
    require(D <= 16384),
    backward(rmsnorm_backward, saves(x, weight, rstd)),
    replaces("torch.nn.RMSNorm", "*.LlamaRMSNorm"),
    reference("(x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight"),
    sample(x = [130, 96], weight = [96]),
    sample(x = [300, 1000], weight = [1000]),
    sample(x = [2, 65, 96], weight = [96], eps = 1e-5),
    sample(x = [1, 1], weight = [1]),
    sample(x = [7], weight = [7]),
    tolerance(reduction(D)),
    autocast(promote),
    bench(x = [8192, 4096], weight = [4096]),
)]
pub fn rmsnorm(x: &Hbm, weight: &Hbm, #[default(1e-6)] eps: f32) -> (Hbm, Hbm) {
    let (n, d) = rows_of(x);
    let out = shared_hbm(x.shape(), x.dtype());
    let rstd_out = shared_hbm(&x.shape()[..x.shape().len() - 1], DType::F32);
    let (xv, ov, rv) = (
        x.reshape(&[n, d]),
        out.reshape(&[n, d]),
        rstd_out.reshape(&[n, 1]),
    );
    let p = n.min(PMAX);
    let w = sbuf([p, d], weight.dtype());
    dma_copy(&w, weight.view().broadcast_to(&[p, d]));
    let chunks = column_chunks(d);
    for_each_tile(n, PMAX, |rows| {
        let xt = sbuf([rows.size, d], x.dtype());
        dma_copy(&xt, xv.clone().rows(rows.start.clone(), rows.size));
        // sum(x²) per row, fp32, on the scalar engine, one 2048-column chunk at a time (the
        // squares themselves are scratch, so a chunk of it is enough).
        let scratch = sbuf([rows.size, CHUNK.min(d)], DType::F32);
        let rstd = sbuf([rows.size, 1], DType::F32);
        for (i, &(c0, cols)) in chunks.iter().enumerate() {
            let part = if i == 0 {
                rstd.clone()
            } else {
                sbuf([rows.size, 1], DType::F32)
            };
            let sq = scratch.cols(0, cols);
            activation_reduce(
                &sq,
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
        // rstd = rsqrt(sumsq / D + eps), in place.
        tensor_scalar(&rstd, &rstd, BinOp::Multiply, 1.0 / d as f32).then(BinOp::Add, eps);
        activation(&rstd, ActFn::Rsqrt, &rstd, None, 1.0);
        // y = (x * rstd) * w, fp32 until the final write rounds to x's dtype (in place in xt).
        for &(c0, cols) in &chunks {
            let t = scratch.cols(0, cols);
            tensor_scalar(&t, xt.cols(c0, cols), BinOp::Multiply, &rstd);
            tensor_tensor(
                xt.cols(c0, cols),
                &t,
                w.rows(rows.size).cols(c0, cols),
                BinOp::Multiply,
            );
        }
        dma_copy(ov.clone().rows(rows.start.clone(), rows.size), &xt);
        dma_copy(rv.clone().rows(rows.start, rows.size), &rstd);
    });
    (out, rstd_out)
}

/// Gradients of `rmsnorm` from the saved `rstd` (`x̂ = x · rstd`, `ĝ = grad_y · weight`):
/// `grad_x = rstd · (ĝ − x̂ · mean(ĝ · x̂))` and `grad_weight = Σ_rows grad_y · x̂`.
///
/// `grad_x`: per 128-row tile, a first pass over 2048-column chunks accumulates `Σ ĝ·x̂` per row
/// in fp32, a second pass writes `grad_x` (chunks are reloaded only when a row spans more than
/// one). `grad_weight`: the reduction over rows crosses partitions, so it runs on the tensor
/// engine: a ones column as the stationary operand sums `grad_y · x̂` over each row tile into
/// fp32 PSUM banks, 4096 columns (eight banks) at a time.
#[kernel(
    shape(grad_y = [..B, D], x = [..B, D], weight = [D], rstd = [..B])
        -> (grad_x = [..B, D], grad_weight = [D]),
    dtype(grad_y in {f32, bf16, f16}, x = grad_y, weight = grad_y, rstd in {f32}) -> (grad_y, grad_y),
    require(D <= 16384),
    tolerance(reduction(D)),
)]
pub fn rmsnorm_backward(grad_y: &Hbm, x: &Hbm, weight: &Hbm, rstd: &Hbm) -> (Hbm, Hbm) {
    let (n, d) = rows_of(x);
    let dt = x.dtype();
    let grad_x = shared_hbm(x.shape(), dt);
    let grad_w = shared_hbm(&[d], dt);
    let (gv, xv, dxv, rv) = (
        grad_y.reshape(&[n, d]),
        x.reshape(&[n, d]),
        grad_x.reshape(&[n, d]),
        rstd.reshape(&[n, 1]),
    );
    let chunks = column_chunks(d);
    let p = n.min(PMAX);
    // x̂ and ĝ of one chunk of one row tile, in fp32.
    let load_chunk = |rows: &TileSpan, r: &Tile, (c0, cols): (usize, usize)| -> (Tile, Tile) {
        let (xt, gt, wt) = (
            sbuf([rows.size, cols], dt),
            sbuf([rows.size, cols], dt),
            sbuf([rows.size, cols], dt),
        );
        dma_copy(
            &xt,
            xv.clone()
                .rows(rows.start.clone(), rows.size)
                .cols(c0, cols),
        );
        dma_copy(
            &gt,
            gv.clone()
                .rows(rows.start.clone(), rows.size)
                .cols(c0, cols),
        );
        dma_copy(
            &wt,
            weight
                .reshape(&[1, d])
                .cols(c0, cols)
                .broadcast_to(&[rows.size, cols]),
        );
        let (xhat, ghat) = (
            sbuf([rows.size, cols], DType::F32),
            sbuf([rows.size, cols], DType::F32),
        );
        tensor_scalar(&xhat, &xt, BinOp::Multiply, r);
        tensor_tensor(&ghat, &gt, &wt, BinOp::Multiply);
        (xhat, ghat)
    };
    for_each_tile(n, PMAX, |rows| {
        let r = sbuf([rows.size, 1], DType::F32);
        dma_copy(&r, rv.clone().rows(rows.start.clone(), rows.size));
        // dot = Σ_D ĝ·x̂ per row.
        let dot = sbuf([rows.size, 1], DType::F32);
        memset(&dot, 0.0);
        let mut kept = None;
        for &chunk in &chunks {
            let (xhat, ghat) = load_chunk(&rows, &r, chunk);
            let prod = sbuf([rows.size, chunk.1], DType::F32);
            let part = sbuf([rows.size, 1], DType::F32);
            tensor_tensor(&prod, &ghat, &xhat, BinOp::Multiply);
            tensor_reduce(&part, BinOp::Add, &prod, 1, false);
            tensor_tensor(&dot, &dot, &part, BinOp::Add);
            if chunks.len() == 1 {
                kept = Some((xhat, ghat));
            }
        }
        // coef = dot / D; grad_x = (ĝ − x̂ · coef) · rstd.
        let coef = sbuf([rows.size, 1], DType::F32);
        tensor_scalar(&coef, &dot, BinOp::Multiply, 1.0 / d as f32);
        for &chunk in &chunks {
            let (xhat, ghat) = match kept.take() {
                Some(t) => t,
                None => load_chunk(&rows, &r, chunk),
            };
            tensor_scalar(&xhat, &xhat, BinOp::Multiply, &coef);
            tensor_tensor(&ghat, &ghat, &xhat, BinOp::Subtract);
            let dx = sbuf([rows.size, chunk.1], dt);
            tensor_scalar(&dx, &ghat, BinOp::Multiply, &r);
            dma_copy(
                dxv.clone()
                    .rows(rows.start.clone(), rows.size)
                    .cols(chunk.0, chunk.1),
                &dx,
            );
        }
    });
    // grad_weight[c] = Σ_rows grad_y[row, c] · x̂[row, c], on the tensor engine.
    let ones = sbuf([p, 1], DType::F32);
    memset(&ones, 1.0);
    for_each_tile(d, WEIGHT_BLOCK, |blk| {
        let banks: Vec<(usize, usize)> = (0..blk.size)
            .step_by(PSUM_BANK_FMAX)
            .map(|c0| (c0, PSUM_BANK_FMAX.min(blk.size - c0)))
            .collect();
        let accs: Vec<Tile> = banks
            .iter()
            .map(|&(_, w)| psum([1, w], DType::F32))
            .collect();
        for acc in &accs {
            memset(acc, 0.0);
        }
        for_each_tile(n, PMAX, |rows| {
            let r = sbuf([rows.size, 1], DType::F32);
            dma_copy(&r, rv.clone().rows(rows.start.clone(), rows.size));
            let (xt, gt) = (
                sbuf([rows.size, blk.size], dt),
                sbuf([rows.size, blk.size], dt),
            );
            dma_copy(
                &xt,
                xv.clone()
                    .rows(rows.start.clone(), rows.size)
                    .cols(blk.start.clone(), blk.size),
            );
            dma_copy(
                &gt,
                gv.clone()
                    .rows(rows.start.clone(), rows.size)
                    .cols(blk.start.clone(), blk.size),
            );
            let m = sbuf([rows.size, blk.size], DType::F32);
            tensor_scalar(&m, &xt, BinOp::Multiply, &r);
            tensor_tensor(&m, &m, &gt, BinOp::Multiply);
            for (acc, &(c0, w)) in accs.iter().zip(&banks) {
                nc_matmul(acc, ones.rows(rows.size), m.cols(c0, w), true);
            }
        });
        for (acc, &(c0, w)) in accs.iter().zip(&banks) {
            let res = sbuf([1, w], dt);
            tensor_copy(&res, acc);
            dma_copy(
                grad_w.reshape(&[1, d]).cols(blk.start.clone() + c0, w),
                &res,
            );
        }
    });
    (grad_x, grad_w)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nki_core::testing::*;

    fn reference(x: &[f32], w: &[f32], d: usize, eps: f32) -> Vec<f32> {
        x.chunks(d)
            .flat_map(|row| {
                let ms = row.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / d as f64;
                let r = 1.0 / (ms + eps as f64).sqrt();
                row.iter()
                    .zip(w)
                    .map(move |(v, w)| (*v as f64 * r * *w as f64) as f32)
            })
            .collect()
    }

    fn arr(shape: &[usize], seed: usize) -> HostArray {
        let n: usize = shape.iter().product();
        HostArray::new(
            shape,
            DType::F32,
            (0..n).map(|i| (((i + seed) * 7919) % 1000) as f32 / 500.0 - 1.0),
        )
    }

    #[test]
    fn matches_reference_on_a_ragged_row_count_and_saves_rstd() {
        let (n, d) = (300, 96);
        let x = arr(&[3, n / 3, d], 0);
        let w = HostArray::new(&[d], DType::F32, (0..d).map(|i| 0.5 + i as f32 / d as f32));
        let y = run_kernel(
            &RMSNORM_KERNEL,
            &[x.clone(), w.clone()],
            &[ScalarValue::Float(1e-6)],
            Target::Trn2,
        )
        .unwrap();
        assert_eq!(
            (y[0].shape.clone(), y[1].shape.clone()),
            (vec![3, 100, d], vec![3, 100])
        );
        for (a, b) in y[0]
            .values
            .iter()
            .zip(reference(&x.values, &w.values, d, 1e-6))
        {
            assert!((a - b).abs() <= 1e-5 + 1e-5 * b.abs(), "{a} vs {b}");
        }
        let row0 = &x.values[..d];
        let ms = row0.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / d as f64;
        assert!((y[1].values[0] as f64 - 1.0 / (ms + 1e-6).sqrt()).abs() < 1e-5);
    }

    /// The backward against finite-difference-free closed forms in f64.
    fn check_backward(n: usize, d: usize) {
        let (g, x) = (arr(&[n, d], 3), arr(&[n, d], 11));
        let w = HostArray::new(&[d], DType::F32, (0..d).map(|i| 0.5 + (i % 7) as f32 / 7.0));
        let fwd = run_kernel(
            &RMSNORM_KERNEL,
            &[x.clone(), w.clone()],
            &[ScalarValue::Float(1e-6)],
            Target::Trn2,
        )
        .unwrap();
        let rstd = fwd[1].clone();
        let out = run_kernel(
            &RMSNORM_BACKWARD_KERNEL,
            &[g.clone(), x.clone(), w.clone(), rstd.clone()],
            &[],
            Target::Trn2,
        )
        .unwrap();
        let mut gw = vec![0f64; d];
        for i in 0..n {
            let r = rstd.values[i] as f64;
            let row = |v: &[f32], j: usize| v[i * d + j] as f64;
            let dot: f64 = (0..d)
                .map(|j| row(&g.values, j) * w.values[j] as f64 * row(&x.values, j) * r)
                .sum();
            for (j, gw_j) in gw.iter_mut().enumerate() {
                let xhat = row(&x.values, j) * r;
                let want = r * (row(&g.values, j) * w.values[j] as f64 - xhat * dot / d as f64);
                let got = out[0].values[i * d + j] as f64;
                assert!(
                    (got - want).abs() < 1e-4 * (1.0 + want.abs()),
                    "dx[{i},{j}] {got} vs {want}"
                );
                *gw_j += row(&g.values, j) * xhat;
            }
        }
        for (j, (got, want)) in out[1].values.iter().zip(&gw).enumerate() {
            let got = *got as f64;
            assert!(
                (got - want).abs() < 1e-4 * (1.0 + want.abs()),
                "dw[{j}] {got} vs {want}"
            );
        }
    }

    #[test]
    fn backward_matches_closed_forms() {
        check_backward(130, 96);
        check_backward(3, 4500); // three column chunks, two grad_weight blocks
    }

    #[test]
    fn widest_row_fits_trn2_sbuf_and_the_contract_stops_wider_ones() {
        let sig = |d: u64| {
            nki_core::Signature::new(
                &[(&[256, d], DType::F32), (&[d], DType::F32)],
                &[ScalarValue::Float(1e-6)],
                Target::Trn2,
            )
        };
        let program = RMSNORM_KERNEL
            .check(&sig(16384))
            .and_then(|c| c.trace())
            .unwrap();
        nki_core::validate::validate(&program).unwrap();
        let err = RMSNORM_KERNEL.check(&sig(16385)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "neuron::rmsnorm: the contract requires D <= 16384, but D = 16385"
        );
    }
}
