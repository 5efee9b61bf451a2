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
    let mask = causal.then(|| CausalMask::new(d.s, d.sk));
    let group = d.group();
    let (ql, kl) = Layout::pair(&d, causal, layout::MOST_ROWS_PER_PARTITION);
    // The cores of the launch split the KV heads, or with fewer KV heads than cores, each KV
    // head's query units.
    let split_heads = d.b * d.hkv >= num_programs(&[0]);
    let kv_heads = if split_heads {
        kv_head_share(&d)
    } else {
        0..d.b * d.hkv
    };
    let units = query_units(&ql, QUERY_GROUP / PMAX);
    affine_range(kv_heads.len(), |i| {
        let bg = offset(i, kv_heads.start);
        let heads = KvHead::load(&kv, &vv, &(bg.clone() * d.sk), &kl, false);
        affine_range(group, |r| {
            let head_row0 = (bg.clone() * group + r) * d.s;
            let units = if split_heads {
                0..units
            } else {
                program_share(units)
            };
            let per_group = QUERY_GROUP / PMAX;
            for_each_query_unit(&ql, per_group, units, causal, false, |unit| {
                let row0 = head_row0.clone() + unit.start.clone();
                let n = unit.n;
                // Per transfer: q in, out and lse out, each one DMA.
                let loads: Vec<((usize, usize), Tile, Tile, Tile)> = unit
                    .loads()
                    .into_iter()
                    .map(|(o, parts)| {
                        let qb = load_block(&qv, row0.clone() + o, parts, n);
                        let ob = sbuf([parts, n * d.dh], dt);
                        let lb = sbuf([parts, n], DType::F32);
                        ((o, parts), qb, ob, lb)
                    })
                    .collect();
                // Every set of the unit, as a 128-row query tile: (transfer, set, ±qᵀ).
                let sets: Vec<(usize, usize, Tile)> = loads
                    .iter()
                    .enumerate()
                    .flat_map(|(l, (_, qb, _, _))| {
                        (0..n).map(move |set| {
                            let qn = qb.cols(set * d.dh, d.dh);
                            (l, set, transposed_on_scalar(qn, dt, sign))
                        })
                    })
                    .collect();
                // Two query tiles at a time, their key blocks interleaved by `attend`.
                for pair in sets.chunks(per_group) {
                    let tiles: Vec<QueryTile> = pair
                        .iter()
                        .map(|(l, set, q_t)| QueryTile {
                            q_t,
                            heads: &heads,
                            mask: mask.as_ref().zip(unit.set(loads[*l].0, *set)),
                            key_layout: &kl,
                            mag,
                            dh: d.dh,
                        })
                        .collect();
                    for ((l, set, _), (acc, sum, neg_m)) in pair.iter().zip(attend(&tiles, d.sk)) {
                        let (_, _, ob, lb) = &loads[*l];
                        let qs = ob.shape()[0];
                        // out = acc / sum (rounded once); lse = m + ln(sum).
                        let inv = sbuf([qs, 1], DType::F32);
                        activation(&inv, ActFn::Reciprocal, &sum, None, 1.0);
                        tensor_scalar(ob.cols(set * d.dh, d.dh), &acc, BinOp::Multiply, &inv);
                        let l = lb.cols(*set, 1);
                        activation(l.clone(), ActFn::Log, &sum, None, 1.0);
                        tensor_tensor(l.clone(), l, &neg_m, BinOp::Subtract);
                    }
                }
                for ((o, parts), _, ob, lb) in &loads {
                    let at = row0.clone() + *o;
                    dma_copy(block_view(&ov, at.clone(), *parts, n), ob);
                    dma_copy(block_view(&lv, at, *parts, n), lb);
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
            let last_key = t.mask.map(|(_, q)| q.last_causal_slot());
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
    /// The causal mask and the tile's query rows, when causal.
    mask: Option<(&'a CausalMask, RowSet)>,
    /// The kv head's key tiling.
    key_layout: &'a Layout,
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
                Some((mask, q)) => self.masked(mask, &q, (k0, w), s),
                None => s.region(),
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

    /// A score piece `s` (keys `k0 .. k0 + w`) under the causal mask, for query rows `q`: 128
    /// consecutive rows take one window of the mask over the piece; a set of a block takes one
    /// per 128-key set of its block in the piece ([`causal`]).
    fn masked(
        &self,
        mask: &CausalMask,
        q: &RowSet,
        (k0, w): (usize, usize),
        s: &Tile,
    ) -> TileRegion {
        let qs = q.size;
        // Consecutive rows: keys after the first query row; a set: keys of its block.
        let crosses = if q.stride == 1 {
            k0 + w - 1 > q.start
        } else {
            k0 + w > q.start
        };
        if !crosses {
            return s.region();
        }
        let t = sbuf([qs, w], DType::F32);
        if q.stride == 1 {
            let offset = q.start as isize - k0 as isize;
            tensor_tensor(&t, s, mask.window(qs, offset, w), BinOp::Add);
            return t.region();
        }
        let keys = self.key_layout.tiles();
        for (c0, cw) in key_pieces(w) {
            let k = &keys[(k0 + c0) / PMAX];
            let (dst, src) = (t.cols(c0, cw), s.cols(c0, cw));
            match causal(q, k) {
                Causal::Masked(offset) => {
                    tensor_tensor(dst, src, mask.window(qs, offset, cw), BinOp::Add);
                }
                // Keys before the block: kept.
                _ => {
                    tensor_copy(dst, src);
                }
            }
        }
        t.region()
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
