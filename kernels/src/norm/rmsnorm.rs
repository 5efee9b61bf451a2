//! RMSNorm and the fused residual add + RMSNorm of Llama-style decoder layers, forward and
//! backward.

use super::{AffineGrads, affine_gradients, broadcast_weight, chunk_of, few_rows, reciprocal_rms};
use crate::tiling::{CHUNK, column_chunks, fill_zeros, for_each_row_tile, rows_of};
use nki_core::prelude::*;

/// RMSNorm over the last dim: `x * rsqrt(mean(x²) + eps) * weight`, for `x` of any rank ≥ 1
/// (LlamaRMSNorm's `[B, S, H]` directly).
///
/// Rows (all leading dims flattened) are tiled 128 to the partitions with a ragged last tile;
/// the whole row stays on the free dim. A few long rows (up to 32, `D` a multiple of 128: a
/// decode step) spread their columns across the partitions instead (`few_rows`). The weight is loaded once, broadcast across
/// partitions. Statistics are computed in fp32 on the scalar engine (square with a free-dim sum
/// reduction, 2048 columns at a time so the fp32 scratch stays small: an f32 row of 16384 fits
/// Trn1's SBUF); the result is rounded once to the input dtype. `rstd = rsqrt(mean(x²) + eps)`
/// per row is saved in fp32 for the backward.
#[kernel(
    shape(x = [..B, D], weight = [D]) -> (y = [..B, D], saved rstd = [..B]),
    dtype(x in {f32, bf16, f16}, weight = x) -> (x, f32),
    require(D >= 1, D <= 16384),
    backward(rmsnorm_backward, saves(x, weight, rstd)),
    shard(whole(D)),
    replaces("torch.nn.RMSNorm", "*RMSNorm"),
    reference("(x.float() * torch.rsqrt(x.float().pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight"),
    sample(x = [130, 96], weight = [96]),
    sample(x = [300, 1000], weight = [1000]),
    sample(x = [2, 65, 96], weight = [96], eps = 1e-5),
    sample(x = [1, 1], weight = [1]),
    sample(x = [7], weight = [7]),
    sample(x = [3, 256], weight = [256]),
    tolerance(reduction(D)),
    autocast(promote),
    bench(x = [8192, 4096], weight = [4096]),
)]
pub fn rmsnorm(x: &Hbm, weight: &Hbm, #[default(1e-6)] eps: f32) -> (Hbm, Hbm) {
    let (n, d) = rows_of(x);
    let out = shared_hbm(x.shape(), x.dtype());
    let rstd_out = shared_hbm(&x.shape()[..x.shape().len() - 1], DType::F32);
    if few_rows::spreads(n, d) {
        rmsnorm_few_rows(x, weight, eps, &out, &rstd_out);
        return (out, rstd_out);
    }
    let (xv, ov, rv) = (
        x.reshape(&[n, d]),
        out.reshape(&[n, d]),
        rstd_out.reshape(&[n, 1]),
    );
    let w = broadcast_weight(weight, n, d);
    for_each_program_tile(n, PMAX, |rows| {
        let xt = sbuf([rows.size, d], x.dtype());
        dma_copy(&xt, xv.clone().rows(rows.start.clone(), rows.size));
        let rstd = normalize_in_place(&xt, &w, eps);
        dma_copy(ov.clone().rows(rows.start.clone(), rows.size), &xt);
        dma_copy(rv.clone().rows(rows.start, rows.size), &rstd);
    });
    (out, rstd_out)
}

/// `rmsnorm` of a few long rows, their columns spread across the partitions ([`few_rows`]):
/// per row, `Σ x²` from each partition's share totalled by the ones matmul, `rstd` from it, and
/// `x · rstd · w` written back in the same layout.
fn rmsnorm_few_rows(x: &Hbm, weight: &Hbm, eps: f32, out: &Hbm, rstd_out: &Hbm) {
    let (n, d) = rows_of(x);
    let c = d / PMAX;
    let w = few_rows::spread_vector(weight, d);
    let ones = few_rows::ones();
    few_rows::for_each_row_group(n, |rows| {
        let m = rows.size;
        let xt = sbuf([PMAX, m * c], x.dtype());
        dma_copy(&xt, few_rows::spread_rows(x, &rows, d));
        let (sums, sums_rows) = few_rows::row_totals(&xt, m, ActFn::Square, None, &ones);
        let (rstd, rstd_rows) = (sbuf([PMAX, m], DType::F32), sbuf([m, 1], DType::F32));
        for (t, sum) in [(&rstd, &sums), (&rstd_rows, &sums_rows)] {
            tensor_scalar(t, sum, BinOp::Multiply, 1.0 / d as f32).then(BinOp::Add, eps);
            activation(t, ActFn::Rsqrt, t, None, 1.0);
        }
        dma_copy(few_rows::row_statistic(rstd_out, &rows), &rstd_rows);
        for r in 0..m {
            scalar_tensor_tensor(
                xt.cols(r * c, c),
                xt.cols(r * c, c),
                BinOp::Multiply,
                rstd.cols(r, 1),
                BinOp::Multiply,
                &w,
            );
        }
        dma_copy(few_rows::spread_rows(out, &rows, d), &xt);
    });
}

/// The fused residual add and RMSNorm of a Llama-style decoder layer:
/// `h = x + residual` (rounded to the input dtype, as the eager model does) and
/// `y = rmsnorm(h, weight, eps)`, for inputs of any rank ≥ 1.
///
/// Each row tile is read once: `x` whole, `residual` a 2048-column chunk at a time added into
/// it, `h` stored, then normalised in place exactly as `rmsnorm` does. Saves the fp32 `rstd`
/// per row for the backward.
#[kernel(
    shape(x = [..B, D], residual = [..B, D], weight = [D])
        -> (h = [..B, D], y = [..B, D], saved rstd = [..B]),
    dtype(x in {f32, bf16, f16}, residual = x, weight = x) -> (x, x, f32),
    require(D >= 1, D <= 16384),
    backward(add_rmsnorm_backward, saves(h, weight, rstd)),
    shard(whole(D)),
    replaces("rmsnorm(x + residual)"),
    reference("(x + residual, ((x + residual).to(dtype).float() * torch.rsqrt((x + residual).to(dtype).float().pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight)"),
    sample(x = [130, 96], residual = [130, 96], weight = [96]),
    sample(x = [2, 65, 300], residual = [2, 65, 300], weight = [300], eps = 1e-5),
    sample(x = [3, 4500], residual = [3, 4500], weight = [4500], dtypes = {f32}),
    sample(x = [1, 1], residual = [1, 1], weight = [1]),
    sample(x = [7], residual = [7], weight = [7]),
    tolerance(reduction(D)),
    autocast(promote),
    bench(x = [8192, 4096], residual = [8192, 4096], weight = [4096]),
)]
pub fn add_rmsnorm(
    x: &Hbm,
    residual: &Hbm,
    weight: &Hbm,
    #[default(1e-6)] eps: f32,
) -> (Hbm, Hbm, Hbm) {
    let (n, d) = rows_of(x);
    let dt = x.dtype();
    let h_out = shared_hbm(x.shape(), dt);
    let y_out = shared_hbm(x.shape(), dt);
    let rstd_out = shared_hbm(&x.shape()[..x.shape().len() - 1], DType::F32);
    let [xv, resv, hv, yv] = [x, residual, &h_out, &y_out].map(|t| t.reshape(&[n, d]));
    let rv = rstd_out.reshape(&[n, 1]);
    let w = broadcast_weight(weight, n, d);
    let chunks = column_chunks(d);
    // `y` gets its own tile when it fits next to `h` (bf16 rows, most f32 ones), so normalising
    // does not wait for `h`'s store to finish reading the tile.
    let own_y =
        (3 * d * dt.size_bytes() + (CHUNK + 8) * 4) <= current_target().sbuf_bytes_per_partition();
    for_each_program_tile(n, PMAX, |rows| {
        let ht = sbuf([rows.size, d], dt);
        dma_copy(&ht, xv.clone().rows(rows.start.clone(), rows.size));
        for &(c0, cols) in &chunks {
            // A residual tile per chunk: the second load need not wait for the first add.
            let rt = sbuf([rows.size, cols], dt);
            dma_copy(&rt, chunk_of(&resv, &rows, c0, cols));
            tensor_tensor(ht.cols(c0, cols), ht.cols(c0, cols), &rt, BinOp::Add);
        }
        dma_copy(hv.clone().rows(rows.start.clone(), rows.size), &ht);
        let yt = if own_y {
            sbuf([rows.size, d], dt)
        } else {
            ht.clone()
        };
        let rstd = normalize_into(&yt, &ht, &w, eps);
        dma_copy(yv.clone().rows(rows.start.clone(), rows.size), &yt);
        dma_copy(rv.clone().rows(rows.start, rows.size), &rstd);
    });
    (h_out, y_out, rstd_out)
}

/// RMSNorm of the row tile `xt` in place (`xt · rstd · w`, fp32 until the write rounds to
/// `xt`'s dtype); returns `rstd = rsqrt(mean(x²) + eps)`, `[rows, 1]` fp32.
///
/// `sum(x²)` runs on the scalar engine, one 2048-column chunk at a time, so the fp32 scratch
/// stays one chunk wide.
fn normalize_in_place(xt: &Tile, w: &Tile, eps: f32) -> Tile {
    normalize_into(xt, xt, w, eps)
}

/// RMSNorm of the row tile `xt` into `dst` (`xt` itself, or a tile of its shape and dtype);
/// returns `rstd`, as [`normalize_in_place`].
fn normalize_into(dst: &Tile, xt: &Tile, w: &Tile, eps: f32) -> Tile {
    let [rows, d] = xt.shape();
    let rstd = reciprocal_rms(xt, eps);
    // (x · rstd) · w in one vector instruction, fp32 inside and rounded once: the row tile, the
    // weight and the result are all in the input dtype, so it streams at the 16-bit rate.
    for (c0, cols) in column_chunks(d) {
        scalar_tensor_tensor(
            dst.cols(c0, cols),
            xt.cols(c0, cols),
            BinOp::Multiply,
            &rstd,
            BinOp::Multiply,
            w.rows(rows).cols(c0, cols),
        );
    }
    rstd
}

/// Gradients of `rmsnorm` from the saved `rstd` (`x̂ = x · rstd`, `ĝ = grad_y · weight`):
/// `grad_x = rstd · (ĝ − x̂ · mean(ĝ · x̂))` and `grad_weight = Σ_rows grad_y · x̂`.
///
/// Rows up to 4096 columns take one pass over `x` and `grad_y` (see the `one_pass`
/// module): the weight gradient accumulates in PSUM across row tiles, with each tile's `rstd`
/// as the stationary operand of a matmul over `grad_y · x`, and the elementwise passes are
/// spread over the vector, scalar and GpSimd engines. Longer rows: per 128-row tile, a first
/// pass over 2048-column chunks accumulates `Σ ĝ·x̂` per row in fp32, a second pass writes
/// `grad_x` (chunks are reloaded when a row spans more than one), and `grad_weight` is a
/// second pass of its own: a ones column as the stationary operand sums `grad_y · x̂` over each
/// row tile into fp32 PSUM banks, 4096 columns (eight banks) at a time.
#[kernel(
    shape(grad_y = [..B, D], x = [..B, D], weight = [D], rstd = [..B])
        -> (grad_x = [..B, D], grad_weight = [D]),
    dtype(grad_y in {f32, bf16, f16}, x = grad_y, weight = grad_y, rstd in {f32}) -> (grad_y, grad_y),
    require(D >= 1, D <= 16384),
    shard(whole(D)),
    tolerance(reduction(D)),
)]
pub fn rmsnorm_backward(grad_y: &Hbm, x: &Hbm, weight: &Hbm, rstd: &Hbm) -> (Hbm, Hbm) {
    let grad_x = shared_hbm(x.shape(), x.dtype());
    let grad_w = normalize_backward(grad_y, None, x, weight, rstd, &[&grad_x]);
    (grad_x, grad_w)
}

/// Gradients of `add_rmsnorm`: the gradient reaching `h` is `grad_h` plus RMSNorm's
/// `grad_x` (as in `rmsnorm_backward`, from the saved `h` and `rstd`), and both `x` and
/// `residual` receive it; `grad_weight = Σ_rows grad_y · ĥ`.
#[kernel(
    shape(grad_h = [..B, D], grad_y = [..B, D], h = [..B, D], weight = [D], rstd = [..B])
        -> (grad_x = [..B, D], grad_residual = [..B, D], grad_weight = [D]),
    dtype(grad_h in {f32, bf16, f16}, grad_y = grad_h, h = grad_h, weight = grad_h, rstd in {f32})
        -> (grad_h, grad_h, grad_h),
    require(D >= 1, D <= 16384),
    shard(whole(D)),
    tolerance(reduction(D)),
)]
pub fn add_rmsnorm_backward(
    grad_h: &Hbm,
    grad_y: &Hbm,
    h: &Hbm,
    weight: &Hbm,
    rstd: &Hbm,
) -> (Hbm, Hbm, Hbm) {
    let grad_x = shared_hbm(h.shape(), h.dtype());
    let grad_residual = shared_hbm(h.shape(), h.dtype());
    let grad_w = normalize_backward(
        grad_y,
        Some(grad_h),
        h,
        weight,
        rstd,
        &[&grad_x, &grad_residual],
    );
    (grad_x, grad_residual, grad_w)
}

/// The body of both RMSNorm backwards: writes `rstd · (ĝ − x̂ · mean(ĝ · x̂))` (plus `extra`,
/// the gradient reaching `x` directly, when given) to every tensor of `grad_x_outs`, and
/// returns `grad_weight`.
fn normalize_backward(
    grad_y: &Hbm,
    extra: Option<&Hbm>,
    x: &Hbm,
    weight: &Hbm,
    rstd: &Hbm,
    grad_x_outs: &[&Hbm],
) -> Hbm {
    let (n, d) = rows_of(x);
    if super::one_pass::fits(d) {
        return super::one_pass::run(&super::one_pass::Operands {
            grad_y,
            extra,
            x,
            weight: Some(weight),
            mean: None,
            rstd,
            grad_x_outs,
            with_bias: false,
        })
        .0;
    }
    let dt = x.dtype();
    let grad_w = shared_hbm(&[d], dt);
    if n == 0 {
        // An empty batch: `grad_x` is empty and the weight gradient, a sum over rows, zeros.
        fill_zeros(&grad_w);
        return grad_w;
    }
    let (gv, xv, rv) = (
        grad_y.reshape(&[n, d]),
        x.reshape(&[n, d]),
        rstd.reshape(&[n, 1]),
    );
    let ev = extra.map(|e| e.reshape(&[n, d]));
    let dxvs: Vec<HbmView> = grad_x_outs.iter().map(|t| t.reshape(&[n, d])).collect();
    let chunks = column_chunks(d);
    // x̂ and ĝ of one chunk of one row tile, in fp32.
    let load_chunk = |rows: &TileSpan, r: &Tile, (c0, cols): (usize, usize)| -> (Tile, Tile) {
        let (xt, gt, wt) = (
            sbuf([rows.size, cols], dt),
            sbuf([rows.size, cols], dt),
            sbuf([rows.size, cols], dt),
        );
        dma_copy(&xt, chunk_of(&xv, rows, c0, cols));
        dma_copy(&gt, chunk_of(&gv, rows, c0, cols));
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
    for_each_row_tile(n, |rows| {
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
        // coef = dot / D; grad_x = (ĝ − x̂ · coef) · rstd (+ extra).
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
            match &ev {
                Some(ev) => {
                    let et = sbuf([rows.size, chunk.1], dt);
                    dma_copy(&et, chunk_of(ev, &rows, chunk.0, chunk.1));
                    tensor_scalar(&ghat, &ghat, BinOp::Multiply, &r);
                    tensor_tensor(&dx, &ghat, &et, BinOp::Add);
                }
                None => {
                    tensor_scalar(&dx, &ghat, BinOp::Multiply, &r);
                }
            }
            for dxv in &dxvs {
                dma_copy(chunk_of(dxv, &rows, chunk.0, chunk.1), &dx);
            }
        }
    });
    affine_gradients(&AffineGrads {
        grad_y: &gv,
        x: &xv,
        mean: None,
        rstd: &rv,
        grad_weight: Some(&grad_w),
        grad_bias: None,
    });
    grad_w
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
    fn add_rmsnorm_is_the_residual_add_then_rmsnorm_forward_and_backward() {
        let (n, d) = (130, 96);
        let (x, res, g_h, g_y) = (
            arr(&[n, d], 1),
            arr(&[n, d], 5),
            arr(&[n, d], 9),
            arr(&[n, d], 13),
        );
        let w = HostArray::new(&[d], DType::F32, (0..d).map(|i| 0.5 + (i % 5) as f32 / 5.0));
        let eps = [ScalarValue::Float(1e-6)];
        let fused = run_kernel(
            &ADD_RMSNORM_KERNEL,
            &[x.clone(), res.clone(), w.clone()],
            &eps,
            Target::Trn2,
        )
        .unwrap();
        let h = HostArray::new(
            &[n, d],
            DType::F32,
            x.values.iter().zip(&res.values).map(|(a, b)| a + b),
        );
        let plain =
            run_kernel(&RMSNORM_KERNEL, &[h.clone(), w.clone()], &eps, Target::Trn2).unwrap();
        assert_eq!(fused[0].values, h.values);
        assert_eq!(fused[1].values, plain[0].values);
        assert_eq!(fused[2].values, plain[1].values);
        let grads = run_kernel(
            &ADD_RMSNORM_BACKWARD_KERNEL,
            &[
                g_h.clone(),
                g_y.clone(),
                h.clone(),
                w.clone(),
                plain[1].clone(),
            ],
            &[],
            Target::Trn2,
        )
        .unwrap();
        let norm = run_kernel(
            &RMSNORM_BACKWARD_KERNEL,
            &[g_y, h, w, plain[1].clone()],
            &[],
            Target::Trn2,
        )
        .unwrap();
        for (i, (got, (a, b))) in grads[0]
            .values
            .iter()
            .zip(norm[0].values.iter().zip(&g_h.values))
            .enumerate()
        {
            assert!(
                (got - (a + b)).abs() <= 1e-6 * (1.0 + got.abs()),
                "dx[{i}] {got} vs {}",
                a + b
            );
        }
        assert_eq!(grads[0].values, grads[1].values);
        assert_eq!(grads[2].values, norm[1].values);
    }

    #[test]
    fn backward_matches_closed_forms() {
        check_backward(130, 96);
        check_backward(3, 4500); // three column chunks, two grad_weight blocks
        check_backward(65 * PMAX + 3, 40); // two pipeline groups of the one-pass path, a ragged tail
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
