//! The flash-attention forward: query tiles against the keys of their kv head, an online
//! softmax software-pipelined across the engines.

use super::*;

/// Attention `softmax(q·kᵀ·scale) · v` over the last two dims of `q[B, H, S, Dh]`,
/// `k[B, Hkv, Sk, Dh]` and `v[B, Hkv, Sk, Dh]`, with grouped-query attention (query head `h`
/// uses kv head `h / (H / Hkv)`), an optional top-left causal mask, and `scale` defaulting to
/// `1/√Dh`. Returns the output and the fp32 log-sum-exp of each query row's scaled scores.
///
/// See the module doc for the tiling: keys and values of a kv head stay on chip, 512-key score
/// blocks in fp32 PSUM, online softmax statistics in fp32, `p·v` accumulated in PSUM.
#[kernel(
    shape(q = [B, H, S, Dh], k = [B, Hkv, Sk, Dh], v = [B, Hkv, Sk, Dh])
        -> (out = [B, H, S, Dh], lse = [B, H, S]),
    dtype(q in {f32, bf16, f16}, k = q, v = q) -> (q, f32),
    require(Dh <= 128, H % Hkv == 0, Sk >= 1, Sk <= 8192),
    backward(flash_attention_backward, saves(q, k, v, out, lse)),
    shard(whole(Sk, Dh), whole(S) if causal, together(H, Hkv)),
    replaces("aten::scaled_dot_product_attention", "*Attention"),
    reference("(F.scaled_dot_product_attention(q, k, v, is_causal=causal, scale=scale, enable_gqa=True), torch.logsumexp((q.float() @ k.float().repeat_interleave(q.shape[1] // k.shape[1], 1).transpose(-1, -2)) * (q.shape[-1] ** -0.5 if scale is None else scale) + (torch.full((q.shape[2], k.shape[2]), float('-inf')).triu(1) if causal else 0.0), -1))"),
    sample(q = [1, 2, 130, 64], k = [1, 2, 130, 64], v = [1, 2, 130, 64]),
    sample(q = [2, 4, 200, 32], k = [2, 2, 600, 32], v = [2, 2, 600, 32], causal = true),
    sample(q = [1, 2, 300, 16], k = [1, 1, 300, 16], v = [1, 1, 300, 16], causal = true, scale = 0.3),
    sample(q = [1, 1, 5, 8], k = [1, 1, 700, 8], v = [1, 1, 700, 8], dtypes = {f32, bf16}),
    sample(q = [1, 1, 1, 4], k = [1, 1, 1, 4], v = [1, 1, 1, 4], causal = true),
    tolerance(reduction(Sk)),
    autocast(lower),
    bench(q = [1, 8, 4096, 128], k = [1, 8, 4096, 128], v = [1, 8, 4096, 128]),
)]
pub fn flash_attention(
    q: &Hbm,
    k: &Hbm,
    v: &Hbm,
    #[default(false)] causal: bool,
    scale: Option<f32>,
) -> (Hbm, Hbm) {
    let d = Dims::of(q, k);
    let dt = q.dtype();
    let scale = resolve_scale(scale, d.dh);
    let (sign, mag) = (scale.signum(), scale.abs());
    let out = shared_hbm(q.shape(), dt);
    let lse = shared_hbm(&[d.b, d.h, d.s], DType::F32);
    let [qv, ov] = [q, &out].map(|t| t.reshape(&[d.b * d.h * d.s, d.dh]));
    let [kv, vv] = [k, v].map(|t| t.reshape(&[d.b * d.hkv * d.sk, d.dh]));
    let lv = lse.reshape(&[d.b * d.h * d.s, 1]);
    let mask = causal.then(causal_mask);
    let group = d.group();
    // The cores of the launch split the KV heads, or with fewer KV heads than cores, each KV
    // head's query tiles.
    let split_heads = d.b * d.hkv >= num_programs(&[0]);
    let kv_heads = if split_heads {
        kv_head_share(&d)
    } else {
        0..d.b * d.hkv
    };
    let query_tiles = d.s.div_ceil(QUERY_GROUP);
    affine_range(kv_heads.len(), |i| {
        let bg = offset(i, kv_heads.start);
        let heads = KvHead::load(&kv, &vv, &(bg.clone() * d.sk), d, false);
        affine_range(group, |r| {
            let head_row0 = (bg.clone() * group + r) * d.s;
            let tiles = if split_heads {
                0..query_tiles
            } else {
                program_share(query_tiles)
            };
            for_each_query_tile(d.s, QUERY_GROUP, tiles, causal, false, |rows| {
                // The group's 128-row tiles, interleaved by `attend`.
                let subs: Vec<(usize, usize)> = spans(rows.size, PMAX).collect();
                let q_ts: Vec<Tile> = subs
                    .iter()
                    .map(|&(o, qs)| {
                        let qn = load_rows(&qv, head_row0.clone() + rows.start.clone() + o, qs);
                        transposed(&qn, sign, dt)
                    })
                    .collect();
                let tiles: Vec<QueryTile> = subs
                    .iter()
                    .zip(&q_ts)
                    .map(|(&(o, _), q_t)| QueryTile {
                        q_t,
                        heads: &heads,
                        mask: mask.as_ref().zip(static_start(&rows).map(|q0| q0 + o)),
                        mag,
                        dh: d.dh,
                    })
                    .collect();
                for (&(o, qs), (acc, sum, neg_m)) in subs.iter().zip(attend(&tiles, d.sk)) {
                    let row0 = head_row0.clone() + rows.start.clone() + o;
                    // out = acc / sum (rounded once); lse = m + ln(sum).
                    let inv = sbuf([qs, 1], DType::F32);
                    activation(&inv, ActFn::Reciprocal, &sum, None, 1.0);
                    let o = sbuf([qs, d.dh], dt);
                    tensor_scalar(&o, &acc, BinOp::Multiply, &inv);
                    dma_copy(ov.clone().rows(row0.clone(), qs), &o);
                    let l = sbuf([qs, 1], DType::F32);
                    activation(&l, ActFn::Log, &sum, None, 1.0);
                    tensor_tensor(&l, &l, &neg_m, BinOp::Subtract);
                    dma_copy(lv.clone().rows(row0, qs), &l);
                }
            });
        });
    });
    (out, lse)
}

/// The online softmax of every query tile of `tiles` over the keys it attends (`sk` keys,
/// fewer for a causal tile), in blocks of up to [`BANKS_PER_BLOCK`] pieces of up to 512 keys:
/// returns per tile the fp32 output accumulator `Σ exp(s − m) · v` (in PSUM), the row sums
/// `Σ exp(s − m)` and `−m` (`m` the running maximum of the scaled scores).
///
/// Each block runs in three stages: its scores (tensor engine), [`QueryTile::softmax`]
/// (maximum and exponentials, vector and scalar engines) and the multiply
/// ([`QueryTile::transpose_p`], [`QueryTile::rescale`], [`QueryTile::multiply`]: `pᵀ`, the
/// accumulator's rescale, `p·v`). The blocks of all tiles form one stream, the tiles' blocks
/// interleaved, issued software-pipelined: while item `n` is multiplied, the scores of item
/// `n + 3` are computed and item `n + 2` is softmaxed. Within an item the tensor engine's queue
/// is `pᵀ` transposes, the next scores, then `p·v`, so the vector engine's copy of `pᵀ` out of
/// PSUM overlaps the scores instead of stalling the tensor engine. With the engines' in-order
/// queues each link of the chain (max → exp → transpose → copy → multiply) then has an item or
/// more of slack. Blocks of 1024 keys halve the per-block bookkeeping (the running maximum,
/// `alpha`, the accumulator's rescale) per key.
fn attend(tiles: &[QueryTile], sk: usize) -> Vec<(Tile, Tile, Tile)> {
    let blocks: Vec<Vec<Vec<(usize, usize)>>> = tiles
        .iter()
        .map(|t| {
            let [_, qs] = t.q_t.shape();
            let last_key = t.mask.map(|(_, q0)| q0 + qs - 1);
            let pieces: Vec<(usize, usize)> = (0..sk)
                .step_by(KEY_BLOCK)
                .map(|k0| (k0, KEY_BLOCK.min(sk - k0)))
                .take_while(|&(k0, _)| last_key.is_none_or(|last| k0 <= last))
                .collect();
            pieces.chunks(BANKS_PER_BLOCK).map(<[_]>::to_vec).collect()
        })
        .collect();
    let most = blocks.iter().map(Vec::len).max().unwrap_or(0);
    let items: Vec<(usize, &[(usize, usize)])> = (0..most)
        .flat_map(|b| {
            blocks
                .iter()
                .enumerate()
                .filter_map(move |(t, bl)| bl.get(b).map(|p| (t, p.as_slice())))
        })
        .collect();
    let accs: Vec<Tile> = tiles
        .iter()
        .map(|t| psum([t.q_t.shape()[1], t.dh], DType::F32))
        .collect();
    // Scores run three items ahead and the softmax two ahead of the items being multiplied.
    let mut scored: std::collections::VecDeque<Vec<Tile>> = items
        .iter()
        .take(3)
        .map(|&(t, p)| tiles[t].scores(p))
        .collect();
    let mut neg_m: Vec<Option<Tile>> = vec![None; tiles.len()];
    let mut sum: Vec<Option<Tile>> = vec![None; tiles.len()];
    let mut softmaxed: std::collections::VecDeque<Softmaxed> = std::collections::VecDeque::new();
    let mut softmax_next = |n: usize, scored: &mut std::collections::VecDeque<Vec<Tile>>| {
        let (t, pieces) = items[n];
        let scores = scored.pop_front().expect("scores issued ahead");
        let s = tiles[t].softmax(pieces, &scores, neg_m[t].as_ref());
        neg_m[t] = Some(s.neg_m.clone());
        s
    };
    for n in 0..items.len().min(2) {
        let s = softmax_next(n, &mut scored);
        softmaxed.push_back(s);
    }
    for (n, &(t, _)) in items.iter().enumerate() {
        let s = softmaxed
            .pop_front()
            .expect("softmax issued two items ahead");
        let p_t = tiles[t].transpose_p(&s);
        sum[t] = Some(tiles[t].rescale(&accs[t], &s, sum[t].take()));
        if let Some(&(lt, lp)) = items.get(n + 3) {
            scored.push_back(tiles[lt].scores(lp));
        }
        tiles[t].multiply(&accs[t], &s, &p_t);
        if n + 2 < items.len() {
            let next = softmax_next(n + 2, &mut scored);
            softmaxed.push_back(next);
        }
    }
    accs.into_iter()
        .zip(sum)
        .zip(neg_m)
        .map(|((acc, sum), neg_m)| {
            let every = "every query tile attends at least one key";
            (acc, sum.expect(every), neg_m.expect(every))
        })
        .collect()
}

/// One query tile of the forward against its key blocks.
struct QueryTile<'a> {
    /// `±qᵀ` `[Dh, rows]`.
    q_t: &'a Tile,
    /// The kv head on chip.
    heads: &'a KvHead,
    /// The causal mask and the tile's first query row, when causal.
    mask: Option<(&'a Tile, usize)>,
    /// `|scale|`.
    mag: f32,
    /// Head dim.
    dh: usize,
}

impl QueryTile<'_> {
    /// Stage 1 of a block: the raw scores `±q·kᵀ` of each piece in fp32 PSUM (a bank each).
    fn scores(&self, pieces: &[(usize, usize)]) -> Vec<Tile> {
        let [_, qs] = self.q_t.shape();
        pieces
            .iter()
            .map(|&(k0, w)| {
                let scores = psum([qs, w], DType::F32);
                nc_matmul(&scores, self.q_t, self.heads.k_t.cols(k0, w), false);
                scores
            })
            .collect()
    }

    /// Stage 2 of a block: the mask on pieces crossing the diagonal, the new running
    /// `−m = min(−|scale|·max, −m_old)` (vector: a reduce and one fused instruction per
    /// piece), `alpha = exp(m_old − m_new)` and `p = exp(|scale|·s − m)` with its row sums
    /// (scalar).
    fn softmax(
        &self,
        pieces: &[(usize, usize)],
        scores: &[Tile],
        neg_m_old: Option<&Tile>,
    ) -> Softmaxed {
        let [_, qs] = self.q_t.shape();
        let masked: Vec<TileRegion> = pieces
            .iter()
            .zip(scores)
            .map(|(&(k0, w), s)| match self.mask {
                Some((mask, q0)) if k0 + w - 1 > q0 => {
                    let t = sbuf([qs, w], DType::F32);
                    tensor_tensor(&t, s, mask_window(mask, qs, q0 - k0, w), BinOp::Add);
                    t.region()
                }
                _ => s.region(),
            })
            .collect();
        let maxima: Vec<Tile> = masked
            .iter()
            .map(|m| {
                let t = sbuf([qs, 1], DType::F32);
                tensor_reduce(&t, BinOp::Maximum, m, 1, false);
                t
            })
            .collect();
        let neg_m = sbuf([qs, 1], DType::F32);
        for (i, max) in maxima.iter().enumerate() {
            let step = tensor_scalar(&neg_m, max, BinOp::Multiply, -self.mag);
            match (i, neg_m_old) {
                (0, None) => {}
                (0, Some(old)) => step.then(BinOp::Minimum, old),
                _ => step.then(BinOp::Minimum, &neg_m),
            }
        }
        // An infinite maximum (a row with a +inf score, or only -inf ones) is clamped to the
        // largest finite value, as torch.logsumexp sets it aside: exp(s − m) is then inf for
        // the +inf scores and 0 for the rest, never inf − inf, and lse = ln Σ + m is ±inf as the
        // reference has it.
        tensor_scalar(&neg_m, &neg_m, BinOp::Maximum, -f32::MAX).then(BinOp::Minimum, f32::MAX);
        let alpha = neg_m_old.map(|old| {
            let alpha = sbuf([qs, 1], DType::F32);
            activation(&alpha, ActFn::Exp, old, Some(neg_m.region()), -1.0);
            alpha
        });
        let width: usize = pieces.iter().map(|&(_, w)| w).sum();
        let p = sbuf([qs, width], self.q_t.dtype());
        let mut col = 0;
        let block_sums = pieces
            .iter()
            .zip(&masked)
            .map(|(&(_, w), m)| {
                let block_sum = sbuf([qs, 1], DType::F32);
                activation_reduce(
                    p.cols(col, w),
                    ActFn::Exp,
                    m,
                    BinOp::Add,
                    &block_sum,
                    Some(neg_m.region()),
                    self.mag,
                );
                col += w;
                block_sum
            })
            .collect();
        Softmaxed {
            k0: pieces[0].0,
            p,
            block_sums,
            neg_m,
            alpha,
        }
    }

    /// Stage 3 of a block, first part: `pᵀ` in 128-key pieces side by side in PSUM (tensor
    /// engine; one bank holds 2 KiB per partition, so up to eight 16-bit or four fp32 pieces)
    /// copied to SBUF a bank at a time (vector).
    fn transpose_p(&self, s: &Softmaxed) -> Tile {
        let [qs, w] = s.p.shape();
        let dt = s.p.dtype();
        let pieces = key_pieces(w);
        let parts = PMAX.min(w);
        let per_bank = (nki_core::target::PSUM_BANK_BYTES / (qs * dt.size_bytes())).max(1);
        let p_t = sbuf([parts, pieces.len() * qs], dt);
        for (g, group) in pieces.chunks(per_bank).enumerate() {
            let first = g * per_bank;
            let p_t_ps = psum([parts, group.len() * qs], dt);
            for (c, &(c0, cw)) in group.iter().enumerate() {
                nc_transpose(p_t_ps.region().slice(0, cw, c * qs, qs), s.p.cols(c0, cw));
            }
            // Full-height pieces in one copy; a ragged last piece on its own.
            let full = group.iter().take_while(|&&(_, cw)| cw == parts).count();
            if full > 0 {
                tensor_copy(p_t.cols(first * qs, full * qs), p_t_ps.cols(0, full * qs));
            }
            if let Some(&(_, cw)) = group.get(full) {
                tensor_copy(
                    p_t.region().slice(0, cw, (first + full) * qs, qs),
                    p_t_ps.region().slice(0, cw, full * qs, qs),
                );
            }
        }
        p_t
    }

    /// Stage 3, second part: the accumulator rescaled by `alpha` (vector, in PSUM) and the row
    /// sum brought to `sum · alpha + Σp` (scalar). Returns the row sum.
    fn rescale(&self, acc: &Tile, s: &Softmaxed, sum: Option<Tile>) -> Tile {
        let [qs, _] = s.p.shape();
        let mut block_sums = s.block_sums.iter();
        let first_sum = block_sums.next().expect("a block has at least one piece");
        let mut sum = match (&s.alpha, sum) {
            (Some(alpha), Some(sum_old)) => {
                tensor_scalar(acc, acc, BinOp::Multiply, alpha);
                let sum = sbuf([qs, 1], DType::F32);
                activation(
                    &sum,
                    ActFn::Identity,
                    &sum_old,
                    Some(first_sum.region()),
                    alpha,
                );
                sum
            }
            _ => first_sum.clone(),
        };
        for part in block_sums {
            let total = sbuf([qs, 1], DType::F32);
            activation(&total, ActFn::Identity, &sum, Some(part.region()), 1.0);
            sum = total;
        }
        sum
    }

    /// Stage 3, last part: `p·v` accumulated into the accumulator (tensor engine).
    fn multiply(&self, acc: &Tile, s: &Softmaxed, p_t: &Tile) {
        let [qs, w] = s.p.shape();
        for (c, (c0, cw)) in key_pieces(w).into_iter().enumerate() {
            nc_matmul(
                acc,
                p_t.region().slice(0, cw, c * qs, qs),
                &self.heads.v[(s.k0 + c0) / PMAX],
                s.alpha.is_some() || c > 0,
            );
        }
    }
}

/// `(offset, width)` of the 128-key pieces of a `w`-key block.
fn key_pieces(w: usize) -> Vec<(usize, usize)> {
    spans(w, PMAX).collect()
}

/// A block after stage 2 of the forward's online softmax.
struct Softmaxed {
    /// The block's first key.
    k0: usize,
    /// `exp(|scale|·s − m)`, `[rows, keys]` in the input dtype.
    p: Tile,
    /// Its row sum per piece, fp32.
    block_sums: Vec<Tile>,
    /// The running `−m` after this block.
    neg_m: Tile,
    /// `exp(m_old − m_new)`, for every block but the first.
    alpha: Option<Tile>,
}
