//! Cross-entropy over class logits, forward and backward.
//!
//! Rows are tiled 128 to the partitions and each row is read once, in 2048-column chunks, so
//! any vocabulary fits in SBUF (128k classes is 63 chunks). Per chunk the online softmax
//! statistics of [`crate::softmax`] are updated (row max on the vector engine, `exp` and its row
//! sum in one scalar-engine `activation_reduce`) and the target's logit is picked: on Trn2 and
//! newer one `range_select` keeps the element whose column is the row's target and max-reduces
//! the row (everything else is `-inf`); Trn1 has no `range_select`, so there an `iota` column
//! index is compared with the target and turned into a `±inf` clamp that a min and a max-reduce
//! apply. `lse − picked` is the row's loss; rows whose target is `ignore_index` give 0 (selected,
//! not multiplied, so a NaN in an ignored row stays out as in ATen) and are not counted. The
//! sum and the count of counted rows are reduced over the partitions by the tensor engine into
//! one PSUM accumulator across the row tiles (`ones[rows]ᵀ · [loss, valid]`); the row tiles are
//! split across the cores of a logical NeuronCore, whose partial sums are exchanged and added
//! in one order ([`crate::partials`]), so `mean` is `sum / count`, divided once after the
//! combine (NaN when every row is ignored, as ATen). The row `lse` and the count are saved for
//! the backward, which recomputes the softmax from `lse` in one pass.
//!
//! Targets arrive as int32 (torch's int64 is converted at the boundary with a range check);
//! the kernel declares them class indices in `[0, V)` or `ignore_index`, which the simulator
//! checks on the data. Engines compare them in fp32 (exact below 2^24); the contract takes
//! vocabularies up to 256k classes (`V <= 262144`, 128 chunks per row).

use crate::partials::{store_share, sum_row_shares};
use crate::softmax::{load, online_statistics};
use crate::tiling::column_chunks;
use nki_core::prelude::*;

/// How a row tile picks its target logit from each chunk.
enum Pick<'a> {
    /// Trn2 and newer: `range_select` of the columns in `[t, end)` (`end = t + 1`), max-reduced;
    /// the selected elements go to `selected`, which nothing reads.
    Select { end: Tile, selected: Tile },
    /// Trn1: a `±inf` clamp built from the column index `iota` ([`target_clamp`]).
    Clamp { iota: &'a Tile },
}

/// The `±inf` clamp that keeps column `target` of a chunk starting at `c0` on Trn1:
/// `+inf` at the target, `-inf` elsewhere (`(iota == target − c0) − 0.5`, times `inf`).
fn target_clamp(iota: &Tile, t: &Tile, rows: usize, (c0, cols): (usize, usize)) -> Tile {
    let rel = sbuf([rows, 1], DType::F32);
    tensor_scalar(&rel, t, BinOp::Subtract, c0 as f32);
    let clamp = sbuf([rows, cols], DType::F32);
    tensor_scalar(
        &clamp,
        iota.region().slice(0, rows, 0, cols),
        BinOp::Equal,
        &rel,
    )
    .then(BinOp::Subtract, 0.5);
    tensor_scalar(&clamp, &clamp, BinOp::Multiply, f32::INFINITY);
    clamp
}

/// A constant `[128, cols]` tile holding each element's column index (Trn1's way to find a
/// column; `None` where `range_select` does it).
fn column_index(cols: usize, needed: bool) -> Option<Tile> {
    needed.then(|| {
        let t = sbuf([PMAX, cols], DType::F32);
        iota(&t, 0, 0, 1);
        t
    })
}

/// `dst = valid ? value : 0` per row, without multiplying (a NaN `value` of an ignored row must
/// not leak). `valid` is 1.0 or 0.0.
fn select_valid(dst: TileRegion, value: &Tile, valid: &Tile, trn1: bool) {
    if trn1 {
        // min(value, ±inf) then max(·, 0): value where valid, 0 elsewhere (value ≥ 0 here).
        let clamp = sbuf([valid.shape()[0], 1], DType::F32);
        tensor_scalar(&clamp, valid, BinOp::Subtract, 0.5).then(BinOp::Multiply, f32::INFINITY);
        tensor_tensor(dst.clone(), value, &clamp, BinOp::Minimum);
        tensor_scalar(dst.clone(), dst, BinOp::Maximum, 0.0);
    } else {
        // Column 0 (`0 + range_start`) is kept when 0 < valid.
        range_select(
            dst,
            value,
            BinOp::Less,
            BinOp::Less,
            valid,
            valid,
            None,
            BinOp::Maximum,
            0.0,
            0.0,
        );
    }
}

/// The row targets as fp32 `[rows, 1]`, and whether each is counted (`target != ignore_index`).
fn load_targets(target: &Hbm, rows: &TileSpan, ignore_index: i64) -> (Tile, Tile) {
    let n = target.dim(0);
    let ti = sbuf([rows.size, 1], DType::I32);
    dma_copy(
        &ti,
        target.reshape(&[n, 1]).rows(rows.start.clone(), rows.size),
    );
    let t = sbuf([rows.size, 1], DType::F32);
    tensor_copy(&t, &ti);
    let valid = sbuf([rows.size, 1], DType::F32);
    tensor_scalar(&valid, &t, BinOp::NotEqual, ignore_index as f32);
    (t, valid)
}

/// Cross-entropy of `logits[N, V]` against class indices `target[N]`, as
/// `F.cross_entropy(logits, target, ignore_index=..., reduction=...)`: per row
/// `logsumexp(logits) − logits[target]`, 0 for rows whose target is `ignore_index`; `"mean"`
/// averages over the counted rows, `"sum"` adds them, `"none"` returns one loss per row. fp32
/// inside, rounded once (see the module doc for the tiling).
#[kernel(
    shape(logits = [N, V], target = [N])
        -> (loss = match reduction { "none" => [N], _ => [] }, saved lse = [N], saved count = []),
    dtype(logits in {f32, bf16, f16}, target in {i32}) -> (logits, f32, f32),
    require(V >= 1, V <= 262144),
    backward(cross_entropy_backward, saves(logits, target, lse, count)),
    shard(whole(V), whole(N) if reduction == "mean"),
    replaces("aten::cross_entropy_loss", "torch.nn.CrossEntropyLoss"),
    reference("F.cross_entropy(logits.float(), target.long(), ignore_index=ignore_index, reduction=reduction).to(logits.dtype)"),
    sample(logits = [130, 300], target = [130]),
    sample(logits = [129, 300], target = [129], reduction = "sum"),
    sample(logits = [131, 300], target = [131], reduction = "none"),
    sample(logits = [3, 5000], target = [3], reduction = "none", dtypes = {f32, bf16}),
    sample(logits = [9, 4100], target = [9], dtypes = {f32, bf16}),
    sample(logits = [1, 1], target = [1]),
    sample(logits = [7, 33], target = [7], ignore_index = 5, reduction = "none"),
    tolerance(reduction(V)),
    autocast(fp32),
    bench(logits = [1024, 128256], target = [1024]),
)]
pub fn cross_entropy(
    logits: &Hbm,
    target: &Hbm,
    #[default(-100)] ignore_index: i64,
    #[default("mean")]
    #[choices("none", "mean", "sum")]
    reduction: &str,
) -> (Hbm, Hbm, Hbm) {
    let (n, v) = (logits.dim(0), logits.dim(1));
    target.require_indices(0..v as i64, Some(ignore_index));
    let dt = logits.dtype();
    let per_row = reduction == "none";
    let loss_shape: &[usize] = if per_row { &[n] } else { &[] };
    let loss = shared_hbm(loss_shape, dt);
    let lse_out = shared_hbm(&[n], DType::F32);
    let count = shared_hbm(&[], DType::F32);
    let xv = logits.view();
    let chunks = column_chunks(v);
    let trn1 = current_target() == Target::Trn1;
    let iota_cols = column_index(chunks[0].1, trn1);
    let ones = sbuf([n.clamp(1, PMAX), 1], DType::F32);
    memset(&ones, 1.0);
    // [Σ loss, Σ valid] over the row tiles, split across the cores and combined in one order.
    let sums = sum_row_shares(n, &[[1, 2]], |share, totals| {
        for_each_tile_in(share, PMAX, |rows| {
            let r = rows.size;
            let (t, valid) = load_targets(target, &rows, ignore_index);
            let picked = sbuf([r, 1], DType::F32);
            let pick = match &iota_cols {
                Some(iota) => Pick::Clamp { iota },
                None => {
                    let end = sbuf([r, 1], DType::F32);
                    tensor_scalar(&end, &t, BinOp::Add, 1.0);
                    Pick::Select {
                        end,
                        selected: sbuf([r, chunks[0].1], dt),
                    }
                }
            };
            let (neg_max, sum) = online_statistics(&xv, &rows, &chunks, dt, |i, xt| {
                let (c0, cols) = chunks[i];
                let part = if i == 0 {
                    picked.clone()
                } else {
                    sbuf([r, 1], DType::F32)
                };
                match &pick {
                    Pick::Select { end, selected } => range_select(
                        selected.cols(0, cols),
                        xt,
                        BinOp::GreaterEqual,
                        BinOp::Less,
                        &t,
                        end,
                        Some(part.region()),
                        BinOp::Maximum,
                        c0 as f32,
                        f32::NEG_INFINITY,
                    ),
                    Pick::Clamp { iota } => {
                        let clamp = target_clamp(iota, &t, r, (c0, cols));
                        tensor_tensor(&clamp, xt, &clamp, BinOp::Minimum);
                        tensor_reduce(&part, BinOp::Maximum, &clamp, 1, false);
                    }
                }
                if i > 0 {
                    tensor_tensor(&picked, &picked, &part, BinOp::Maximum);
                }
            });
            // lse = ln(sum) + max; the row's loss is lse − picked.
            let lse = sbuf([r, 1], DType::F32);
            activation(&lse, ActFn::Log, &sum, None, 1.0);
            tensor_tensor(&lse, &lse, &neg_max, BinOp::Subtract);
            dma_copy(lse_out.reshape(&[n, 1]).rows(rows.start.clone(), r), &lse);
            let row_loss = sbuf([r, 1], DType::F32);
            tensor_tensor(&row_loss, &lse, &picked, BinOp::Subtract);
            let pair = sbuf([r, 2], DType::F32);
            select_valid(pair.cols(0, 1), &row_loss, &valid, trn1);
            tensor_copy(pair.cols(1, 1), &valid);
            nc_matmul(&totals[0], ones.rows(r), &pair, true);
            if per_row {
                let out = sbuf([r, 1], dt);
                tensor_copy(&out, pair.cols(0, 1));
                dma_copy(loss.reshape(&[n, 1]).rows(rows.start.clone(), r), &out);
            }
        });
    });
    let sums = &sums[0];
    store_share(count.reshape(&[1, 1]), sums.cols(1, 1));
    if !per_row {
        let total = sbuf([1, 1], DType::F32);
        if reduction == "mean" {
            tensor_tensor(&total, sums.cols(0, 1), sums.cols(1, 1), BinOp::Divide);
        } else {
            tensor_copy(&total, sums.cols(0, 1));
        }
        let out = sbuf([1, 1], dt);
        tensor_copy(&out, &total);
        store_share(loss.reshape(&[1, 1]), &out);
    }
    (loss, lse_out, count)
}

/// Gradient of `cross_entropy`: `grad_logits = (softmax(logits) − onehot(target)) · g` per row,
/// the softmax recomputed as `exp(logits − lse)`, with `g` the row's loss gradient (`grad_loss[n]`
/// for `"none"`, `grad_loss` for `"sum"`, `grad_loss / count` for `"mean"`) and 0 for ignored
/// rows. The one-hot compares an `iota` column index with the target; fp32 inside.
#[kernel(
    shape(grad_loss = [..R], logits = [N, V], target = [N], lse = [N], count = []) -> grad_logits = [N, V],
    dtype(grad_loss in {f32, bf16, f16}, logits = grad_loss, target in {i32}, lse in {f32}, count in {f32}) -> logits,
    require(V >= 1, V <= 262144),
    shard(whole(V), together(R, N)),
    tolerance(reduction(V)),
)]
pub fn cross_entropy_backward(
    grad_loss: &Hbm,
    logits: &Hbm,
    target: &Hbm,
    lse: &Hbm,
    count: &Hbm,
    #[default(-100)] ignore_index: i64,
    #[default("mean")]
    #[choices("none", "mean", "sum")]
    reduction: &str,
) -> Hbm {
    let (n, v) = (logits.dim(0), logits.dim(1));
    target.require_indices(0..v as i64, Some(ignore_index));
    let dt = logits.dtype();
    let out = shared_hbm(&[n, v], dt);
    let (xv, ov) = (logits.view(), out.view());
    let chunks = column_chunks(v);
    let iota_cols = sbuf([PMAX, chunks[0].1], DType::F32);
    iota(&iota_cols, 0, 0, 1);
    let per_row = reduction == "none";
    for_each_program_tile(n, PMAX, |rows| {
        let r = rows.size;
        let (t, valid) = load_targets(target, &rows, ignore_index);
        // g = grad · valid (/ count for "mean"), per row.
        let g_in = sbuf([r, 1], dt);
        let grad_rows = if per_row {
            grad_loss.reshape(&[n, 1]).rows(rows.start.clone(), r)
        } else {
            grad_loss.reshape(&[1, 1]).broadcast_to(&[r, 1])
        };
        dma_copy(&g_in, grad_rows);
        let g = sbuf([r, 1], DType::F32);
        tensor_copy(&g, &g_in);
        if reduction == "mean" {
            let c = sbuf([r, 1], DType::F32);
            dma_copy(&c, count.reshape(&[1, 1]).broadcast_to(&[r, 1]));
            // max(count, 1): with no counted row every g is 0 anyway, and 1/0 would make it NaN.
            tensor_scalar(&c, &c, BinOp::Maximum, 1.0);
            tensor_tensor(&g, &g, &c, BinOp::Divide);
        }
        tensor_tensor(&g, &g, &valid, BinOp::Multiply);
        let neg_lse = sbuf([r, 1], DType::F32);
        dma_copy(&neg_lse, lse.reshape(&[n, 1]).rows(rows.start.clone(), r));
        tensor_scalar(&neg_lse, &neg_lse, BinOp::Multiply, -1.0);
        // Software-pipelined: chunk i's exp is issued before chunk i−1's scaling, so the scalar
        // engine computes the next exponential while the vector engine subtracts the one-hot.
        let mut pending: Option<(Tile, Tile, (usize, usize))> = None;
        let finish = |(xt, e, (c0, cols)): (Tile, Tile, (usize, usize))| {
            activation(&xt, ActFn::Identity, &e, None, &g);
            dma_copy(ov.clone().rows(rows.start.clone(), r).cols(c0, cols), &xt);
        };
        for &(c0, cols) in &chunks {
            let xt = load(&xv, &rows, (c0, cols), dt);
            let e = sbuf([r, cols], DType::F32);
            activation(&e, ActFn::Exp, &xt, Some(neg_lse.region()), 1.0);
            let rel = sbuf([r, 1], DType::F32);
            tensor_scalar(&rel, &t, BinOp::Subtract, c0 as f32);
            let onehot = sbuf([r, cols], DType::F32);
            tensor_scalar(
                &onehot,
                iota_cols.region().slice(0, r, 0, cols),
                BinOp::Equal,
                &rel,
            );
            tensor_tensor(&e, &e, &onehot, BinOp::Subtract);
            if let Some(prev) = pending.replace((xt, e, (c0, cols))) {
                finish(prev);
            }
        }
        if let Some(last) = pending {
            finish(last);
        }
    });
    out
}
