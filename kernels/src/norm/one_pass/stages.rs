//! The three stages of a row tile in the one-pass norm backward, and what stays fixed across
//! row tiles ([`Pass`]): the broadcast weight, the PSUM accumulators of the weight and bias
//! gradients and their stationary operands, and the engine of each piece's products.
//!
//! RMSNorm, per 1024-column piece: `ĝ` and `grad_y · x` on the vector engine (`ĝ` in the input
//! dtype, as autograd rounds it; every fourth piece's `grad_y · x` on GpSimd), `ĝ · x` on
//! GpSimd, its row sum and the final `· rstd` on the scalar engine, and `ĝ + k · x` as one
//! `scalar_tensor_tensor` (with `grad_h`, `(ĝ + k · x) · rstd + grad_h` is a second one).
//! LayerNorm, per 2048-column piece for 16-bit rows (fewer, longer vector passes) and 1024 for
//! fp32 rows (bound by DMA, whose transfers then overlap more): `x` centred on the scalar
//! engine; the fp32 `ĝ` with `Σ ĝ` from one reducing `scalar_tensor_tensor`;
//! `grad_y · (x − mean)` on GpSimd; `ĝ · (x − mean)` with its sum from a reducing
//! `scalar_tensor_tensor` for every fp32 piece and two 16-bit pieces in five, on GpSimd with
//! the scalar engine's sum for the others ([`VECTOR_PRODUCTS`]); the rest as for RMSNorm.

use super::super::chunk_of;
use super::Operands;
use crate::tiling::{psum_banks, rows_of, spans};
use nki_core::prelude::*;

/// What stays fixed across the row tiles.
pub(super) struct Pass {
    d: usize,
    dt: DType,
    /// LayerNorm (the saved mean is subtracted) rather than RMSNorm.
    centred: bool,
    /// `ĝ`'s dtype: the input dtype for RMSNorm, fp32 for LayerNorm with a weight.
    ghat_dt: DType,
    /// `(start, width)` of each column piece.
    pub(super) pieces: Vec<(usize, usize)>,
    gv: HbmView,
    xv: HbmView,
    rv: HbmView,
    mv: Option<HbmView>,
    ev: Option<HbmView>,
    dxvs: Vec<HbmView>,
    /// Per piece, the weight's columns broadcast across the partitions (a tile each, so each
    /// piece waits only for its own columns' transfer).
    w: Option<Vec<Tile>>,
    /// `(start, width)` of the PSUM banks the gradients accumulate in, 512 columns each
    /// ([`Pass::products`]).
    banks: Vec<(usize, usize)>,
    /// `[rows, 2]`: zeros, then ones (the bias gradient's stationary operand).
    bias_stationary: Option<Tile>,
}

/// One row tile between the stages.
pub(super) struct RowTile {
    rows: TileSpan,
    /// Position in the group.
    index: usize,
    /// `rstd`, `[p, 1]` fp32.
    r: TileRegion,
    /// `rstd²`.
    r2: Tile,
    /// The weight gradient's stationary operand: `rstd` (then a zero column for the bias).
    weight_stationary: Tile,
    /// LayerNorm's `−mean`, `[p, 1]` fp32.
    neg_mean: Option<Tile>,
    /// Per piece loaded so far: `x` as loaded (RMSNorm) or centred (LayerNorm), and `grad_y`.
    loaded: Vec<(Tile, Tile)>,
    /// `Σ ĝ · x` per piece, a column each, fp32.
    s: Tile,
    /// LayerNorm's `Σ ĝ` per piece.
    s1: Option<Tile>,
    chunks: Vec<Chunk>,
}

/// A row tile after stage B: `k = −rstd² · S / D` and LayerNorm's `rstd · b`.
pub(super) struct Scaled {
    t: RowTile,
    /// `[p, 1]` fp32.
    k: Tile,
    /// LayerNorm's `rstd · (−Σ ĝ / D)`, `[p, 1]` fp32.
    rb: Option<Tile>,
}

/// One column piece of a row tile after stage A.
struct Chunk {
    c0: usize,
    /// `x` as loaded (RMSNorm) or centred in fp32 (LayerNorm).
    xt: Tile,
    /// `ĝ = grad_y · weight`: in the input dtype for RMSNorm, fp32 for LayerNorm.
    ghat: Tile,
    /// The products `ĝ · x` (fp32) when their row sum is taken on the scalar engine
    /// ([`Pass::sum`]) rather than by the instruction that made them.
    unsummed: Option<Tile>,
    /// `Σ ĝ · x` over the piece: its column of [`RowTile::s`].
    s: TileRegion,
}

impl Pass {
    /// Loads the weight and builds the bias gradient's stationary operand.
    pub(super) fn new(o: &Operands<'_>) -> Self {
        let (n, d) = rows_of(o.x);
        let dt = o.x.dtype();
        let centred = o.mean.is_some();
        // RMSNorm rounds ĝ = grad_y · weight to the input dtype, as autograd does through the
        // forward's `x̂.to(dtype) * weight` (its passes then stream at the vector engine's
        // 16-bit rate); LayerNorm keeps it in fp32, as ATen's fused `native_layer_norm_backward`
        // does (without a weight, ĝ is grad_y as loaded). The weight gradient's products
        // grad_y · x stay exact (fp32) in both.
        let ghat_dt = match (centred, o.weight) {
            (true, Some(_)) => DType::F32,
            _ => dt,
        };
        let banks: Vec<(usize, usize)> = psum_banks(d).collect();
        // 16-bit LayerNorm rows in 2048-column pieces, fp32 LayerNorm rows and RMSNorm in
        // 1024 (RMSNorm's GpSimd share needs four pieces a row; see `PIECE_COLS`).
        let piece_cols = if centred && dt.size_bytes() < 4 {
            2 * PIECE_COLS
        } else {
            PIECE_COLS
        };
        let pieces: Vec<(usize, usize)> = spans(d, piece_cols).collect();
        let w = o.weight.map(|w| broadcast_pieces(w, n, &pieces));
        let bias_stationary = o.with_bias.then(|| {
            let t = sbuf([n.min(PMAX), 2], dt);
            memset(t.cols(0, 1), 0.0);
            memset(t.cols(1, 1), 1.0);
            t
        });
        Pass {
            d,
            dt,
            centred,
            ghat_dt,
            pieces,
            gv: o.grad_y.reshape(&[n, d]),
            xv: o.x.reshape(&[n, d]),
            rv: o.rstd.reshape(&[n, 1]),
            mv: o.mean.map(|m| m.reshape(&[n, 1])),
            ev: o.extra.map(|e| e.reshape(&[n, d])),
            dxvs: o.grad_x_outs.iter().map(|t| t.reshape(&[n, d])).collect(),
            w,
            banks,
            bias_stationary,
        }
    }

    /// SBUF bytes per partition held for the whole kernel: the weight, the small tiles, and a
    /// share's fp32 partial gradients while the next share runs ([`sum_row_shares`]).
    ///
    /// [`sum_row_shares`]: crate::partials::sum_row_shares
    pub(super) fn held_bytes(&self) -> usize {
        let w = self.w.as_ref().map_or(0, |_| self.d * self.dt.size_bytes());
        w + 2 * self.dt.size_bytes() + 4 * self.d + SMALL_BYTES
    }

    /// SBUF bytes per partition a row tile keeps from stage A to its output: `x` (centred in
    /// fp32 for LayerNorm) and `ĝ`.
    pub(super) fn tile_bytes(&self) -> usize {
        self.d * self.kept_bytes_per_column() + SMALL_BYTES
    }

    /// [`Pass::tile_bytes`] of one piece.
    pub(super) fn kept_piece_bytes(&self) -> usize {
        self.piece_cols() * self.kept_bytes_per_column()
    }

    fn kept_bytes_per_column(&self) -> usize {
        let x = if self.centred {
            4
        } else {
            self.dt.size_bytes()
        };
        x + self.ghat_dt.size_bytes()
    }

    fn piece_cols(&self) -> usize {
        self.pieces.first().map_or(0, |&(_, cols)| cols)
    }

    /// SBUF bytes per partition of one piece's short-lived tiles: the loaded `x` and `grad_y`,
    /// `grad_x` (and `grad_h`), and in fp32 `grad_y · x`, the products `ĝ · x` (this piece's
    /// and the previous one's, summed a step behind) and `ĝ + k · x`.
    pub(super) fn piece_bytes(&self) -> usize {
        let io = 3 + usize::from(self.ev.is_some());
        self.piece_cols() * (io * self.dt.size_bytes() + 4 * 4)
    }

    /// A row tile's per-row operands: `rstd`, the weight gradient's stationary operand and
    /// LayerNorm's `−mean`.
    pub(super) fn start(&self, rows: TileSpan, index: usize) -> RowTile {
        let p = rows.size;
        // rstd lands in the weight gradient's stationary operand (its first column) and is
        // read from there; the per-row operands are prepared off the vector engine.
        let (weight_stationary, r) = match self.bias_stationary {
            Some(_) => {
                let t = sbuf([p, 2], DType::F32);
                memset(t.cols(1, 1), 0.0);
                (t.clone(), t.cols(0, 1))
            }
            None => {
                let t = sbuf([p, 1], DType::F32);
                (t.clone(), t.region())
            }
        };
        dma_copy(&r, self.rv.clone().rows(rows.start.clone(), p));
        let r2 = sbuf([p, 1], DType::F32);
        activation(&r2, ActFn::Square, &r, None, 1.0);
        let neg_mean = self.mv.as_ref().map(|mv| {
            let m = sbuf([p, 1], DType::F32);
            dma_copy(&m, mv.clone().rows(rows.start.clone(), p));
            activation(&m, ActFn::Identity, &m, None, -1.0);
            m
        });
        let pieces = self.pieces.len();
        RowTile {
            rows,
            index,
            r,
            r2,
            weight_stationary,
            neg_mean,
            loaded: Vec::new(),
            s: sbuf([p, pieces], DType::F32),
            s1: self.centred.then(|| sbuf([p, pieces], DType::F32)),
            chunks: Vec::new(),
        }
    }

    /// Stage A's loads of piece `j`, and LayerNorm's centring on the scalar engine (exactly
    /// `x − mean`: `x · 1 + (−mean)` rounds once).
    pub(super) fn load(&self, t: &mut RowTile, j: usize) {
        let (c0, cols) = self.pieces[j];
        let p = t.rows.size;
        let (xt, gt) = (sbuf([p, cols], self.dt), sbuf([p, cols], self.dt));
        dma_copy(&xt, chunk_of(&self.xv, &t.rows, c0, cols));
        dma_copy(&gt, chunk_of(&self.gv, &t.rows, c0, cols));
        let xt = match &t.neg_mean {
            Some(m) => {
                let xc = sbuf([p, cols], DType::F32);
                activation(&xc, ActFn::Identity, &xt, Some(m.region()), 1.0);
                xc
            }
            None => xt,
        };
        t.loaded.push((xt, gt));
    }

    /// Stage A's products of piece `j`: `ĝ` (and LayerNorm's `Σ ĝ`), `grad_y · x` into the
    /// gradient accumulators `accs` (one PSUM bank per 512 columns, summing over row tiles: the
    /// weight gradient in its first partition and, for LayerNorm, the bias gradient in its
    /// second; each matmul's stationary operand has its factor in the column of the partition
    /// it feeds and zero in the other), and `ĝ · x` (summed here on the vector engine, or by
    /// [`Pass::sum`]).
    pub(super) fn products(&self, t: &mut RowTile, j: usize, accs: &[Tile]) {
        let (c0, cols) = self.pieces[j];
        let p = t.rows.size;
        let (xt, gt) = t.loaded[j].clone();
        let w = self.w.as_ref().map(|w| w[j].rows(p));
        let s1 = t.s1.as_ref().map(|s1| s1.cols(j, 1));
        let ghat = match (&w, &s1) {
            (Some(w), Some(s1)) => {
                let ghat = sbuf([p, cols], self.ghat_dt);
                scalar_tensor_tensor_reduce(
                    &ghat,
                    &gt,
                    BinOp::Multiply,
                    1.0,
                    BinOp::Multiply,
                    w.clone(),
                    BinOp::Add,
                    s1,
                );
                ghat
            }
            (Some(w), None) => {
                let ghat = sbuf([p, cols], self.ghat_dt);
                tensor_tensor(&ghat, &gt, w.clone(), BinOp::Multiply);
                ghat
            }
            (None, s1) => {
                if let Some(s1) = s1 {
                    tensor_reduce(s1, BinOp::Add, &gt, 1, false);
                }
                gt.clone()
            }
        };
        // grad_y · x, summed over the tile's rows (each scaled by its rstd) into the weight
        // gradient on the tensor engine. RMSNorm with four or more pieces has the first piece
        // of every four on GpSimd, which balances it with the vector engine (trn2 bf16 bench
        // shape: 826 µs without, 800 with the fourth piece, 762 with the first; with fewer
        // pieces GpSimd would become the bound); LayerNorm has them all there.
        let gx = sbuf([p, cols], DType::F32);
        let engine = match j % 4 {
            _ if self.centred => ElementwiseEngine::GpSimd,
            0 if self.d >= 4 * PIECE_COLS => ElementwiseEngine::GpSimd,
            _ => ElementwiseEngine::Vector,
        };
        tensor_tensor(&gx, &gt, &xt, BinOp::Multiply).on(engine);
        for (acc, &(b0, bcols)) in accs.iter().zip(&self.banks) {
            if (c0..c0 + cols).contains(&b0) {
                nc_matmul(acc, &t.weight_stationary, gx.cols(b0 - c0, bcols), true);
                if let Some(ones) = &self.bias_stationary {
                    nc_matmul(acc, ones.rows(p), gt.cols(b0 - c0, bcols), true);
                }
            }
        }
        // S = Σ ĝ · x over the exact fp32 products: for LayerNorm, in one reducing vector
        // instruction, or on GpSimd with the sum on the scalar engine for the 16-bit pieces
        // [`VECTOR_PRODUCTS`] leaves there. fp32 rows are bound by DMA, which leaves the vector
        // engine room for them all (trn2 bench shape, cost model: 1.221 → 1.198 ms, 154
        // instructions fewer), and the CPU simulator one pass over the products fewer.
        // The products are short-lived (only their sum is kept), so a row tile holds only `x`
        // and `ĝ` from stage A to its output: the CPU simulator then finds them in cache more
        // often there (fp32 layernorm_backward at 8192×4096, simulator alone, two threads,
        // best of 5, 15 rounds alternating with the kept products: 47.3–51.6 → 45.0–47.4 ms;
        // the same bits, the same device estimate).
        let products = sbuf([p, cols], DType::F32);
        let s = t.s.cols(j, 1);
        let k = t.index * self.pieces.len() + j;
        let (a, b) = VECTOR_PRODUCTS;
        let on_vector = self.centred && (self.dt == DType::F32 || (k + 1) * a / b > k * a / b);
        if on_vector {
            scalar_tensor_tensor_reduce(
                &products,
                &ghat,
                BinOp::Multiply,
                1.0,
                BinOp::Multiply,
                &xt,
                BinOp::Add,
                &s,
            );
        } else {
            tensor_tensor(&products, &ghat, &xt, BinOp::Multiply).on(ElementwiseEngine::GpSimd);
        }
        t.chunks.push(Chunk {
            c0,
            xt,
            ghat,
            unsummed: (!on_vector).then_some(products),
            s,
        });
    }

    /// Stage A's scalar-engine sum of piece `j`'s products, when [`Pass::products`] left it.
    pub(super) fn sum(&self, t: &RowTile, j: usize) {
        let c = &t.chunks[j];
        if let Some(products) = &c.unsummed {
            activation_reduce(
                products,
                ActFn::Identity,
                products,
                BinOp::Add,
                &c.s,
                None,
                1.0,
            );
        }
    }

    /// Stage B: `k = −rstd² · S / D` per row (and LayerNorm's `rstd · b`, `b = −Σ ĝ / D`).
    pub(super) fn scaled(&self, t: RowTile) -> Scaled {
        let p = t.rows.size;
        let d = self.d as f32;
        // S summed over the pieces, and k = S · (−1/D) · rstd² in one instruction: few small
        // vector instructions (rstd² came from the scalar engine when the tile started).
        let total = row_sum(&t.s);
        let k = sbuf([p, 1], DType::F32);
        scalar_tensor_tensor(
            &k,
            &total,
            BinOp::Multiply,
            -1.0 / d,
            BinOp::Multiply,
            &t.r2,
        );
        let rb = t.s1.as_ref().map(|s1| {
            let rb = sbuf([p, 1], DType::F32);
            tensor_scalar(&rb, row_sum(s1), BinOp::Multiply, -1.0 / d).then(BinOp::Multiply, &t.r);
            rb
        });
        Scaled { t, k, rb }
    }

    /// Stage C of piece `j`: `ĝ + k · x` in one vector instruction, then `· rstd (+ rstd · b)`
    /// on the scalar engine, or `· rstd + grad_h` on the vector engine; rounded once; stored.
    pub(super) fn output(&self, s: &Scaled, j: usize) {
        let Scaled { t, k, rb } = s;
        let c = &t.chunks[j];
        let (rows, p) = (&t.rows, t.rows.size);
        let cols = c.xt.shape()[1];
        let y = sbuf([p, cols], DType::F32);
        scalar_tensor_tensor(&y, &c.xt, BinOp::Multiply, k, BinOp::Add, &c.ghat);
        let dx = sbuf([p, cols], self.dt);
        match &self.ev {
            Some(ev) => {
                let et = sbuf([p, cols], self.dt);
                dma_copy(&et, chunk_of(ev, rows, c.c0, cols));
                scalar_tensor_tensor(&dx, &y, BinOp::Multiply, &t.r, BinOp::Add, &et);
            }
            None => activation(
                &dx,
                ActFn::Identity,
                &y,
                rb.as_ref().map(|b| b.region()),
                &t.r,
            ),
        }
        // Stored in transfers of at most PIECE_COLS columns on separate queues: the kernel's
        // last store is its tail.
        for dxv in &self.dxvs {
            for (o, width) in spans(cols, PIECE_COLS) {
                dma_copy(chunk_of(dxv, rows, c.c0 + o, width), dx.cols(o, width));
            }
        }
    }
}

/// `weight` `[D]` broadcast across the partitions a row tile uses, one tile per column piece.
fn broadcast_pieces(weight: &Hbm, n: usize, pieces: &[(usize, usize)]) -> Vec<Tile> {
    let p = n.min(PMAX);
    let row = weight.reshape(&[1, weight.dim(0)]);
    pieces
        .iter()
        .map(|&(c0, cols)| {
            let t = sbuf([p, cols], weight.dtype());
            dma_copy(&t, row.clone().cols(c0, cols).broadcast_to(&[p, cols]));
            t
        })
        .collect()
}

/// The per-row sum of the pieces' partial sums (`[p, pieces]`): the column itself for one
/// piece.
fn row_sum(partials: &Tile) -> TileRegion {
    let [p, pieces] = partials.shape();
    if pieces == 1 {
        return partials.region();
    }
    let total = sbuf([p, 1], DType::F32);
    tensor_reduce(&total, BinOp::Add, partials, 1, false);
    total.region()
}

/// Columns per piece (16-bit LayerNorm rows take twice as many), and per store: transfers of
/// at most this many columns spread over the DMA queues, where one transfer per tile would
/// queue the stores behind the next tiles' loads. Trn2 cost model at the 8192×4096 bench shape:
/// bf16 LayerNorm 797 µs with 1024-column pieces, 782 with 2048; bf16 RMSNorm 703 with 1024,
/// 717 with 2048; fp32 LayerNorm (bound by DMA) 1221 µs with 1024, 1203 with 512 (the CPU
/// simulator slower there: more, smaller instructions), 1481 with 2048.
const PIECE_COLS: usize = 1024;

/// Allowance for a row tile's `[p, 1]` columns and the kernel's small tiles, bytes per
/// partition.
const SMALL_BYTES: usize = 256;

/// `(a, b)`: LayerNorm's 16-bit `ĝ · (x − mean)` of `a` pieces in `b` on the vector engine,
/// spread evenly over the group's pieces; the rest on GpSimd. The vector engine is the bound
/// (trn2 bf16 bench shape, cost model: 800 µs with one in two, 791 with three in eight, 782
/// with two in five, 857 with one in four).
const VECTOR_PRODUCTS: (usize, usize) = (2, 5);
