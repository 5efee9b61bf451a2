//! LayerNorm over the last dim with optional elementwise weight and bias, forward and backward.
//!
//! Rows (every leading dim flattened) are tiled 128 to the partitions; the row stays whole on
//! the free dim. The forward's mean and variance come from the vector engine's `bn_stats` (per
//! 512 columns: mean, then squared deviations from it) combined by `bn_aggr` (Chan's pairwise
//! update), in fp32: never `E[x²] − mean²`, so rows with a large offset keep their precision,
//! as ATen's Welford-style moments do. The backward's sums run in 2048-column chunks in fp32.

use super::{AffineGrads, affine_gradients, broadcast_weight, chunk_of, few_rows};
use crate::tiling::{
    CHUNK, column_chunks, fill_zeros, for_each_row_tile, identity, keeps_rows, psum_banks, rows_of,
    spans, transposed,
};
use nki_core::prelude::*;

/// LayerNorm over the last dim: `(x − mean) · rsqrt(var + eps) · weight + bias` (biased
/// variance, `weight` and `bias` optional), for `x` of any rank ≥ 1, as
/// `F.layer_norm(x, x.shape[-1:], weight, bias, eps)`.
///
/// Per row tile: `bn_stats` and `bn_aggr` on the vector engine give the mean and variance. A
/// few long rows (up to 32, `D` a multiple of 128) spread their columns across the partitions
/// instead (`few_rows`).
/// bf16 rows with a weight and a bias held on chip are normalised through the tensor engine
/// (`AffineOnPe`); otherwise `(x − mean) · weight` and `· rstd + bias` are two vector-engine
/// `scalar_tensor_tensor`s (with only one of weight and bias, `(x − mean) · rstd` and then it),
/// in fp32 and rounded once. `mean` and `rstd` per row are saved in fp32 for the backward.
#[kernel(
    shape(x = [..B, D], weight = [D], bias = [D])
        -> (y = [..B, D], saved mean = [..B], saved rstd = [..B]),
    dtype(x in {f32, bf16, f16}, weight = x, bias = x) -> (x, f32, f32),
    require(D >= 1, D <= 16384),
    backward(layernorm_backward, saves(x, weight, mean, rstd)),
    shard(whole(D)),
    replaces("aten::layer_norm", "aten::native_layer_norm", "torch.nn.LayerNorm"),
    reference("F.layer_norm(x.float(), x.shape[-1:], None if weight is None else weight.float(), None if bias is None else bias.float(), eps).to(x.dtype)"),
    sample(x = [130, 96], weight = [96], bias = [96]),
    sample(x = [2, 65, 300], weight = [300], bias = None, eps = 1e-6),
    sample(x = [3, 4500], weight = None, bias = [4500], dtypes = {f32}),
    sample(x = [5, 40], weight = None, bias = None),
    sample(x = [1, 1], weight = [1], bias = [1]),
    sample(x = [7], weight = [7], bias = [7]),
    sample(x = [2, 3, 384], weight = [384], bias = [384]),
    sample(x = [5, 256], weight = None, bias = [256], dtypes = {f32}),
    tolerance(reduction(D)),
    autocast(fp32),
    bench(x = [8192, 4096], weight = [4096], bias = [4096]),
)]
pub fn layernorm(
    x: &Hbm,
    weight: Option<&Hbm>,
    bias: Option<&Hbm>,
    #[default(1e-5)] eps: f32,
) -> (Hbm, Hbm, Hbm) {
    let (n, d) = rows_of(x);
    let dt = x.dtype();
    let out = shared_hbm(x.shape(), dt);
    let stat_shape = &x.shape()[..x.shape().len() - 1];
    let (mean_out, rstd_out) = (
        shared_hbm(stat_shape, DType::F32),
        shared_hbm(stat_shape, DType::F32),
    );
    if few_rows::spreads(n, d) {
        layernorm_few_rows(x, [weight, bias], eps, &out, [&mean_out, &rstd_out]);
        return (out, mean_out, rstd_out);
    }
    let (xv, ov) = (x.reshape(&[n, d]), out.reshape(&[n, d]));
    let (mv, rv) = (mean_out.reshape(&[n, 1]), rstd_out.reshape(&[n, 1]));
    // Row tiles are processed in groups, each stage issued for every tile of the group before
    // the next stage (the engines run their instructions in order, so the vector engine sums
    // tile 2 while the scalar engine squares tile 1). Weight and bias stay on chip when they
    // fit next to the group; otherwise (f32 rows near the 16384 bound) each chunk streams its
    // slice with the row tile.
    let affine = [weight, bias].iter().flatten().count();
    let fits = |tiles: usize, held: usize| {
        (tiles + held) * d * dt.size_bytes() + tiles * (2 * CHUNK + 16) * 4
            <= current_target().sbuf_bytes_per_partition()
    };
    // Two row tiles per group: with four, the tiles' PSUM banks (eight per 4096-column tile)
    // and DMA transfers queue behind each other (trn2 bf16 bench shape: 515 µs with two, 560
    // with four, 545 with one).
    let group = [2, 1].into_iter().find(|&g| fits(2 * g, 0)).unwrap_or(1);
    let own_out = fits(2 * group, 0);
    let hold = fits(if own_out { 2 * group } else { group }, affine);
    // bf16 with both a weight and a bias held on chip: the bias joins through the tensor
    // engine (see `AffineOnPe`). Otherwise the vector engine normalises and applies them.
    let on_pe = match (weight, bias) {
        (Some(w), Some(b)) if hold && dt == DType::BF16 => Some(AffineOnPe::new(w, b, n, d)),
        _ => None,
    };
    let (w, b) = match on_pe {
        Some(_) => (None, None),
        None => (
            weight.map(|w| AffineParam::new(w, n, d, hold)),
            bias.map(|b| AffineParam::new(b, n, d, hold)),
        ),
    };
    let chunks = column_chunks(d);
    for_each_program_tile(n, group * PMAX, |span| {
        let tiles: Vec<(usize, usize)> = spans(span.size, PMAX).collect();
        // Stage A: load; mean and variance on the vector engine (`bn_stats` per 512 columns,
        // combined by `bn_aggr`).
        let moments_of = |&(o, p): &(usize, usize)| {
            let xt = sbuf([p, d], dt);
            dma_copy(&xt, xv.clone().rows(span.start.clone() + o, p));
            let groups = d.div_ceil(BN_STATS_FMAX);
            let stats = sbuf([p, 6 * groups], DType::F32);
            for g in 0..groups {
                let c0 = g * BN_STATS_FMAX;
                bn_stats(stats.cols(6 * g, 6), xt.cols(c0, BN_STATS_FMAX.min(d - c0)));
            }
            let moments = sbuf([p, 2], DType::F32);
            bn_aggr(&moments, &stats);
            (xt, moments)
        };
        // Stage B: rstd = rsqrt(var + eps), and what the affine path needs per row.
        let rstd_of = |(xt, moments): (Tile, Tile)| {
            let p = xt.shape()[0];
            let rstd = sbuf([p, 1], DType::F32);
            tensor_scalar(&rstd, moments.cols(1, 1), BinOp::Add, eps);
            activation(&rstd, ActFn::Rsqrt, &rstd, None, 1.0);
            let affine = match &on_pe {
                Some(pe) => RowAffine::OnPe {
                    pe,
                    factors: AffineOnPe::row_factors(&moments.cols(0, 1), &rstd),
                },
                None => RowAffine::OnEngines {
                    scratch: sbuf([p, CHUNK.min(d)], DType::F32),
                },
            };
            RowStats {
                xt,
                moments,
                rstd,
                affine,
            }
        };
        // Stage C: the normalised, scaled and shifted rows, rounded once; stores.
        let normalise = |&(o, p): &(usize, usize), st: RowStats| {
            let row0 = span.start.clone() + o;
            // The result goes to its own tile when it fits (writing it into `xt` would make the
            // next chunk's read of `xt` wait for this chunk's write).
            let yt = if own_out {
                sbuf([p, d], dt)
            } else {
                st.xt.clone()
            };
            match &st.affine {
                RowAffine::OnPe { pe, factors } => pe.apply(&yt, &st.xt, factors, &st.rstd),
                RowAffine::OnEngines { scratch } => {
                    // In fp32, rounded once to y: with a weight and a bias, `(x − mean) ·
                    // weight` and then `· rstd + bias`, two vector `scalar_tensor_tensor`s
                    // (trn2 fp32 bench shape, cost model: 976.5 → 964.8 µs against
                    // `(x − mean) · rstd` on the vector engine, `· weight` there and `+ bias`
                    // on GpSimd, and one pass fewer for the CPU simulator); with one of them,
                    // `(x − mean) · rstd` and the product or sum. The subtraction comes first,
                    // as in ATen: the scalar engine's one-instruction form
                    // `x · rstd + (−mean · rstd)` loses the digits of rows far from zero (10×
                    // ATen's error at mean/std ≈ 1000). Two fp32 scratch tiles in turn, so a
                    // chunk's first pass does not wait for the previous chunk's second to have
                    // read the scratch. (Keeping them in a 16-bit input dtype would make the
                    // vector passes twice as fast, at the price of two extra roundings: bf16
                    // results then differ from ATen's by a full ulp.)
                    let second = (chunks.len() > 1).then(|| sbuf(scratch.shape(), DType::F32));
                    for (i, &(c0, cols)) in chunks.iter().enumerate() {
                        let t = match (&second, i % 2) {
                            (Some(other), 1) => other.cols(0, cols),
                            _ => scratch.cols(0, cols),
                        };
                        let (x, y) = (st.xt.cols(c0, cols), yt.cols(c0, cols));
                        let mean = st.moments.cols(0, 1);
                        let normalised = |dst: &TileRegion| {
                            tensor_scalar(dst, x.clone(), BinOp::Subtract, mean.clone())
                                .then(BinOp::Multiply, &st.rstd);
                        };
                        match (&w, &b) {
                            (Some(w), Some(b)) => {
                                let (w, b) = (w.chunk(p, c0, cols), b.chunk(p, c0, cols));
                                scalar_tensor_tensor(
                                    &t,
                                    x,
                                    BinOp::Subtract,
                                    mean,
                                    BinOp::Multiply,
                                    w,
                                );
                                let rstd = &st.rstd;
                                scalar_tensor_tensor(y, &t, BinOp::Multiply, rstd, BinOp::Add, b);
                            }
                            (Some(w), None) => {
                                normalised(&t);
                                tensor_tensor(y, &t, w.chunk(p, c0, cols), BinOp::Multiply);
                            }
                            (None, Some(b)) => {
                                normalised(&t);
                                tensor_tensor(y, &t, b.chunk(p, c0, cols), BinOp::Add);
                            }
                            (None, None) => normalised(&y),
                        }
                    }
                }
            }
            dma_copy(ov.clone().rows(row0.clone(), p), &yt);
            // The mean leaves through its own tile, written after the row's last chunk: a store
            // straight from `moments` is ready as soon as the statistics are, and the early
            // small transfer then takes a DMA queue gap the next row tile's load needed (fp32
            // 990 → 1044 µs in the cost model).
            let mean = sbuf([p, 1], DType::F32);
            tensor_copy(&mean, st.moments.cols(0, 1));
            dma_copy(mv.clone().rows(row0.clone(), p), &mean);
            dma_copy(rv.clone().rows(row0, p), &st.rstd);
        };
        // Software-pipelined over the group's row tiles: tile i + 2's mean and tile i + 1's rstd
        // are issued before tile i's output, so no engine waits for another's pass over the
        // previous tile (the vector engine's weight pass would otherwise hold up the next
        // statistics, and the scalar engine's normalisation with them).
        let mut moments: std::collections::VecDeque<_> =
            tiles.iter().take(2).map(moments_of).collect();
        let mut stats: std::collections::VecDeque<_> =
            moments.pop_front().map(rstd_of).into_iter().collect();
        for (i, tile) in tiles.iter().enumerate() {
            if let Some(ahead) = tiles.get(i + 2) {
                moments.push_back(moments_of(ahead));
            }
            if let Some(m) = moments.pop_front() {
                stats.push_back(rstd_of(m));
            }
            if let Some(st) = stats.pop_front() {
                normalise(tile, st);
            }
        }
    });
    (out, mean_out, rstd_out)
}

/// `layernorm` of a few long rows, their columns spread across the partitions ([`few_rows`]):
/// per row, the mean from the partitions' partial sums (totalled by the ones matmul), then the
/// variance the same way from `(x − mean)²`, and `(x − mean) · rstd · weight + bias` in fp32,
/// rounded once, written back in the same layout.
fn layernorm_few_rows(
    x: &Hbm,
    [weight, bias]: [Option<&Hbm>; 2],
    eps: f32,
    out: &Hbm,
    [mean_out, rstd_out]: [&Hbm; 2],
) {
    let (n, d) = rows_of(x);
    let c = d / PMAX;
    let w = weight.map(|w| few_rows::spread_vector(w, d));
    let b = bias.map(|b| few_rows::spread_vector(b, d));
    let ones = few_rows::ones();
    few_rows::for_each_row_group(n, |rows| {
        let m = rows.size;
        let xt = sbuf([PMAX, m * c], x.dtype());
        dma_copy(&xt, few_rows::spread_rows(x, &rows, d));
        let (sums, sums_rows) = few_rows::row_totals(&xt, m, ActFn::Identity, None, &ones);
        let (neg_mean, mean_rows) = (sbuf([PMAX, m], DType::F32), sbuf([m, 1], DType::F32));
        tensor_scalar(&neg_mean, &sums, BinOp::Multiply, -1.0 / d as f32);
        tensor_scalar(&mean_rows, &sums_rows, BinOp::Multiply, 1.0 / d as f32);
        let (squares, squares_rows) =
            few_rows::row_totals(&xt, m, ActFn::Square, Some(&neg_mean), &ones);
        let (rstd, rstd_rows) = (sbuf([PMAX, m], DType::F32), sbuf([m, 1], DType::F32));
        for (t, sum) in [(&rstd, &squares), (&rstd_rows, &squares_rows)] {
            tensor_scalar(t, sum, BinOp::Multiply, 1.0 / d as f32).then(BinOp::Add, eps);
            activation(t, ActFn::Rsqrt, t, None, 1.0);
        }
        dma_copy(few_rows::row_statistic(mean_out, &rows), &mean_rows);
        dma_copy(few_rows::row_statistic(rstd_out, &rows), &rstd_rows);
        let scratch = sbuf([PMAX, c], DType::F32);
        for r in 0..m {
            let (row, neg_mean_r, rstd_r) =
                (xt.cols(r * c, c), neg_mean.cols(r, 1), rstd.cols(r, 1));
            match (&w, &b) {
                (Some(w), Some(b)) => {
                    let add = BinOp::Add;
                    scalar_tensor_tensor(
                        &scratch,
                        row.clone(),
                        add,
                        neg_mean_r,
                        BinOp::Multiply,
                        w,
                    );
                    scalar_tensor_tensor(row, &scratch, BinOp::Multiply, rstd_r, BinOp::Add, b);
                }
                (Some(w), None) => {
                    let add = BinOp::Add;
                    scalar_tensor_tensor(
                        &scratch,
                        row.clone(),
                        add,
                        neg_mean_r,
                        BinOp::Multiply,
                        w,
                    );
                    tensor_scalar(row, &scratch, BinOp::Multiply, rstd_r);
                }
                (None, Some(b)) => {
                    tensor_scalar(&scratch, row.clone(), BinOp::Add, neg_mean_r)
                        .then(BinOp::Multiply, rstd_r);
                    tensor_tensor(row, &scratch, b, BinOp::Add);
                }
                (None, None) => {
                    tensor_scalar(row.clone(), row, BinOp::Add, neg_mean_r)
                        .then(BinOp::Multiply, rstd_r);
                }
            }
        }
        dma_copy(few_rows::spread_rows(out, &rows, d), &xt);
    });
}

/// One row tile's statistics between the forward's pipeline stages.
struct RowStats<'a> {
    /// The row tile.
    xt: Tile,
    /// `(mean, variance)` per row, fp32.
    moments: Tile,
    /// `rsqrt(var + eps)` per row, fp32.
    rstd: Tile,
    /// What the affine path needs of the tile.
    affine: RowAffine<'a>,
}

/// A row tile's inputs to the forward's affine step.
enum RowAffine<'a> {
    /// Through the tensor engine.
    OnPe {
        /// The kernel's held operands.
        pe: &'a AffineOnPe,
        /// The tile's stationary operands.
        factors: RowFactors,
    },
    /// The vector/GpSimd path.
    OnEngines {
        /// `[rows, 2048]` fp32 scratch for the normalised chunks.
        scratch: Tile,
    },
}

/// The bf16 forward's weight and bias applied with the tensor engine's help. Per 512-column
/// chunk of a row tile:
///
/// 1. the vector engine writes `x · weight` into an fp32 PSUM bank (exact for bf16 inputs);
/// 2. two matmuls accumulate `−mean ⊗ weight + std ⊗ bias` into it (outer products, with
///    `std = 1 / rstd`): `mean` and `std` of the tile's rows are each split into [`PIECES`]
///    bf16 pieces that sum to their fp32 values. The first matmul subtracts the mean's leading
///    piece alone, so `x · w − mean₁ · w` cancels exactly before anything small is added; the
///    second adds the other mean pieces and the `std ⊗ bias` pieces. (In one matmul, the
///    `std · bias` term of a near-constant row, where `std` is about `sqrt(eps)`, drowned in
///    the rounding of `mean · w` before the cancellation: 2% errors.)
/// 3. the scalar engine reads the bank back as `psum · rstd`, rounded once to bf16:
///    `(x − mean) · rstd · weight + bias`.
///
/// The vector engine makes one pass instead of two (no separate bias pass on GpSimd), and the
/// scalar engine's pass is the one the plain normalisation needs anyway. bf16 only: fp32
/// inputs would need fp32 matmuls (a quarter of the rate) for a few percent, and f16's narrow
/// exponent range cannot hold the pieces of every `std`.
struct AffineOnPe {
    /// `weight` broadcast across 128 partitions, for the vector engine's product.
    weight: Tile,
    /// The fp32 identity that adds GpSimd's products into PSUM (see [`GPSIMD_BANKS`]).
    eye: Tile,
    /// `[1, D]`: `−weight`, the moving operand of the first matmul.
    lead_moving: Tile,
    /// `[2 · PIECES − 1, D]`: `−weight` for the other mean pieces, then `bias` for each `std`
    /// piece.
    rest_moving: Tile,
}

/// The stationary operands of one row tile's [`AffineOnPe::apply`].
struct RowFactors {
    /// `[1, rows]`: the mean's leading piece.
    lead: Tile,
    /// `[2 · PIECES − 1, rows]`: the mean's other pieces, then those of `std`.
    rest: Tile,
}

/// `(k, m)`: `k` of every `m` PSUM banks take step 1 on GpSimd instead (the exact products
/// into an SBUF fp32 tile, added into the bank by an fp32 identity matmul), which balances the
/// vector engine (also computing the statistics) against the tensor engine (trn2 bf16 bench
/// shape: 579 → 515 µs with one bank in four; 566 with one in three, 542 with one in eight).
const GPSIMD_BANKS: (usize, usize) = (1, 4);

/// bf16 pieces per fp32 value: 3 × 8 significant bits carry all 24 (with two pieces of `std`,
/// its 2⁻¹⁷ error alone flipped the rounding of 0.14% of the outputs against ATen's).
const PIECES: usize = 3;

impl AffineOnPe {
    /// Loads the operands once for the whole kernel.
    fn new(weight: &Hbm, bias: &Hbm, n: usize, d: usize) -> Self {
        let dt = weight.dtype();
        let lead_moving = sbuf([1, d], dt);
        let rest_moving = sbuf([2 * PIECES - 1, d], dt);
        let neg_weight = |dst: TileRegion| {
            dma_copy(&dst, weight.view().broadcast_to(&dst.shape()));
            tensor_scalar(&dst, &dst, BinOp::Multiply, -1.0);
        };
        neg_weight(lead_moving.region());
        neg_weight(rest_moving.region().slice(0, PIECES - 1, 0, d));
        dma_copy(
            rest_moving.region().slice(PIECES - 1, PIECES, 0, d),
            bias.view().broadcast_to(&[PIECES, d]),
        );
        AffineOnPe {
            weight: broadcast_weight(weight, n, d),
            eye: identity(DType::F32),
            lead_moving,
            rest_moving,
        }
    }

    /// The stationary operands of a row tile from its `mean` (`[rows, 1]`, fp32) and `rstd`:
    /// the pieces of the mean and of `std = 1 / rstd`, transposed to lie along the free dim.
    fn row_factors(mean: &TileRegion, rstd: &Tile) -> RowFactors {
        let p = rstd.shape()[0];
        let std = sbuf([p, 1], DType::F32);
        activation(&std, ActFn::Reciprocal, rstd, None, 1.0);
        let lead = sbuf([p, 1], DType::BF16);
        let rest = sbuf([p, 2 * PIECES - 1], DType::BF16);
        let mean_pieces: Vec<TileRegion> = std::iter::once(lead.region())
            .chain((0..PIECES - 1).map(|i| rest.cols(i, 1)))
            .collect();
        let std_pieces: Vec<TileRegion> = (PIECES - 1..2 * PIECES - 1)
            .map(|i| rest.cols(i, 1))
            .collect();
        split_into_pieces(&mean_pieces, mean);
        split_into_pieces(&std_pieces, &std.region());
        RowFactors {
            lead: transposed(&lead, 1.0, DType::BF16),
            rest: transposed(&rest, 1.0, DType::BF16),
        }
    }

    /// `yt = (xt · weight − mean ⊗ weight + std ⊗ bias) · rstd`, chunk by chunk through PSUM.
    fn apply(&self, yt: &Tile, xt: &Tile, factors: &RowFactors, rstd: &Tile) {
        let [p, d] = xt.shape();
        for (c0, cols) in psum_banks(d) {
            let acc = psum([p, cols], DType::F32);
            let (x, w) = (xt.cols(c0, cols), self.weight.rows(p).cols(c0, cols));
            if (c0 / PSUM_BANK_FMAX) % GPSIMD_BANKS.1 < GPSIMD_BANKS.0 {
                let xw = sbuf([p, cols], DType::F32);
                tensor_tensor(&xw, x, w, BinOp::Multiply).on(ElementwiseEngine::GpSimd);
                nc_matmul(&acc, self.eye.rows(p).cols(0, p), &xw, false);
            } else {
                tensor_tensor(&acc, x, w, BinOp::Multiply);
            }
            nc_matmul(&acc, &factors.lead, self.lead_moving.cols(c0, cols), true);
            nc_matmul(&acc, &factors.rest, self.rest_moving.cols(c0, cols), true);
            activation(yt.cols(c0, cols), ActFn::Identity, &acc, None, rstd);
        }
    }
}

/// Writes `value` (`[P, 1]`, fp32) into the `[P, 1]` bf16 columns `pieces` so that their sum
/// is `value` to `pieces.len()` times bf16's precision: each piece is the rounded remainder of
/// the ones before it (the remainders are exact in fp32; GpSimd takes the subtractions).
fn split_into_pieces(pieces: &[TileRegion], value: &TileRegion) {
    let mut rest = value.clone();
    for (i, piece) in pieces.iter().enumerate() {
        tensor_copy(piece, &rest);
        if i + 1 < pieces.len() {
            let next = sbuf([value.np, 1], DType::F32);
            tensor_tensor(&next, &rest, piece, BinOp::Subtract).on(ElementwiseEngine::GpSimd);
            rest = next.region();
        }
    }
}

/// A weight or bias `[D]` of the forward, broadcast across a row tile's partitions: held in
/// SBUF for the whole kernel, or streamed one chunk at a time when it does not fit.
enum AffineParam<'a> {
    /// Loaded once.
    Held(Tile),
    /// Loaded per chunk.
    Streamed(&'a Hbm),
}

impl<'a> AffineParam<'a> {
    fn new(t: &'a Hbm, n: usize, d: usize, hold: bool) -> Self {
        if hold {
            AffineParam::Held(broadcast_weight(t, n, d))
        } else {
            AffineParam::Streamed(t)
        }
    }

    /// Columns `c0..c0+cols` on `p` partitions.
    fn chunk(&self, p: usize, c0: usize, cols: usize) -> TileRegion {
        match self {
            AffineParam::Held(t) => t.rows(p).cols(c0, cols),
            AffineParam::Streamed(t) => {
                let d = t.dim(0);
                let c = sbuf([p, cols], t.dtype());
                dma_copy(
                    &c,
                    t.reshape(&[1, d]).cols(c0, cols).broadcast_to(&[p, cols]),
                );
                c.region()
            }
        }
    }
}

/// `total (op)= reduce(data)` per row, fp32, on the vector engine: the first chunk writes
/// `total`, later ones combine into it.
fn add_to_row_sum(total: &Tile, data: &TileRegion, first: bool, op: BinOp) {
    if first {
        tensor_reduce(total, op, data, 1, false);
    } else {
        let part = sbuf([data.np, 1], DType::F32);
        tensor_reduce(&part, op, data, 1, false);
        tensor_tensor(total, total, &part, op);
    }
}

/// Gradients of `layernorm` from the saved `mean` and `rstd` (`x̂ = (x − mean) · rstd`,
/// `ĝ = grad_y · weight`, or `grad_y` without a weight):
/// `grad_x = rstd · (ĝ − mean(ĝ) − x̂ · mean(ĝ · x̂))`, `grad_weight = Σ_rows grad_y · x̂` and
/// `grad_bias = Σ_rows grad_y`.
///
/// Rows up to 4096 columns take one pass over `x` and `grad_y` (see the `one_pass` module):
/// the weight and bias gradients accumulate in PSUM across row tiles and the elementwise
/// passes are spread over the vector, scalar and GpSimd engines. Longer rows: per 128-row tile,
/// a first pass over 2048-column chunks accumulates `Σ ĝ` and `Σ ĝ·x̂` per row in fp32, a
/// second writes `grad_x`, and the weight and bias gradients reduce across rows on the tensor
/// engine in a pass of their own. Both are computed whether or not the forward had a weight or
/// bias (autograd drops them then).
#[kernel(
    shape(grad_y = [..B, D], x = [..B, D], weight = [D], mean = [..B], rstd = [..B])
        -> (grad_x = [..B, D], grad_weight = [D], grad_bias = [D]),
    dtype(grad_y in {f32, bf16, f16}, x = grad_y, weight = grad_y, mean in {f32}, rstd in {f32})
        -> (grad_y, grad_y, grad_y),
    require(D >= 1, D <= 16384),
    shard(whole(D), reads(grad_bias: grad_y)),
    tolerance(reduction(D)),
)]
pub fn layernorm_backward(
    grad_y: &Hbm,
    x: &Hbm,
    weight: Option<&Hbm>,
    mean: &Hbm,
    rstd: &Hbm,
) -> (Hbm, Hbm, Hbm) {
    let (n, d) = rows_of(x);
    let dt = x.dtype();
    let grad_x = shared_hbm(x.shape(), dt);
    let [gv, xv, dxv] = [grad_y, x, &grad_x].map(|t| t.reshape(&[n, d]));
    let (mv, rv) = (mean.reshape(&[n, 1]), rstd.reshape(&[n, 1]));
    if super::one_pass::fits(d) {
        let (grad_w, grad_b) = super::one_pass::run(&super::one_pass::Operands {
            grad_y,
            extra: None,
            x,
            weight,
            mean: Some(mean),
            rstd,
            grad_x_outs: &[&grad_x],
            with_bias: true,
        });
        let grad_b = grad_b.expect("one_pass returns the bias gradient it was asked for");
        return (grad_x, grad_w, grad_b);
    }
    let grad_w = shared_hbm(&[d], dt);
    let grad_b = shared_hbm(&[d], dt);
    if n == 0 {
        // An empty batch: `grad_x` is empty and the sums over rows are zeros.
        fill_zeros(&grad_w);
        fill_zeros(&grad_b);
        return (grad_x, grad_w, grad_b);
    }
    let chunks = column_chunks(d);
    // Rows whose fp32 x̂ and ĝ fit the keep budget together stay in SBUF between the two
    // passes; longer rows are loaded and recomputed chunk by chunk in the second.
    let keep_rows = keeps_rows(d, DType::F32, 2);
    // x̂ and ĝ of one chunk of one row tile, in fp32.
    let load_chunk = |rows: &TileSpan, mu: &Tile, r: &Tile, (c0, cols): (usize, usize)| {
        let p = rows.size;
        let (xt, gt) = (sbuf([p, cols], dt), sbuf([p, cols], dt));
        dma_copy(&xt, chunk_of(&xv, rows, c0, cols));
        dma_copy(&gt, chunk_of(&gv, rows, c0, cols));
        let (xhat, ghat) = (sbuf([p, cols], DType::F32), sbuf([p, cols], DType::F32));
        tensor_scalar(&xhat, &xt, BinOp::Subtract, mu).then(BinOp::Multiply, r);
        match weight {
            Some(w) => {
                let wt = sbuf([p, cols], dt);
                dma_copy(
                    &wt,
                    w.reshape(&[1, d]).cols(c0, cols).broadcast_to(&[p, cols]),
                );
                tensor_tensor(&ghat, &gt, &wt, BinOp::Multiply);
            }
            None => tensor_copy(&ghat, &gt),
        }
        (xhat, ghat)
    };
    for_each_row_tile(n, |rows| {
        let p = rows.size;
        let (mu, r) = (sbuf([p, 1], DType::F32), sbuf([p, 1], DType::F32));
        dma_copy(&mu, mv.clone().rows(rows.start.clone(), p));
        dma_copy(&r, rv.clone().rows(rows.start.clone(), p));
        // sum_g = Σ ĝ, dot = Σ ĝ·x̂ per row.
        let (sum_g, dot) = (sbuf([p, 1], DType::F32), sbuf([p, 1], DType::F32));
        let prod = sbuf([p, chunks[0].1], DType::F32);
        let mut kept = std::collections::VecDeque::new();
        for (i, &chunk) in chunks.iter().enumerate() {
            let (xhat, ghat) = load_chunk(&rows, &mu, &r, chunk);
            add_to_row_sum(&sum_g, &ghat.region(), i == 0, BinOp::Add);
            let pr = prod.cols(0, chunk.1);
            tensor_tensor(&pr, &ghat, &xhat, BinOp::Multiply);
            add_to_row_sum(&dot, &pr, i == 0, BinOp::Add);
            if keep_rows {
                kept.push_back((xhat, ghat));
            }
        }
        // grad_x = (ĝ − x̂ · dot/D − sum_g/D) · rstd.
        let (coef, shift) = (sbuf([p, 1], DType::F32), sbuf([p, 1], DType::F32));
        tensor_scalar(&coef, &dot, BinOp::Multiply, 1.0 / d as f32);
        tensor_scalar(&shift, &sum_g, BinOp::Multiply, 1.0 / d as f32);
        for &chunk in &chunks {
            let (xhat, ghat) = kept
                .pop_front()
                .unwrap_or_else(|| load_chunk(&rows, &mu, &r, chunk));
            tensor_scalar(&xhat, &xhat, BinOp::Multiply, &coef).then(BinOp::Add, &shift);
            tensor_tensor(&ghat, &ghat, &xhat, BinOp::Subtract);
            let dx = sbuf([p, chunk.1], dt);
            tensor_scalar(&dx, &ghat, BinOp::Multiply, &r);
            dma_copy(chunk_of(&dxv, &rows, chunk.0, chunk.1), &dx);
        }
    });
    affine_gradients(&AffineGrads {
        grad_y: &gv,
        x: &xv,
        mean: Some(&mv),
        rstd: &rv,
        grad_weight: Some(&grad_w),
        grad_bias: Some(&grad_b),
    });
    (grad_x, grad_w, grad_b)
}
