//! Rotary position embedding (RoPE) with the rotate-half convention of transformers' Llama,
//! forward and backward.
//!
//! `rope(x) = x · cos + rotate_half(x) · sin` with `rotate_half(x) = [−x₂, x₁]` (the two halves
//! of the head dim). A head's `[S, D]` rows are viewed as `[S / G, G · D]`, `G` consecutive
//! positions per partition row, and tiled 128 rows to the partitions; each position tile loads
//! its `cos`/`sin` rows once and applies them to every (batch, head) tile of `q` and `k`. Whole
//! tiles take the product with `cos` and the sum; the rotate-half swaps are per head chunk,
//! shared between the vector engine and GpSimd, software-pipelined across heads. The products
//! and the sum run in the input dtype, as transformers computes them. The backward is in
//! `rope/backward.rs`.

mod backward;

pub use backward::*;

use nki_core::prelude::*;
use std::ops::Range;

/// Most positions one tile row holds (see [`positions_per_row`]).
const MAX_POSITIONS_PER_ROW: usize = 16;

/// Most bytes of one tile row in the forward: it keeps about a dozen such tiles live.
const MAX_ROW_BYTES: usize = 4096;

/// How many consecutive positions share a tile row: a head's `[S, D]` rows are viewed as
/// `[S / G, G · D]` (the same memory), so the instructions over whole tiles (`x · cos`, the
/// sum, the backward's accumulations) cover `G` positions per partition and pay their fixed
/// cost once for all of them. `G` divides `S` and `G · D` stays within `max_width` elements
/// (when `D` does). Of those, the `G` that needs the fewest 128-row tiles, and the smallest
/// such `G`: the rotate-half swaps, two per head chunk, are `2 · G` instructions per tile, so
/// packing positions beyond what saves a tile only adds instructions (llama-tiny, `S = 64`,
/// `D = 16`: 4 rows of 16 positions took 34 instructions per head where 64 rows take 4).
fn positions_per_row(s: usize, d: usize, max_width: usize) -> usize {
    (1..=MAX_POSITIONS_PER_ROW)
        .filter(|&g| g == 1 || (s.is_multiple_of(g) && g * d <= max_width))
        .min_by_key(|&g| ((s / g).div_ceil(PMAX), g))
        .unwrap_or(1)
}

/// How many of a tile's `g` head chunks have their half products on the vector engine; GpSimd
/// takes the rest. GpSimd is slower per element, and the vector engine also runs the
/// whole-tile product with `cos` and the sum, at twice the rate on 16-bit data: 3/8 of the
/// chunks for 16-bit dtypes and 1/4 for fp32 balance the two in the cost model (trn2, D = 128:
/// bf16 608 µs against 617–668 µs for 4/16 or 5/16, fp32 970 µs against 1.03–1.12 ms).
fn vector_chunks(g: usize, dtype: DType) -> usize {
    if dtype.size_bytes() <= 2 {
        3 * g / 8
    } else {
        g / 4
    }
}

/// The `D`-wide head chunks of a `[rows, G · D]` tile: `(start column, half width)`.
fn chunks(width: usize, d: usize) -> impl Iterator<Item = (usize, usize)> {
    (0..width).step_by(d).map(move |c0| (c0, d / 2))
}

/// The rotate-half pairs of a `[rows, G · D]` tile: `(chunk, dst, src, half width)` for both
/// halves of each head chunk in turn, the half at `dst` paired with the other one, at `src`.
fn half_pairs(width: usize, d: usize) -> impl Iterator<Item = (usize, usize, usize, usize)> {
    chunks(width, d)
        .enumerate()
        .flat_map(|(i, (c0, h))| [(i, c0, c0 + h, h), (i, c0 + h, c0, h)])
}

/// One head tile between the two stages of [`apply`]'s pipeline.
struct Rotating {
    /// `x · cos`.
    x_cos: Tile,
    /// `swap_halves(x) · rsin`, being written by the vector engine and GpSimd.
    swapped: Tile,
}

/// First stage of `x · cos + swap_halves(x) · rsin` for a `[rows, G · D]` tile of `G` positions
/// per row, where `rsin` is the position tile's [`rotated_sin`]. The products run in the input
/// dtype, as transformers computes RoPE. The half swaps are per head chunk (two small
/// instructions each), shared between the vector engine and GpSimd by [`vector_chunks`]; the
/// product with `cos` covers the whole tile.
fn start_rotation(x: Tile, cos: &Tile, rsin: &Tile, d: usize) -> Rotating {
    let [rows, width] = x.shape();
    let x_cos = sbuf([rows, width], x.dtype());
    tensor_tensor(&x_cos, &x, cos, BinOp::Multiply);
    let swapped = sbuf([rows, width], x.dtype());
    let on_vector = vector_chunks(width / d, x.dtype());
    for (chunk, dst, src, h) in half_pairs(width, d) {
        let engine = if chunk < on_vector {
            ElementwiseEngine::Vector
        } else {
            ElementwiseEngine::GpSimd
        };
        tensor_tensor(
            swapped.cols(dst, h),
            x.cols(src, h),
            rsin.cols(dst, h),
            BinOp::Multiply,
        )
        .on(engine);
    }
    Rotating { x_cos, swapped }
}

/// Second stage: `dst = x · cos + swap_halves(x) · rsin`, one whole-tile sum.
fn finish_rotation(dst: &Tile, r: &Rotating) {
    tensor_tensor(dst, &r.x_cos, &r.swapped, BinOp::Add);
}

/// `sin` with the signs of the rotation folded in, so that `rotate_half(x) · sin =
/// swap_halves(x) · rsin`: `rsin = [−sin₁, sin₂]` per head chunk. For the gradient,
/// `−rotate_half(g · sin) = swap_halves(g) · [sin₂, −sin₁]` (the rotation is linear and its
/// transpose is its negation).
fn rotated_sin(sin: &Tile, d: usize, backward: bool) -> Tile {
    let [rows, width] = sin.shape();
    let rs = sbuf([rows, width], sin.dtype());
    for (c0, h) in chunks(width, d) {
        let (first, second) = (sin.cols(c0, h), sin.cols(c0 + h, h));
        if backward {
            tensor_copy(rs.cols(c0, h), second);
            tensor_scalar(rs.cols(c0 + h, h), first, BinOp::Multiply, -1.0);
        } else {
            tensor_scalar(rs.cols(c0, h), first, BinOp::Multiply, -1.0);
            tensor_copy(rs.cols(c0 + h, h), second);
        }
    }
    rs
}

/// The `cos` rows of position tile `pos` (`[pos.size, width]`, positions viewed as `width`-wide
/// rows) and the matching [`rotated_sin`], for the forward or the backward.
fn position_tables(
    cos: &Hbm,
    sin: &Hbm,
    width: usize,
    pos: &TileSpan,
    backward: bool,
) -> (Tile, Tile) {
    let (rows, d, dt) = (cos.numel() / width.max(1), cos.dim(1), cos.dtype());
    let [ct, st] = [cos, sin].map(|t| {
        let tile = sbuf([pos.size, width], dt);
        dma_copy(
            &tile,
            t.reshape(&[rows, width]).rows(pos.start.clone(), pos.size),
        );
        tile
    });
    let rsin = rotated_sin(&st, d, backward);
    (ct, rsin)
}

/// Heads per software-pipelined group (see [`for_each_head_group`]): the group is unrolled and
/// the groups are a loop, so a program's size does not grow with the number of heads. The
/// pipeline drains at each group's end (forward, trn2 bf16 bench shape: 664 µs with 8, 635 µs
/// with 16, 620 µs with 32, 608 µs with all 160 heads unrolled).
const HEADS_PER_GROUP: usize = 32;

/// Calls `body` with heads `heads` of a `[heads, …]` tensor in groups of [`HEADS_PER_GROUP`]:
/// the full groups in a sequential loop (the backward's sums run in head order), then the
/// remaining heads.
fn for_each_head_group(heads: Range<usize>, mut body: impl FnMut(&[AffineExpr])) {
    let groups = heads.len() / HEADS_PER_GROUP;
    let first = heads.start as i64;
    sequential_range(groups, |group| {
        let listed: Vec<AffineExpr> = (0..HEADS_PER_GROUP)
            .map(|k| group.clone() * HEADS_PER_GROUP + first + k as i64)
            .collect();
        body(&listed);
    });
    let rest: Vec<AffineExpr> = (heads.start + groups * HEADS_PER_GROUP..heads.end)
        .map(|h| AffineExpr::from(h as i64))
        .collect();
    body(&rest);
}

/// The `[rows, G · D]` view of `t`'s rows for one head: rows `pos` of head `head`, where a
/// head is `rows` view rows.
fn head_rows(t: &Hbm, width: usize, rows: usize, pos: &TileSpan, head: &AffineExpr) -> HbmView {
    t.reshape(&[t.numel() / width.max(1), width])
        .rows(pos.start.clone() + head.clone() * rows, pos.size)
}

/// Rotates every `[B·H, S, D]` head of each `(x, out)`, a head's positions viewed
/// [`positions_per_row`] to a row and tiled 128 rows at a time. The heads of each tensor are
/// split across the cores of the launch ([`program_share`]): every core loads the position
/// tables, and decoding (one position) still splits.
fn apply(xs: &[(&Hbm, &Hbm)], cos: &Hbm, sin: &Hbm) {
    let (s, d) = (cos.dim(0), cos.dim(1));
    let dt = cos.dtype();
    let per_row = positions_per_row(s, d, MAX_ROW_BYTES / dt.size_bytes());
    let (rows, width) = (s / per_row, per_row * d);
    let shares: Vec<Range<usize>> = xs
        .iter()
        .map(|(x, _)| program_share(x.numel() / (s * d).max(1)))
        .collect();
    for_each_tile(rows, PMAX, |pos| {
        let (ct, rsin) = position_tables(cos, sin, width, &pos, false);
        // The heads listed, software-pipelined one deep: head j + 1's products are issued
        // before head j's sum, so the vector engine works on the next head while GpSimd
        // finishes this one's half swaps.
        let pipeline = |heads: &[AffineExpr], x: &Hbm, out: &Hbm| {
            let start = |head: &AffineExpr| {
                let xt = sbuf([pos.size, width], dt);
                dma_copy(&xt, head_rows(x, width, rows, &pos, head));
                start_rotation(xt, &ct, &rsin, d)
            };
            let mut pending = heads.first().map(start);
            for (j, head) in heads.iter().enumerate() {
                let next = heads.get(j + 1).map(start);
                let Some(r) = std::mem::replace(&mut pending, next) else {
                    break;
                };
                let yt = sbuf([pos.size, width], dt);
                finish_rotation(&yt, &r);
                dma_copy(head_rows(out, width, rows, &pos, head), &yt);
            }
        };
        for (&(x, out), share) in xs.iter().zip(&shares) {
            for_each_head_group(share.clone(), |heads| pipeline(heads, x, out));
        }
    });
}

/// Rotary position embedding of `q[B, H, S, D]` and `k[B, Hkv, S, D]` with `cos`/`sin[S, D]`,
/// as transformers' Llama applies it (`q · cos + rotate_half(q) · sin`, halves of `D`).
#[kernel(
    shape(q = [B, H, S, D], k = [B, Hkv, S, D], cos = [S, D], sin = [S, D])
        -> (q_out = [B, H, S, D], k_out = [B, Hkv, S, D]),
    dtype(q in {f32, bf16, f16}, k = q, cos = q, sin = q) -> (q, q),
    require(D % 2 == 0),
    backward(rope_backward, saves(q, k, cos, sin)),
    shard(whole(D), reads(q_out: q, cos, sin), reads(k_out: k, cos, sin)),
    replaces("*.apply_rotary_pos_emb"),
    reference("(q * cos + torch.cat((-q[..., q.shape[-1] // 2:], q[..., : q.shape[-1] // 2]), dim=-1) * sin, k * cos + torch.cat((-k[..., k.shape[-1] // 2:], k[..., : k.shape[-1] // 2]), dim=-1) * sin)"),
    sample(q = [1, 2, 130, 64], k = [1, 1, 130, 64], cos = [130, 64], sin = [130, 64]),
    sample(q = [2, 4, 5, 8], k = [2, 2, 5, 8], cos = [5, 8], sin = [5, 8]),
    sample(q = [1, 3, 7, 32], k = [1, 1, 7, 32], cos = [7, 32], sin = [7, 32]),
    sample(q = [1, 1, 1, 2], k = [1, 1, 1, 2], cos = [1, 2], sin = [1, 2]),
    sample(q = [1, 2, 2, 1040], k = [1, 1, 2, 1040], cos = [2, 1040], sin = [2, 1040]),
    tolerance(elementwise),
    bench(q = [4, 32, 2048, 128], k = [4, 8, 2048, 128], cos = [2048, 128], sin = [2048, 128]),
)]
pub fn rope(q: &Hbm, k: &Hbm, cos: &Hbm, sin: &Hbm) -> (Hbm, Hbm) {
    let q_out = shared_hbm(q.shape(), q.dtype());
    let k_out = shared_hbm(k.shape(), k.dtype());
    apply(&[(q, &q_out), (k, &k_out)], cos, sin);
    (q_out, k_out)
}
