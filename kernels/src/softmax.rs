//! Softmax and log-softmax over the last dimension, forward and backward.
//!
//! Rows (every leading dim flattened) are tiled 128 to the partitions; each row is processed in
//! 2048-column chunks, so any `D` fits in SBUF. The forward is the online (one-pass) form of
//! the max-subtracted softmax: per chunk the running row maximum is updated and the chunk's
//! `Σ exp(x − max)` taken against it (the exponential and its row sum are one
//! `activation_reduce` on the scalar engine, the max subtracted through its per-row bias); the
//! chunks' sums are rescaled to the final maximum once at the end. A second pass writes
//! `exp(x − max) / sum` (the exponential on the scalar engine, the scaling on the vector
//! engine); when a row's fp32 exponentials fit 32 KiB per partition, softmax keeps them from the
//! first pass and only rescales them. Statistics are fp32; each output is rounded once to the
//! input dtype. Rows up to 32 KiB per partition stay in SBUF between the passes.

use crate::tiling::{column_chunks, keeps_rows, rows_of};
use nki_core::prelude::*;

/// Loads columns `c0..c0+cols` of a row tile.
pub(crate) fn load(
    view: &HbmView,
    rows: &TileSpan,
    (c0, cols): (usize, usize),
    dtype: DType,
) -> Tile {
    let t = sbuf([rows.size, cols], dtype);
    dma_copy(
        &t,
        view.clone()
            .rows(rows.start.clone(), rows.size)
            .cols(c0, cols),
    );
    t
}

/// Stores a tile into columns `c0..c0+cols` of a row tile.
fn store(view: &HbmView, rows: &TileSpan, (c0, cols): (usize, usize), t: &Tile) {
    dma_copy(
        view.clone()
            .rows(rows.start.clone(), rows.size)
            .cols(c0, cols),
        t,
    );
}

/// `total (+)= Σ data` per row, fp32: the first chunk writes `total`, later ones add to it.
fn add_row_sum(total: &Tile, data: &TileRegion, first: bool) {
    if first {
        tensor_reduce(total, BinOp::Add, data, 1, false);
    } else {
        let part = sbuf([data.np, 1], DType::F32);
        tensor_reduce(&part, BinOp::Add, data, 1, false);
        tensor_tensor(total, total, &part, BinOp::Add);
    }
}

/// Per-row statistics of the online softmax: `neg_max = −max(x)` and
/// `sum = Σ exp(x − max)`, both `[rows, 1]` fp32. Returns each chunk's tile when the whole row
/// fits [`KEEP_ROW_BYTES`] (so the second pass need not reload it), `None`s otherwise.
fn row_statistics(
    xv: &HbmView,
    rows: &TileSpan,
    chunks: &[(usize, usize)],
    dtype: DType,
) -> (Tile, Tile, Vec<Option<Tile>>) {
    let d: usize = chunks.iter().map(|c| c.1).sum();
    let keep = keeps_rows(d, dtype, 1);
    let mut kept = vec![None; chunks.len()];
    let (neg_max, sum) = online_statistics(xv, rows, chunks, dtype, |i, xt| {
        if keep {
            kept[i] = Some(xt.clone());
        }
    });
    (neg_max, sum, kept)
}

/// The online max and sum of [`row_statistics`] over the chunks of one row tile, calling
/// `visit(i, chunk_tile)` on each loaded chunk after its statistics are taken (cross-entropy
/// picks its target logit there; the visitor may overwrite the tile).
pub(crate) fn online_statistics(
    xv: &HbmView,
    rows: &TileSpan,
    chunks: &[(usize, usize)],
    dtype: DType,
    mut visit: impl FnMut(usize, &Tile),
) -> (Tile, Tile) {
    let stats = online_statistics_into(xv, rows, chunks, dtype, None, &mut visit);
    (stats.neg_max, stats.sum)
}

/// What [`online_statistics_into`] leaves: the row statistics, and per chunk the running `−max`
/// its exponentials were taken against.
pub(crate) struct OnlineStats {
    /// `−max(x)` per row, `[rows, 1]` fp32.
    pub(crate) neg_max: Tile,
    /// `Σ exp(x − max)` per row, `[rows, 1]` fp32.
    pub(crate) sum: Tile,
    /// Column i: the running `−max` after chunk i, `[rows, chunks]` fp32.
    pub(crate) neg_maxes: Tile,
}

/// [`online_statistics`], writing chunk i's `exp(x − running max)` into `exps[i]` (fp32,
/// `[rows, chunk width]`) when given, for a caller that rescales them instead of exponentiating
/// again.
pub(crate) fn online_statistics_into(
    xv: &HbmView,
    rows: &TileSpan,
    chunks: &[(usize, usize)],
    dtype: DType,
    exps: Option<&[Tile]>,
    mut visit: impl FnMut(usize, &Tile),
) -> OnlineStats {
    let (r, k) = (rows.size, chunks.len());
    // Column i: the running −max after chunk i, and Σ exp(x + that) over chunk i. Each chunk's
    // sum is taken against the running max as it stood and rescaled once at the end, so the
    // vector engine never waits for the scalar engine's sum of the previous chunk.
    let neg_maxes = sbuf([r, k], DType::F32);
    let sums = sbuf([r, k], DType::F32);
    // Where each chunk's exponentials go: the caller's tiles, or one shared scratch tile.
    let exp_dsts: Vec<TileRegion> = match exps {
        Some(tiles) => tiles.iter().map(Tile::region).collect(),
        None => {
            let scratch = sbuf([r, chunks[0].1], DType::F32);
            chunks
                .iter()
                .map(|&(_, cols)| scratch.cols(0, cols))
                .collect()
        }
    };
    for (i, &chunk) in chunks.iter().enumerate() {
        let xt = load(xv, rows, chunk, dtype);
        let neg_max_i = neg_maxes.cols(i, 1);
        if i == 0 {
            tensor_reduce(neg_max_i.clone(), BinOp::Maximum, &xt, 1, true);
        } else {
            let chunk_neg_max = sbuf([r, 1], DType::F32);
            tensor_reduce(&chunk_neg_max, BinOp::Maximum, &xt, 1, true);
            let before = neg_maxes.cols(i - 1, 1);
            tensor_tensor(neg_max_i.clone(), before, &chunk_neg_max, BinOp::Minimum);
        }
        activation_reduce(
            exp_dsts[i].clone(),
            ActFn::Exp,
            &xt,
            BinOp::Add,
            sums.cols(i, 1),
            Some(neg_max_i),
            1.0,
        );
        visit(i, &xt);
    }
    let neg_max = sbuf([r, 1], DType::F32);
    tensor_copy(&neg_max, neg_maxes.cols(k - 1, 1));
    let sum = sbuf([r, 1], DType::F32);
    if k == 1 {
        tensor_copy(&sum, &sums);
    } else {
        // sum = Σ_i sums_i · exp(neg_max − neg_max_i).
        let rescale = sbuf([r, k], DType::F32);
        tensor_scalar(&rescale, &neg_maxes, BinOp::Subtract, &neg_max);
        activation(&rescale, ActFn::Exp, &rescale, None, -1.0);
        tensor_tensor(&rescale, &rescale, &sums, BinOp::Multiply);
        tensor_reduce(&sum, BinOp::Add, &rescale, 1, false);
    }
    OnlineStats {
        neg_max,
        sum,
        neg_maxes,
    }
}

/// Softmax over the last dim: `exp(x − max(x)) / Σ exp(x − max(x))`, for `x` of any rank ≥ 1,
/// in fp32 inside (see the module doc for the tiling).
#[kernel(
    shape(x = [..B, D]) -> y = [..B, D],
    dtype(x in {f32, bf16, f16}) -> x,
    backward(softmax_backward, saves(y)),
    shard(whole(D)),
    replaces("aten::_softmax", "torch.nn.Softmax"),
    reference("torch.softmax(x.float(), dim=-1).to(x.dtype)"),
    sample(x = [130, 96]),
    sample(x = [2, 65, 300]),
    sample(x = [3, 5000], dtypes = {f32, bf16}),
    sample(x = [1, 1]),
    sample(x = [7]),
    tolerance(reduction(D)),
    autocast(fp32),
    bench(x = [8192, 4096]),
)]
pub fn softmax(x: &Hbm) -> Hbm {
    let (n, d) = rows_of(x);
    let dt = x.dtype();
    let out = shared_hbm(x.shape(), dt);
    let (xv, ov) = (x.reshape(&[n, d]), out.reshape(&[n, d]));
    let chunks = column_chunks(d);
    // Rows whose fp32 exponentials fit the keep budget keep them from the statistics pass and
    // rescale them: one exponential per element on the scalar engine instead of two.
    let keep_exps = keeps_rows(d, DType::F32, 1);
    for_each_program_tile(n, PMAX, |rows| {
        if keep_exps {
            rescaled_softmax(&xv, &ov, &rows, &chunks, dt);
            return;
        }
        let (neg_max, sum, mut kept) = row_statistics(&xv, &rows, &chunks, dt);
        // y = exp(x − max) · (1 / sum): `x − max` is exact near the maximum, where the mass is
        // (folding `− log(sum)` into the exponent would round it at the logits' magnitude).
        let inv = sbuf([rows.size, 1], DType::F32);
        activation(&inv, ActFn::Reciprocal, &sum, None, 1.0);
        for (i, &chunk) in chunks.iter().enumerate() {
            let xt = kept[i]
                .take()
                .unwrap_or_else(|| load(&xv, &rows, chunk, dt));
            // Each chunk its own fp32 tile, so the next exponential need not wait for this
            // chunk's multiply to read it.
            let e = sbuf([rows.size, chunk.1], DType::F32);
            activation(&e, ActFn::Exp, &xt, Some(neg_max.region()), 1.0);
            tensor_scalar(&xt, &e, BinOp::Multiply, &inv);
            store(&ov, &rows, chunk, &xt);
        }
    });
    out
}

/// One row tile of `softmax` from the statistics pass's exponentials: chunk i's `exp(x − mᵢ)`
/// (`mᵢ` the running max after it) times `exp(mᵢ − max) / sum`, one per-row factor per chunk on
/// the vector engine. For a single chunk `mᵢ` is the max and the factor is `1 / sum`, as
/// `exp(x − max) · (1 / sum)`; otherwise the product rounds once more in fp32.
fn rescaled_softmax(
    xv: &HbmView,
    ov: &HbmView,
    rows: &TileSpan,
    chunks: &[(usize, usize)],
    dt: DType,
) {
    let r = rows.size;
    let exps: Vec<Tile> = chunks
        .iter()
        .map(|&(_, cols)| sbuf([r, cols], DType::F32))
        .collect();
    let stats = online_statistics_into(xv, rows, chunks, dt, Some(&exps), |_, _| {});
    let inv = sbuf([r, 1], DType::F32);
    activation(&inv, ActFn::Reciprocal, &stats.sum, None, 1.0);
    // factors_i = exp(mᵢ − max) / sum = exp(−(neg_maxᵢ − neg_max)) · inv.
    let factors = sbuf([r, chunks.len()], DType::F32);
    if chunks.len() == 1 {
        tensor_copy(&factors, &inv);
    } else {
        tensor_scalar(&factors, &stats.neg_maxes, BinOp::Subtract, &stats.neg_max);
        activation(&factors, ActFn::Exp, &factors, None, -1.0);
        tensor_scalar(&factors, &factors, BinOp::Multiply, &inv);
    }
    for (i, (&chunk, e)) in chunks.iter().zip(&exps).enumerate() {
        let y = sbuf([r, chunk.1], dt);
        tensor_scalar(&y, e, BinOp::Multiply, factors.cols(i, 1));
        store(ov, rows, chunk, &y);
    }
}

/// Gradient of `softmax` from its output: `grad_x = y · (grad_y − Σ grad_y · y)` per row, the
/// row sum in fp32 (a first pass over the chunks), then the gradient chunk by chunk.
#[kernel(
    shape(grad_y = [..B, D], y = [..B, D]) -> grad_x = [..B, D],
    dtype(grad_y in {f32, bf16, f16}, y = grad_y) -> grad_y,
    shard(whole(D)),
    tolerance(reduction(D)),
)]
pub fn softmax_backward(grad_y: &Hbm, y: &Hbm) -> Hbm {
    let (n, d) = rows_of(y);
    let dt = y.dtype();
    let grad_x = shared_hbm(y.shape(), dt);
    let [gv, yv, dv] = [grad_y, y, &grad_x].map(|t| t.reshape(&[n, d]));
    let chunks = column_chunks(d);
    for_each_program_tile(n, PMAX, |rows| {
        let dot = sbuf([rows.size, 1], DType::F32);
        let keep = keeps_rows(d, dt, 2);
        let mut kept = vec![None; chunks.len()];
        for (i, &chunk) in chunks.iter().enumerate() {
            let (gt, yt) = (load(&gv, &rows, chunk, dt), load(&yv, &rows, chunk, dt));
            // The exact fp32 products on the vector engine. 16-bit rows sum them on the scalar
            // engine (a tile per chunk, so chunk i + 1's products need not wait for chunk i's
            // sum); fp32 rows, bound by DMA, in the same vector instruction: trn2 bench shape,
            // cost model 1.238 → 1.240 ms (88% either way), and one pass fewer for the CPU
            // simulator.
            let prod = sbuf([rows.size, chunk.1], DType::F32);
            let part = if i == 0 {
                dot.clone()
            } else {
                sbuf([rows.size, 1], DType::F32)
            };
            if dt == DType::F32 {
                scalar_tensor_tensor_reduce(
                    &prod,
                    &gt,
                    BinOp::Multiply,
                    1.0,
                    BinOp::Multiply,
                    &yt,
                    BinOp::Add,
                    &part,
                );
            } else {
                tensor_tensor(&prod, &gt, &yt, BinOp::Multiply);
                activation_reduce(&prod, ActFn::Identity, &prod, BinOp::Add, &part, None, 1.0);
            }
            if i > 0 {
                tensor_tensor(&dot, &dot, &part, BinOp::Add);
            }
            if keep {
                kept[i] = Some((gt, yt));
            }
        }
        for (i, &chunk) in chunks.iter().enumerate() {
            let (gt, yt) = kept[i]
                .take()
                .unwrap_or_else(|| (load(&gv, &rows, chunk, dt), load(&yv, &rows, chunk, dt)));
            // (grad_y − dot) · y in one instruction, fp32 inside, rounded once.
            scalar_tensor_tensor(&gt, &gt, BinOp::Subtract, &dot, BinOp::Multiply, &yt);
            store(&dv, &rows, chunk, &gt);
        }
    });
    grad_x
}

/// Log-softmax over the last dim: `x − max(x) − log Σ exp(x − max(x))`, for `x` of any rank
/// ≥ 1, in fp32 inside (the statistics as for `softmax`).
#[kernel(
    shape(x = [..B, D]) -> y = [..B, D],
    dtype(x in {f32, bf16, f16}) -> x,
    backward(log_softmax_backward, saves(y)),
    shard(whole(D)),
    replaces("aten::_log_softmax", "torch.nn.LogSoftmax"),
    reference("torch.log_softmax(x.float(), dim=-1).to(x.dtype)"),
    sample(x = [130, 96]),
    sample(x = [2, 65, 300]),
    sample(x = [3, 5000], dtypes = {f32, bf16}),
    sample(x = [1, 1]),
    sample(x = [7]),
    tolerance(reduction(D)),
    autocast(fp32),
    bench(x = [8192, 4096]),
)]
pub fn log_softmax(x: &Hbm) -> Hbm {
    let (n, d) = rows_of(x);
    let dt = x.dtype();
    let out = shared_hbm(x.shape(), dt);
    let (xv, ov) = (x.reshape(&[n, d]), out.reshape(&[n, d]));
    let chunks = column_chunks(d);
    for_each_program_tile(n, PMAX, |rows| {
        let (neg_max, sum, mut kept) = row_statistics(&xv, &rows, &chunks, dt);
        // shift = −max − log(sum), per row.
        let shift = sbuf([rows.size, 1], DType::F32);
        activation(&shift, ActFn::Log, &sum, None, 1.0);
        tensor_tensor(&shift, &neg_max, &shift, BinOp::Subtract);
        for (i, &chunk) in chunks.iter().enumerate() {
            let xt = kept[i]
                .take()
                .unwrap_or_else(|| load(&xv, &rows, chunk, dt));
            tensor_scalar(&xt, &xt, BinOp::Add, &shift);
            store(&ov, &rows, chunk, &xt);
        }
    });
    out
}

/// Gradient of `log_softmax` from its output: `grad_x = grad_y − exp(y) · Σ grad_y` per row
/// (the row sum in fp32 first, then the gradient chunk by chunk).
#[kernel(
    shape(grad_y = [..B, D], y = [..B, D]) -> grad_x = [..B, D],
    dtype(grad_y in {f32, bf16, f16}, y = grad_y) -> grad_y,
    shard(whole(D)),
    tolerance(reduction(D)),
)]
pub fn log_softmax_backward(grad_y: &Hbm, y: &Hbm) -> Hbm {
    let (n, d) = rows_of(y);
    let dt = y.dtype();
    let grad_x = shared_hbm(y.shape(), dt);
    let [gv, yv, dv] = [grad_y, y, &grad_x].map(|t| t.reshape(&[n, d]));
    let chunks = column_chunks(d);
    for_each_program_tile(n, PMAX, |rows| {
        let total = sbuf([rows.size, 1], DType::F32);
        let keep = keeps_rows(d, dt, 1);
        let mut kept = vec![None; chunks.len()];
        for (i, &chunk) in chunks.iter().enumerate() {
            let gt = load(&gv, &rows, chunk, dt);
            add_row_sum(&total, &gt.region(), i == 0);
            if keep {
                kept[i] = Some(gt);
            }
        }
        for (i, &chunk) in chunks.iter().enumerate() {
            let gt = kept[i]
                .take()
                .unwrap_or_else(|| load(&gv, &rows, chunk, dt));
            let yt = load(&yv, &rows, chunk, dt);
            // Each chunk its own fp32 tile: the next exponential need not wait for this one's
            // vector passes.
            let pc = sbuf([rows.size, chunk.1], DType::F32);
            // exp(y) · total, then grad_y − it.
            activation(&pc, ActFn::Exp, &yt, None, 1.0);
            tensor_scalar(&pc, &pc, BinOp::Multiply, &total);
            tensor_tensor(&gt, &gt, &pc, BinOp::Subtract);
            store(&dv, &rows, chunk, &gt);
        }
    });
    grad_x
}
