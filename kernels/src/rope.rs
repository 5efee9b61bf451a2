//! Rotary position embedding (RoPE) with the rotate-half convention of transformers' Llama,
//! forward and backward.
//!
//! `rope(x) = x · cos + rotate_half(x) · sin` with `rotate_half(x) = [−x₂, x₁]` (the two halves
//! of the head dim). A head's `[S, D]` rows are viewed as `[S / G, G · D]`, `G` consecutive
//! positions per partition row, and tiled 128 rows to the partitions; each position tile loads
//! its `cos`/`sin` rows once and applies them to every (batch, head) tile of `q` and `k`. Whole
//! tiles take the product with `cos` and the sum; the rotate-half swaps are per head chunk,
//! shared between the vector engine and GpSimd, software-pipelined across heads. The products
//! and the sum run in the input dtype, as transformers computes them; the backward's
//! `cos`/`sin` gradients accumulate over heads in fp32.

use nki_core::prelude::*;

/// Most positions one tile row holds (see [`positions_per_row`]).
const MAX_POSITIONS_PER_ROW: usize = 16;

/// Most bytes of one tile row: the kernel keeps about a dozen such tiles live.
const MAX_ROW_BYTES: usize = 4096;

/// How many consecutive positions share a tile row: a head's `[S, D]` rows are viewed as
/// `[S / G, G · D]` (the same memory), so the instructions over whole tiles (`x · cos`, the
/// sum, the backward's accumulations) cover `G` positions per partition and pay their fixed
/// cost once for all of them. `G` divides `S`.
fn positions_per_row(s: usize, d: usize, dtype: DType) -> usize {
    (1..=MAX_POSITIONS_PER_ROW)
        .rev()
        .find(|&g| s.is_multiple_of(g) && g * d * dtype.size_bytes() <= MAX_ROW_BYTES)
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
    /// The input rows, `[rows, G · D]`.
    x: Tile,
    /// `x · cos`.
    x_cos: Tile,
    /// `swap_halves(x) · rsin`, being written by the vector engine and GpSimd.
    swapped: Tile,
}

/// First stage of `x · cos + swap_halves(x) · rsin` for a `[rows, G · D]` tile of `G` positions
/// per row, where `rsin` is the position tile's [`rotated_sin`] (`rope` itself, or its
/// gradient). The products run in the input dtype, as transformers computes RoPE. The half
/// swaps are per head chunk (two small instructions each), shared between the vector engine
/// and GpSimd by [`vector_chunks`]; the product with `cos` covers the whole tile.
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
    Rotating { x, x_cos, swapped }
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

/// Heads per software-pipelined group (see [`apply`]): the group is unrolled and the groups
/// are a loop, so a program's size does not grow with the number of heads. The pipeline drains
/// at each group's end (trn2 bf16 bench shape: 664 µs with 8, 635 µs with 16, 620 µs with 32,
/// 608 µs with all 160 heads unrolled).
const HEADS_PER_GROUP: usize = 32;

/// The backward's per-position sums over heads: `ac += g · x` and `asn += [g₁ · x₂, g₂ · x₁]`
/// (`g · rotate_half(x)` with its first halves' sign left for the end: negation is exact), for
/// one head's gradient tile `g` and input rows `x` (loaded here), in fp32.
fn accumulate_position_grads(ac: &Tile, asn: &Tile, g: &Tile, x: HbmView, d: usize) {
    let [rows, width] = g.shape();
    let xt = sbuf([rows, width], g.dtype());
    dma_copy(&xt, x);
    // The fp32 accumulations run on GpSimd, the products on the vector engine.
    let t = sbuf([rows, width], DType::F32);
    tensor_tensor(&t, g, &xt, BinOp::Multiply);
    tensor_tensor(ac, ac, &t, BinOp::Add).on(ElementwiseEngine::GpSimd);
    let u = sbuf([rows, width], DType::F32);
    for (_, dst, src, h) in half_pairs(width, d) {
        tensor_tensor(
            u.cols(dst, h),
            g.cols(dst, h),
            xt.cols(src, h),
            BinOp::Multiply,
        );
    }
    tensor_tensor(asn, asn, &u, BinOp::Add).on(ElementwiseEngine::GpSimd);
}

/// Rotates every `[B·H, S, D]` head of each `(x, out)`, a head's positions viewed
/// [`positions_per_row`] to a row and tiled 128 rows at a time. With `grads` (the backward),
/// also accumulates per position, over every head of every input, `grad_cos = Σ g · x` and
/// `grad_sin = Σ g · rotate_half(x)` where `g` is the incoming gradient (`xs` then pairs
/// `(g, x)` and `outs` the gradients to write).
fn apply(xs: &[(&Hbm, Option<&Hbm>, &Hbm)], cos: &Hbm, sin: &Hbm, grads: Option<(&Hbm, &Hbm)>) {
    let (s, d) = (cos.dim(0), cos.dim(1));
    let dt = cos.dtype();
    let per_row = positions_per_row(s, d, dt);
    let (rows, width) = (s / per_row, per_row * d);
    let backward = grads.is_some();
    let [cv, sv] = [cos, sin].map(|t| t.reshape(&[rows, width]));
    for_each_tile(rows, PMAX, |pos| {
        let (ct, st) = (sbuf([pos.size, width], dt), sbuf([pos.size, width], dt));
        dma_copy(&ct, cv.clone().rows(pos.start.clone(), pos.size));
        dma_copy(&st, sv.clone().rows(pos.start.clone(), pos.size));
        let rsin = rotated_sin(&st, d, backward);
        let accs = grads.map(|_| {
            let (ac, asn) = (
                sbuf([pos.size, width], DType::F32),
                sbuf([pos.size, width], DType::F32),
            );
            memset(&ac, 0.0);
            memset(&asn, 0.0);
            (ac, asn)
        });
        let head_rows = |t: &Hbm, head: &AffineExpr| {
            t.reshape(&[t.numel() / width.max(1), width])
                .rows(pos.start.clone() + head.clone() * rows, pos.size)
        };
        // The heads of `g` listed, software-pipelined one deep: head j + 1's products are issued
        // before head j's sum, so the vector engine works on the next head while GpSimd
        // finishes this one's half swaps. In the backward, head j's contributions to the
        // position sums follow, in order.
        let pipeline = |heads: &[AffineExpr], g: &Hbm, x: Option<&Hbm>, out: &Hbm| {
            let start = |head: &AffineExpr| {
                let gt = sbuf([pos.size, width], dt);
                dma_copy(&gt, head_rows(g, head));
                start_rotation(gt, &ct, &rsin, d)
            };
            let mut pending = heads.first().map(start);
            for (j, head) in heads.iter().enumerate() {
                let next = heads.get(j + 1).map(start);
                let Some(r) = std::mem::replace(&mut pending, next) else {
                    break;
                };
                let yt = sbuf([pos.size, width], dt);
                finish_rotation(&yt, &r);
                dma_copy(head_rows(out, head), &yt);
                if let (Some((ac, asn)), Some(x)) = (&accs, x) {
                    accumulate_position_grads(ac, asn, &r.x, head_rows(x, head), d);
                }
            }
        };
        for &(g, x, out) in xs {
            let heads = g.numel() / (s * d).max(1);
            let groups = heads / HEADS_PER_GROUP;
            // Groups of heads in a loop (sequential: the backward's sums run in head order),
            // then the remaining heads.
            sequential_range(groups, |group| {
                let listed: Vec<AffineExpr> = (0..HEADS_PER_GROUP)
                    .map(|k| group.clone() * HEADS_PER_GROUP + k as i64)
                    .collect();
                pipeline(&listed, g, x, out);
            });
            let rest: Vec<AffineExpr> = (groups * HEADS_PER_GROUP..heads)
                .map(|h| AffineExpr::from(h as i64))
                .collect();
            pipeline(&rest, g, x, out);
        }
        if let (Some((ac, asn)), Some((grad_cos, grad_sin))) = (accs, grads) {
            for (c0, h) in chunks(width, d) {
                tensor_scalar(asn.cols(c0, h), asn.cols(c0, h), BinOp::Multiply, -1.0);
            }
            for (acc, out) in [(ac, grad_cos), (asn, grad_sin)] {
                let res = sbuf([pos.size, width], dt);
                tensor_copy(&res, &acc);
                dma_copy(
                    out.reshape(&[rows, width])
                        .rows(pos.start.clone(), pos.size),
                    &res,
                );
            }
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
    replaces("*.apply_rotary_pos_emb"),
    reference("(q * cos + torch.cat((-q[..., q.shape[-1] // 2:], q[..., : q.shape[-1] // 2]), dim=-1) * sin, k * cos + torch.cat((-k[..., k.shape[-1] // 2:], k[..., : k.shape[-1] // 2]), dim=-1) * sin)"),
    sample(q = [1, 2, 130, 64], k = [1, 1, 130, 64], cos = [130, 64], sin = [130, 64]),
    sample(q = [2, 4, 5, 8], k = [2, 2, 5, 8], cos = [5, 8], sin = [5, 8]),
    sample(q = [1, 3, 7, 32], k = [1, 1, 7, 32], cos = [7, 32], sin = [7, 32]),
    sample(q = [1, 1, 1, 2], k = [1, 1, 1, 2], cos = [1, 2], sin = [1, 2]),
    tolerance(elementwise),
    bench(q = [4, 32, 2048, 128], k = [4, 8, 2048, 128], cos = [2048, 128], sin = [2048, 128]),
)]
pub fn rope(q: &Hbm, k: &Hbm, cos: &Hbm, sin: &Hbm) -> (Hbm, Hbm) {
    let q_out = shared_hbm(q.shape(), q.dtype());
    let k_out = shared_hbm(k.shape(), k.dtype());
    apply(&[(q, None, &q_out), (k, None, &k_out)], cos, sin, None);
    (q_out, k_out)
}

/// Gradients of `rope`: `grad_q = grad_q_out · cos − rotate_half(grad_q_out · sin)` (the
/// rotation is linear, and its transpose is its negation), the same for `k`; and, summed over
/// every batch and head of both, `grad_cos = Σ grad · x` and `grad_sin = Σ grad ·
/// rotate_half(x)` per position (fp32 accumulators, rounded once).
#[kernel(
    shape(grad_q_out = [B, H, S, D], grad_k_out = [B, Hkv, S, D], q = [B, H, S, D], k = [B, Hkv, S, D], cos = [S, D], sin = [S, D])
        -> (grad_q = [B, H, S, D], grad_k = [B, Hkv, S, D], grad_cos = [S, D], grad_sin = [S, D]),
    dtype(grad_q_out in {f32, bf16, f16}, grad_k_out = grad_q_out, q = grad_q_out, k = grad_q_out, cos = grad_q_out, sin = grad_q_out)
        -> (grad_q_out, grad_q_out, grad_q_out, grad_q_out),
    require(D % 2 == 0),
    tolerance(reduction(B)),
)]
pub fn rope_backward(
    grad_q_out: &Hbm,
    grad_k_out: &Hbm,
    q: &Hbm,
    k: &Hbm,
    cos: &Hbm,
    sin: &Hbm,
) -> (Hbm, Hbm, Hbm, Hbm) {
    let dt = grad_q_out.dtype();
    let grad_q = shared_hbm(grad_q_out.shape(), dt);
    let grad_k = shared_hbm(grad_k_out.shape(), dt);
    let grad_cos = shared_hbm(cos.shape(), dt);
    let grad_sin = shared_hbm(sin.shape(), dt);
    apply(
        &[
            (grad_q_out, Some(q), &grad_q),
            (grad_k_out, Some(k), &grad_k),
        ],
        cos,
        sin,
        Some((&grad_cos, &grad_sin)),
    );
    (grad_q, grad_k, grad_cos, grad_sin)
}
