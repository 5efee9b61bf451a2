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
//! Per 1024-column piece: `ĝ` and `grad_y · x` on the vector engine (RMSNorm's `ĝ` in the input
//! dtype, as autograd rounds it; every fourth piece's `grad_y · x` on GpSimd), `ĝ · x` on
//! GpSimd, its row sum and the final `· rstd` on the scalar engine, and `ĝ + k · x` as one
//! `scalar_tensor_tensor` (with `grad_h`, `(ĝ + k · x) · rstd + grad_h` is a second one).
//! LayerNorm's fp32 `ĝ`, centring and `Σ ĝ` stay on the vector engine, and both its fp32
//! products go to GpSimd.

use super::{broadcast_weight, chunk_of};
use crate::tiling::{psum_banks, rows_of, spans};
use nki_core::prelude::*;

/// Whether rows of `d` columns take this path: `[1, d]` fp32 fits the PSUM banks.
pub(super) fn fits(d: usize) -> bool {
    d <= PSUM_BANKS * PSUM_BANK_FMAX
}

/// What [`one_pass`] reads and writes.
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
pub(super) fn one_pass(o: &Operands<'_>) -> (Hbm, Option<Hbm>) {
    let Operands {
        grad_y,
        extra,
        x,
        weight,
        mean,
        rstd,
        grad_x_outs,
        with_bias,
    } = *o;
    let (n, d) = rows_of(x);
    let dt = x.dtype();
    // RMSNorm rounds ĝ = grad_y · weight to the input dtype, as autograd does through the
    // forward's `x̂.to(dtype) * weight` (its passes then stream at the vector engine's 16-bit
    // rate); LayerNorm keeps it in fp32, as ATen's fused `native_layer_norm_backward` does.
    // The weight gradient's products grad_y · x stay exact (fp32) in both. The engines split
    // the products accordingly.
    let centred = mean.is_some();
    let ghat_dt = if centred { DType::F32 } else { dt };
    let product_engine = if centred {
        ElementwiseEngine::GpSimd
    } else {
        ElementwiseEngine::Vector
    };
    let grad_w = shared_hbm(&[d], dt);
    let grad_b = with_bias.then(|| shared_hbm(&[d], dt));
    let [gv, xv] = [grad_y, x].map(|t| t.reshape(&[n, d]));
    let rv = rstd.reshape(&[n, 1]);
    let mv = mean.map(|m| m.reshape(&[n, 1]));
    let ev = extra.map(|e| e.reshape(&[n, d]));
    let dxvs: Vec<HbmView> = grad_x_outs.iter().map(|t| t.reshape(&[n, d])).collect();
    let w = weight.map(|w| broadcast_weight(w, n, d));
    let banks: Vec<(usize, usize)> = psum_banks(d).collect();
    // One PSUM bank per 512 columns, summing over row tiles: the weight gradient in its first
    // partition and, for LayerNorm, the bias gradient in its second. Each matmul's stationary
    // operand has its factor in the column of the partition it feeds and zero in the other.
    let acc_rows = 1 + usize::from(with_bias);
    let accs: Vec<Tile> = banks
        .iter()
        .map(|&(_, cols)| psum([acc_rows, cols], DType::F32))
        .collect();
    for acc in &accs {
        memset(acc, 0.0);
    }
    let bias_stationary = with_bias.then(|| {
        let t = sbuf([n.min(PMAX), 2], dt);
        memset(t.cols(0, 1), 0.0);
        memset(t.cols(1, 1), 1.0);
        t
    });
    // Row tiles in groups, software-pipelined in three stages (the engines run their
    // instructions in order): tile i + 2's products and row sums, tile i + 1's `k · x`, and
    // tile i's output are issued together, the last stage first, so no engine waits for
    // another's pass over the same tile.
    let held = d * dt.size_bytes();
    let budget = current_target().sbuf_bytes_per_partition() - held - 16 * 1024;
    let per_tile = tile_bytes(d, dt, extra.is_some(), mean.is_some());
    let group = [4, 3, 2, 1]
        .into_iter()
        .find(|&g| g * per_tile <= budget)
        .unwrap_or(1);
    for_each_tile(n, group * PMAX, |span| {
        let tiles: Vec<(usize, usize)> = spans(span.size, PMAX).collect();
        // Stage A: loads; ĝ on the vector engine; grad_y · x summed over the tile's rows (each
        // scaled by its rstd) into the weight gradient on the tensor engine; S = Σ ĝ · x, the
        // products on one engine and their sum on the scalar engine.
        let products = |&(o, p): &(usize, usize)| {
            let rows = TileSpan {
                start: span.start.clone() + o,
                size: p,
            };
            let r = sbuf([p, 1], DType::F32);
            dma_copy(&r, rv.clone().rows(rows.start.clone(), p));
            // The weight gradient's stationary operand: rstd, then a zero column for the bias.
            let weight_stationary = match with_bias {
                true => {
                    let t = sbuf([p, 2], DType::F32);
                    tensor_copy(t.cols(0, 1), &r);
                    memset(t.cols(1, 1), 0.0);
                    t
                }
                false => r.clone(),
            };
            let mu = mv.as_ref().map(|mv| {
                let mu = sbuf([p, 1], DType::F32);
                dma_copy(&mu, mv.clone().rows(rows.start.clone(), p));
                mu
            });
            // Each chunk in its own tiles, so one engine's pass over a chunk overlaps the next
            // engine's pass over the previous one.
            let chunks: Vec<Chunk> = pieces(d)
                .map(|(c0, cols)| {
                    let (xt, gt) = (sbuf([p, cols], dt), sbuf([p, cols], dt));
                    dma_copy(&xt, chunk_of(&xv, &rows, c0, cols));
                    dma_copy(&gt, chunk_of(&gv, &rows, c0, cols));
                    // LayerNorm centres x first (fp32); RMSNorm uses it as loaded.
                    let xt = match &mu {
                        Some(mu) => {
                            let xc = sbuf([p, cols], DType::F32);
                            tensor_scalar(&xc, &xt, BinOp::Subtract, mu);
                            xc
                        }
                        None => xt,
                    };
                    let ghat = sbuf([p, cols], ghat_dt);
                    match &w {
                        Some(w) => {
                            tensor_tensor(&ghat, &gt, w.rows(p).cols(c0, cols), BinOp::Multiply);
                        }
                        None => tensor_copy(&ghat, &gt),
                    }
                    // LayerNorm's Σ ĝ, for the mean of the gradient it subtracts.
                    let s1 = mu.as_ref().map(|_| {
                        let s1 = sbuf([p, 1], DType::F32);
                        tensor_reduce(&s1, BinOp::Add, &ghat, 1, false);
                        s1
                    });
                    // grad_y · x, summed over the tile's rows (each scaled by its rstd) into the
                    // weight gradient on the tensor engine.
                    let gx = sbuf([p, cols], DType::F32);
                    // RMSNorm with four or more pieces: the first piece of every four has this
                    // product on GpSimd too, which balances it with the vector engine (trn2
                    // bf16 bench shape: 826 µs without, 800 with the fourth piece, 762 with
                    // the first; with fewer pieces GpSimd would become the bound).
                    let engine = match c0 / DMA_COLS % 4 {
                        0 if !centred && d >= 4 * DMA_COLS => ElementwiseEngine::GpSimd,
                        _ => product_engine,
                    };
                    tensor_tensor(&gx, &gt, &xt, BinOp::Multiply).on(engine);
                    for (acc, &(b0, bcols)) in accs.iter().zip(&banks) {
                        if (c0..c0 + cols).contains(&b0) {
                            nc_matmul(acc, &weight_stationary, gx.cols(b0 - c0, bcols), true);
                            if let Some(ones) = &bias_stationary {
                                nc_matmul(acc, ones.rows(p), gt.cols(b0 - c0, bcols), true);
                            }
                        }
                    }
                    // S = Σ ĝ · x: the exact fp32 products, summed on the scalar engine.
                    let scratch = sbuf([p, cols], DType::F32);
                    tensor_tensor(&scratch, &ghat, &xt, BinOp::Multiply)
                        .on(ElementwiseEngine::GpSimd);
                    let s = sbuf([p, 1], DType::F32);
                    activation_reduce(
                        &scratch,
                        ActFn::Identity,
                        &scratch,
                        BinOp::Add,
                        &s,
                        None,
                        1.0,
                    );
                    Chunk {
                        c0,
                        xt,
                        ghat,
                        scratch,
                        s,
                        s1,
                    }
                })
                .collect();
            RowTile { rows, r, chunks }
        };
        // Stage B: k = −rstd² · S / D per row (and LayerNorm's `rstd · b`, `b = −Σ ĝ / D`).
        let scaled = |t: RowTile| {
            let p = t.rows.size;
            // S summed over the pieces, and k = S · (−1/D) · rstd² in one instruction: few
            // small vector instructions. (Not rstd² on the scalar engine: in its queue it would
            // wait behind the previous tile's output.)
            let total = sum_columns(t.chunks.iter().map(|c| &c.s));
            let r2 = sbuf([p, 1], DType::F32);
            tensor_tensor(&r2, &t.r, &t.r, BinOp::Multiply);
            let k = sbuf([p, 1], DType::F32);
            scalar_tensor_tensor(
                &k,
                &total,
                BinOp::Multiply,
                -1.0 / d as f32,
                BinOp::Multiply,
                &r2,
            );
            let rb = centred.then(|| {
                let s1 = sum_columns(t.chunks.iter().filter_map(|c| c.s1.as_ref()));
                let rb = sbuf([p, 1], DType::F32);
                tensor_scalar(&rb, &s1, BinOp::Multiply, -1.0 / d as f32)
                    .then(BinOp::Multiply, &t.r);
                rb
            });
            Scaled { t, k, rb }
        };
        // Stage C: ĝ + k · x in one vector instruction, then · rstd (+ rstd · b) on the scalar
        // engine, or · rstd + grad_h on the vector engine; rounded once; stores.
        let output = |Scaled { t, k, rb }: Scaled| {
            let (rows, p) = (&t.rows, t.rows.size);
            for c in &t.chunks {
                let cols = c.xt.shape()[1];
                scalar_tensor_tensor(&c.scratch, &c.xt, BinOp::Multiply, &k, BinOp::Add, &c.ghat);
                let dx = sbuf([p, cols], dt);
                match &ev {
                    Some(ev) => {
                        let et = sbuf([p, cols], dt);
                        dma_copy(&et, chunk_of(ev, rows, c.c0, cols));
                        scalar_tensor_tensor(
                            &dx,
                            &c.scratch,
                            BinOp::Multiply,
                            &t.r,
                            BinOp::Add,
                            &et,
                        );
                    }
                    None => activation(
                        &dx,
                        ActFn::Identity,
                        &c.scratch,
                        rb.as_ref().map(|b| b.region()),
                        &t.r,
                    ),
                }
                for dxv in &dxvs {
                    dma_copy(chunk_of(dxv, rows, c.c0, cols), &dx);
                }
            }
        };
        let mut fresh: std::collections::VecDeque<RowTile> =
            tiles.iter().take(2).map(products).collect();
        let mut ready: std::collections::VecDeque<Scaled> =
            fresh.pop_front().map(scaled).into_iter().collect();
        for i in 0..tiles.len() {
            if let Some(t) = ready.pop_front() {
                output(t);
            }
            if let Some(t) = fresh.pop_front() {
                ready.push_back(scaled(t));
            }
            if let Some(ahead) = tiles.get(i + 2) {
                fresh.push_back(products(ahead));
            }
        }
    });
    for (acc, &(c0, cols)) in accs.iter().zip(&banks) {
        let res = sbuf([acc_rows, cols], dt);
        tensor_copy(&res, acc);
        for (row, out) in [Some(&grad_w), grad_b.as_ref()]
            .into_iter()
            .flatten()
            .enumerate()
        {
            dma_copy(
                out.reshape(&[1, d]).cols(c0, cols),
                res.region().slice(row, 1, 0, cols),
            );
        }
    }
    (grad_w, grad_b)
}

/// The sum of `[p, 1]` fp32 columns, added in order (the first itself when there is one).
fn sum_columns<'t>(columns: impl IntoIterator<Item = &'t Tile>) -> Tile {
    let mut columns = columns.into_iter();
    let first = columns.next().expect("a row has at least one piece");
    let Some(second) = columns.next() else {
        return first.clone();
    };
    let total = sbuf(first.shape(), DType::F32);
    tensor_tensor(&total, first, second, BinOp::Add);
    for c in columns {
        tensor_tensor(&total, &total, c, BinOp::Add);
    }
    total
}

/// A row tile after stage B: `k = −rstd² · S / D` and LayerNorm's `rstd · b`.
struct Scaled {
    t: RowTile,
    /// `[p, 1]` fp32.
    k: Tile,
    /// LayerNorm's `rstd · (−Σ ĝ / D)`, `[p, 1]` fp32.
    rb: Option<Tile>,
}

/// One row tile between the pipeline's stages.
struct RowTile {
    rows: TileSpan,
    /// `rstd`, `[p, 1]` fp32.
    r: Tile,
    chunks: Vec<Chunk>,
}

/// One column piece of a row tile.
struct Chunk {
    c0: usize,
    /// `x` as loaded (RMSNorm) or centred in fp32 (LayerNorm).
    xt: Tile,
    /// `ĝ = grad_y · weight`: in the input dtype for RMSNorm, fp32 for LayerNorm.
    ghat: Tile,
    /// The products `ĝ · x`, then `ĝ + k · x`; fp32.
    scratch: Tile,
    /// `Σ ĝ · x` over the piece, `[p, 1]` fp32.
    s: Tile,
    /// LayerNorm's `Σ ĝ` over the piece.
    s1: Option<Tile>,
}

/// SBUF bytes per partition one row tile of `d` columns uses across the stages.
fn tile_bytes(d: usize, dt: DType, extra: bool, centred: bool) -> usize {
    // x, grad_y, grad_x (and grad_h) in the input dtype, and RMSNorm's ĝ; grad_y · x and the
    // products' scratch in fp32, and LayerNorm's centred x and ĝ.
    let io = 3 + usize::from(extra) + usize::from(!centred);
    let fp32 = 2 + if centred { 2 } else { 0 };
    io * d * dt.size_bytes() + fp32 * d * 4 + 64
}

/// Column pieces of a row for DMA: transfers of at most [`DMA_COLS`] columns spread over the
/// queues, where one transfer per tile would queue the stores behind the next tiles' loads.
fn pieces(d: usize) -> impl Iterator<Item = (usize, usize)> {
    spans(d, DMA_COLS)
}

/// Columns per DMA transfer.
const DMA_COLS: usize = 1024;
