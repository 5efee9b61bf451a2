//! The flash-attention backward: `p` recomputed from the saved log-sum-exp, `dQ` in PSUM, `dK`
//! and `dV` in fp32 SBUF accumulators over the heads of each group.

use super::*;

/// Gradients of `flash_attention` from the saved `q`, `k`, `v`, `out` and `lse` (see the module
/// doc): `dV = Σ pᵀ·dO`, `dK = scale · Σ dsᵀ·q`, `dQ = scale · ds·k` with
/// `ds = p ∘ (dO·vᵀ − rowsum(dO ∘ out) + grad_lse)`, summed over the heads of each group.
#[kernel(
    shape(grad_out = [B, H, S, Dh], grad_lse = [B, H, S], q = [B, H, S, Dh], k = [B, Hkv, Sk, Dh],
          v = [B, Hkv, Sk, Dh], out = [B, H, S, Dh], lse = [B, H, S])
        -> (grad_q = [B, H, S, Dh], grad_k = [B, Hkv, Sk, Dh], grad_v = [B, Hkv, Sk, Dh]),
    dtype(grad_out in {f32, bf16, f16}, grad_lse in {f32}, q = grad_out, k = grad_out,
          v = grad_out, out = grad_out, lse in {f32})
        -> (grad_out, grad_out, grad_out),
    require(Dh <= 128, H % Hkv == 0, Sk >= 1, Sk <= 8192),
    shard(whole(Sk, Dh), whole(S) if causal, together(H, Hkv)),
    tolerance(reduction(Sk)),
)]
#[allow(clippy::too_many_arguments)]
pub fn flash_attention_backward(
    grad_out: &Hbm,
    grad_lse: &Hbm,
    q: &Hbm,
    k: &Hbm,
    v: &Hbm,
    out: &Hbm,
    lse: &Hbm,
    #[default(false)] causal: bool,
    scale: Option<f32>,
) -> (Hbm, Hbm, Hbm) {
    let d = Dims::of(q, k);
    let dt = q.dtype();
    let scale = resolve_scale(scale, d.dh);
    let (sign, mag) = (scale.signum(), scale.abs());
    let grad_q = shared_hbm(q.shape(), dt);
    let grad_k = shared_hbm(k.shape(), dt);
    let grad_v = shared_hbm(v.shape(), dt);
    let [qv, gov, ov, dqv] =
        [q, grad_out, out, &grad_q].map(|t| t.reshape(&[d.b * d.h * d.s, d.dh]));
    let [kv, vv, dkv, dvv] =
        [k, v, &grad_k, &grad_v].map(|t| t.reshape(&[d.b * d.hkv * d.sk, d.dh]));
    let [lv, glv] = [lse, grad_lse].map(|t| t.reshape(&[d.b * d.h * d.s, 1]));
    let mask = causal.then(causal_mask);
    let group = d.group();
    let tiles = d.key_tiles();
    // The cores of the launch split the KV heads: a KV head's dK and dV sum over its query
    // heads and tiles, so they stay on one core.
    let kv_heads = kv_head_share(&d);
    affine_range(kv_heads.len(), |i| {
        let bg = offset(i, kv_heads.start);
        let kv_row0 = bg.clone() * d.sk;
        let heads = KvHead::load(&kv, &vv, &kv_row0, d, true);
        let v_t = heads.v_t.as_ref().expect("vᵀ is held");
        let side = [PMAX.min(d.sk), tiles.len() * d.dh];
        let (dk_acc, dv_acc) = (sbuf(side, DType::F32), sbuf(side, DType::F32));
        memset(&dk_acc, 0.0);
        memset(&dv_acc, 0.0);
        // Query heads and tiles accumulate into dK and dV: in order.
        sequential_range(group, |r| {
            let head_row0 = (bg.clone() * group + r) * d.s;
            for_each_query_tile(d.s, PMAX, 0..d.s.div_ceil(PMAX), causal, true, |rows| {
                let row0 = head_row0.clone() + rows.start.clone();
                let qs = rows.size;
                let qn = load_rows(&qv, row0.clone(), qs);
                let q_t = transposed(&qn, sign, dt);
                let gon = load_rows(&gov, row0.clone(), qs);
                let go_t = transposed(&gon, 1.0, dt);
                let neg_lse = load_rows(&lv, row0.clone(), qs);
                tensor_scalar(&neg_lse, &neg_lse, BinOp::Multiply, -1.0);
                // Δ = rowsum(dO ∘ O) − grad_lse, fp32.
                let on = load_rows(&ov, row0.clone(), qs);
                let prod = sbuf([qs, d.dh], DType::F32);
                let delta = sbuf([qs, 1], DType::F32);
                tensor_tensor(&prod, &gon, &on, BinOp::Multiply);
                tensor_reduce(&delta, BinOp::Add, &prod, 1, false);
                let gl = load_rows(&glv, row0.clone(), qs);
                tensor_tensor(&delta, &delta, &gl, BinOp::Subtract);
                let neg_delta = sbuf([qs, 1], DType::F32);
                tensor_scalar(&neg_delta, &delta, BinOp::Multiply, -1.0);
                let dq = psum([qs, d.dh], DType::F32);
                let last_key = static_start(&rows).filter(|_| causal).map(|q0| q0 + qs - 1);
                let mut first = true;
                for (j, &(k0, kw)) in tiles.iter().enumerate() {
                    if last_key.is_some_and(|last| k0 > last) {
                        break;
                    }
                    // p = exp(s − lse), with the mask on the diagonal block.
                    let scores = psum([qs, kw], DType::F32);
                    nc_matmul(&scores, &q_t, heads.k_t.cols(k0, kw), false);
                    let masked = match (&mask, static_start(&rows)) {
                        (Some(mask), Some(q0)) if k0 + kw - 1 > q0 => {
                            let t = sbuf([qs, kw], DType::F32);
                            tensor_tensor(
                                &t,
                                &scores,
                                mask_window(mask, qs, q0 - k0, kw),
                                BinOp::Add,
                            );
                            t.region()
                        }
                        _ => scores.region(),
                    };
                    let p = sbuf([qs, kw], dt);
                    activation(&p, ActFn::Exp, &masked, Some(neg_lse.region()), mag);
                    // ds = p ∘ (dO·vᵀ − Δ).
                    let dp = psum([qs, kw], DType::F32);
                    nc_matmul(&dp, &go_t, v_t.cols(k0, kw), false);
                    let ds32 = sbuf([qs, kw], DType::F32);
                    activation(&ds32, ActFn::Identity, &dp, Some(neg_delta.region()), 1.0);
                    let ds = sbuf([qs, kw], dt);
                    tensor_tensor(&ds, &ds32, &p, BinOp::Multiply);
                    // dV_j += pᵀ·dO, dK_j += dsᵀ·q (scaled at the end), dQ += ds·k_j.
                    let (dv_part, dk_part) =
                        (psum([kw, d.dh], DType::F32), psum([kw, d.dh], DType::F32));
                    nc_matmul(&dv_part, &p, &gon, false);
                    nc_matmul(&dk_part, &ds, &qn, false);
                    let cols = j * d.dh;
                    tensor_tensor(
                        dv_acc.rows(kw).cols(cols, d.dh),
                        dv_acc.rows(kw).cols(cols, d.dh),
                        &dv_part,
                        BinOp::Add,
                    );
                    tensor_tensor(
                        dk_acc.rows(kw).cols(cols, d.dh),
                        dk_acc.rows(kw).cols(cols, d.dh),
                        &dk_part,
                        BinOp::Add,
                    );
                    let ds_t = transposed(&ds, 1.0, dt);
                    nc_matmul(&dq, &ds_t, &heads.k[j], !first);
                    first = false;
                }
                let dq_out = sbuf([qs, d.dh], dt);
                tensor_scalar(&dq_out, &dq, BinOp::Multiply, scale);
                dma_copy(dqv.clone().rows(row0, qs), &dq_out);
            });
        });
        for (j, &(k0, kw)) in tiles.iter().enumerate() {
            let cols = j * d.dh;
            let (dk_out, dv_out) = (sbuf([kw, d.dh], dt), sbuf([kw, d.dh], dt));
            tensor_scalar(
                &dk_out,
                dk_acc.rows(kw).cols(cols, d.dh),
                BinOp::Multiply,
                scale,
            );
            tensor_copy(&dv_out, dv_acc.rows(kw).cols(cols, d.dh));
            dma_copy(dkv.clone().rows(kv_row0.clone() + k0, kw), &dk_out);
            dma_copy(dvv.clone().rows(kv_row0.clone() + k0, kw), &dv_out);
        }
    });
    (grad_q, grad_k, grad_v)
}
