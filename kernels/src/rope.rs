//! Rotary position embedding (RoPE) with the rotate-half convention of transformers' Llama,
//! forward and backward.
//!
//! `rope(x) = x · cos + rotate_half(x) · sin` with `rotate_half(x) = [−x₂, x₁]` (the two halves
//! of the head dim). Positions are tiled 128 to the partitions; each position tile loads its
//! `cos`/`sin` rows once and applies them to every (batch, head) row tile of `q` and `k`. The
//! products and the sum run in the input dtype, as transformers computes them; the backward's
//! `cos`/`sin` gradients accumulate over heads in fp32.

use nki_core::prelude::*;

/// `dst = x · cos + swap_halves(x) · rsin` for a `[rows, D]` tile, where `rsin` is the
/// position tile's [`rotated_sin`]: `rope` itself, or its gradient. The products and the sum run
/// in the input dtype, as transformers computes RoPE (the vector engine is twice as fast on
/// 16-bit data, and this kernel is vector-bound).
fn rotate(dst: &Tile, x: &Tile, cos: &TileRegion, rsin: &TileRegion) {
    let [rows, d] = x.shape();
    let h = d / 2;
    let r = sbuf([rows, d], x.dtype());
    tensor_tensor(r.cols(0, h), x.cols(h, h), rsin.cols(0, h), BinOp::Multiply);
    tensor_tensor(r.cols(h, h), x.cols(0, h), rsin.cols(h, h), BinOp::Multiply);
    let t = sbuf([rows, d], x.dtype());
    // `x · cos` on GpSimd, next to the vector engine's two half products: per (head, position
    // tile) the instructions are small, and their fixed cost, not their elements, is the bound.
    tensor_tensor(&t, x, cos, BinOp::Multiply).on(ElementwiseEngine::GpSimd);
    tensor_tensor(dst, &t, &r, BinOp::Add);
}

/// `sin` with the signs of the rotation folded in, so that `rotate_half(x) · sin =
/// swap_halves(x) · rsin`: `rsin = [−sin₁, sin₂]`. For the gradient, `−rotate_half(g · sin) =
/// swap_halves(g) · [sin₂, −sin₁]` (the rotation is linear and its transpose is its negation).
fn rotated_sin(sin: &Tile, backward: bool) -> Tile {
    let [rows, d] = sin.shape();
    let h = d / 2;
    let rs = sbuf([rows, d], sin.dtype());
    if backward {
        tensor_copy(rs.cols(0, h), sin.cols(h, h));
        tensor_scalar(rs.cols(h, h), sin.cols(0, h), BinOp::Multiply, -1.0);
    } else {
        tensor_scalar(rs.cols(0, h), sin.cols(0, h), BinOp::Multiply, -1.0);
        tensor_copy(rs.cols(h, h), sin.cols(h, h));
    }
    rs
}

/// Applies [`rotate`] to every `[B·H, S, D]` row tile of each `(x, out)`, positions tiled 128.
/// With `grads` (the backward), also accumulates per position, over every head of every input,
/// `grad_cos = Σ g · x` and `grad_sin = Σ g · rotate_half(x)` where `g` is the incoming gradient
/// (`xs` then pairs `(g, x)` and `outs` the gradients to write).
fn apply(xs: &[(&Hbm, Option<&Hbm>, &Hbm)], cos: &Hbm, sin: &Hbm, grads: Option<(&Hbm, &Hbm)>) {
    let (s, d) = (cos.dim(0), cos.dim(1));
    let h = d / 2;
    let dt = cos.dtype();
    let backward = grads.is_some();
    for_each_tile(s, PMAX, |pos| {
        let (ct, st) = (sbuf([pos.size, d], dt), sbuf([pos.size, d], dt));
        dma_copy(&ct, cos.rows(pos.start.clone(), pos.size));
        dma_copy(&st, sin.rows(pos.start.clone(), pos.size));
        let rsin = rotated_sin(&st, backward);
        let accs = grads.map(|_| {
            let (ac, asn) = (
                sbuf([pos.size, d], DType::F32),
                sbuf([pos.size, d], DType::F32),
            );
            memset(&ac, 0.0);
            memset(&asn, 0.0);
            (ac, asn)
        });
        for &(g, x, out) in xs {
            let heads = g.numel() / (s * d).max(1);
            let (gv, ov) = (g.reshape(&[heads * s, d]), out.reshape(&[heads * s, d]));
            let xv = x.map(|x| x.reshape(&[heads * s, d]));
            // Heads accumulate into the position tile's sums in the backward: in order.
            sequential_range(heads, |i| {
                let row0 = i * s as i64 + pos.start.clone();
                let gt = sbuf([pos.size, d], dt);
                dma_copy(&gt, gv.clone().rows(row0.clone(), pos.size));
                let yt = sbuf([pos.size, d], dt);
                rotate(&yt, &gt, &ct.region(), &rsin.region());
                dma_copy(ov.clone().rows(row0.clone(), pos.size), &yt);
                if let (Some((ac, asn)), Some(xv)) = (&accs, &xv) {
                    let xt = sbuf([pos.size, d], dt);
                    dma_copy(&xt, xv.clone().rows(row0, pos.size));
                    // The fp32 accumulations run on GpSimd, the products on the vector engine.
                    let t = sbuf([pos.size, d], DType::F32);
                    tensor_tensor(&t, &gt, &xt, BinOp::Multiply);
                    tensor_tensor(ac, ac, &t, BinOp::Add).on(ElementwiseEngine::GpSimd);
                    // g · rotate_half(x) = [−g₁ · x₂, g₂ · x₁]: accumulated as [g₁ · x₂, g₂ · x₁],
                    // the first half negated once after the last head (negation is exact).
                    let u = sbuf([pos.size, d], DType::F32);
                    tensor_tensor(u.cols(0, h), gt.cols(0, h), xt.cols(h, h), BinOp::Multiply);
                    tensor_tensor(u.cols(h, h), gt.cols(h, h), xt.cols(0, h), BinOp::Multiply);
                    tensor_tensor(asn, asn, &u, BinOp::Add).on(ElementwiseEngine::GpSimd);
                }
            });
        }
        if let (Some((ac, asn)), Some((grad_cos, grad_sin))) = (accs, grads) {
            tensor_scalar(asn.cols(0, h), asn.cols(0, h), BinOp::Multiply, -1.0);
            for (acc, out) in [(ac, grad_cos), (asn, grad_sin)] {
                let res = sbuf([pos.size, d], dt);
                tensor_copy(&res, &acc);
                dma_copy(out.rows(pos.start.clone(), pos.size), &res);
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
