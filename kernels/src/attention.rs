//! Flash attention: `softmax(q·kᵀ·scale [+ causal mask]) · v` without materialising the score
//! matrix, with grouped-query attention, forward and backward.
//!
//! Layout on chip. Keys and values of one kv head stay in SBUF for every query tile and every
//! query head of its group: `kᵀ` as `[Dh, Sk]` (the moving operand of `q·kᵀ`, transposed on the
//! tensor engine once per kv head), `v` as 128-key tiles `[keys, Dh]` (the moving operand of
//! `p·v`). Queries go 128 rows at a time; their transpose (sign-flipped for a negative
//! `scale`, which is exact) is the stationary operand of the scores, and `|scale|` is applied in
//! fp32 by the scalar engine as it exponentiates, so no rounded product of `q` and `scale`
//! enters the scores.
//!
//! Forward (two 128-row query tiles at a time, their key blocks interleaved): scores for 512
//! keys at a time land in one fp32 PSUM bank, two banks per 1024-key block; the online softmax
//! keeps the running row maximum and sum in fp32 and rescales the fp32 output accumulator (in
//! PSUM) by `exp(m_old − m_new)`; `p` is transposed in 128 × 128 pieces on the tensor engine and
//! `p·v` accumulates in PSUM. Blocks are software-pipelined across the engines (see
//! [`attend`]). The output is divided by the row sum once and rounded once;
//! `lse = m + ln(sum)` is returned in fp32 for the backward (and for callers). On Trn2 at
//! `S = Sk = 4096`, `Dh = 128`, bf16, the cost model puts the tensor engine at about half its
//! peak (`torch-nki cost flash_attention`).
//!
//! Backward (per kv head; query tiles outer, 128-key tiles inner): `p = exp(s − lse)` is
//! recomputed from the saved `lse`, `dp = dO·vᵀ`, `ds = p ∘ (dp − Δ)` with
//! `Δ = rowsum(dO ∘ O) − grad_lse`; `dQ` accumulates in PSUM over the key tiles, `dK` and `dV`
//! in fp32 SBUF accumulators over every query tile of every head of the group.
//!
//! Causal masking is top-left aligned, as `scaled_dot_product_attention(is_causal=True)`:
//! query `i` attends keys `j ≤ i`. Blocks wholly above the diagonal are skipped (the query tiles
//! are then unrolled, so each knows its key range); blocks crossing it add a precomputed
//! `−inf` mask.

use nki_core::prelude::*;

/// Keys per score piece of the forward: one fp32 PSUM bank of scores per query row.
const KEY_BLOCK: usize = PSUM_BANK_FMAX;

/// Score pieces per online-softmax block of the forward (1024 keys).
const BANKS_PER_BLOCK: usize = 2;

/// Query rows the forward processes together: two 128-row tiles, their blocks interleaved.
const QUERY_GROUP: usize = 2 * PMAX;

/// Columns of the causal mask: a window of `KEY_BLOCK` columns starting at `MASK_SHIFT − o`
/// masks keys `k0 + f > q0 + p` for a block whose query tile starts `o = q0 − k0` (a multiple
/// of 128 below `KEY_BLOCK`) rows after its first key.
const MASK_WIDTH: usize = MASK_SHIFT + KEY_BLOCK;
const MASK_SHIFT: usize = KEY_BLOCK - PMAX;

/// The additive causal mask `[128, MASK_WIDTH]` fp32: `0` where `f ≤ p + MASK_SHIFT`, `−inf`
/// elsewhere. Built once per kernel with a memset per partition.
fn causal_mask() -> Tile {
    let mask = sbuf([PMAX, MASK_WIDTH], DType::F32);
    memset(&mask, 0.0);
    for p in 0..PMAX {
        let first = p + MASK_SHIFT + 1;
        memset(
            mask.region().slice(p, 1, first, MASK_WIDTH - first),
            f32::NEG_INFINITY,
        );
    }
    mask
}

/// The mask window for a `[rows, width]` score block whose query tile starts `offset` rows
/// after its first key (`0 ≤ offset ≤ MASK_SHIFT`).
fn mask_window(mask: &Tile, rows: usize, offset: usize, width: usize) -> TileRegion {
    mask.rows(rows).cols(MASK_SHIFT - offset, width)
}

/// The shapes every attention kernel works with.
#[derive(Clone, Copy)]
struct Dims {
    /// Batch.
    b: usize,
    /// Query heads.
    h: usize,
    /// Key/value heads.
    hkv: usize,
    /// Query length.
    s: usize,
    /// Key length.
    sk: usize,
    /// Head dim.
    dh: usize,
}

impl Dims {
    fn of(q: &Hbm, k: &Hbm) -> Dims {
        Dims {
            b: q.dim(0),
            h: q.dim(1),
            hkv: k.dim(1),
            s: q.dim(2),
            sk: k.dim(2),
            dh: q.dim(3),
        }
    }

    /// Query heads per kv head.
    fn group(&self) -> usize {
        self.h / self.hkv.max(1)
    }

    /// `(start, size)` of every 128-key tile.
    fn key_tiles(&self) -> Vec<(usize, usize)> {
        (0..self.sk)
            .step_by(PMAX)
            .map(|k0| (k0, PMAX.min(self.sk - k0)))
            .collect()
    }
}

/// `scale`, or `1/√Dh` when not given (as `scaled_dot_product_attention`).
fn resolve_scale(scale: Option<f32>, dh: usize) -> f32 {
    scale.unwrap_or(1.0 / (dh as f32).sqrt())
}

/// Query row tiles of `tile` rows: one loop for a non-causal kernel (`sequential` when
/// iterations accumulate into shared SBUF), or unrolled so each tile knows which keys it
/// attends.
fn for_each_query_tile(
    s: usize,
    tile: usize,
    unroll: bool,
    sequential: bool,
    mut body: impl FnMut(TileSpan),
) {
    if unroll {
        for q0 in (0..s).step_by(tile) {
            body(TileSpan {
                start: AffineExpr::from(q0),
                size: tile.min(s - q0),
            });
        }
        return;
    }
    let full = s / tile;
    let mut run = |i: AffineExpr| {
        body(TileSpan {
            start: i * tile,
            size: tile,
        })
    };
    if sequential {
        sequential_range(full, &mut run);
    } else {
        affine_range(full, &mut run);
    }
    if !s.is_multiple_of(tile) {
        body(TileSpan {
            start: AffineExpr::from(full * tile),
            size: s % tile,
        });
    }
}

/// The first query row of an unrolled tile.
fn static_start(rows: &TileSpan) -> Option<usize> {
    rows.start.as_constant().map(|v| v as usize)
}

/// `xᵀ` of an SBUF tile `[p, f]` (`p, f ≤ 128`) into a new SBUF tile `[f, p]` of `dtype`,
/// multiplied by `scale` on the way out of PSUM.
fn transposed(x: &Tile, scale: f32, dtype: DType) -> Tile {
    let [p, f] = x.shape();
    let t = psum([f, p], x.dtype());
    nc_transpose(&t, x);
    let out = sbuf([f, p], dtype);
    if scale == 1.0 {
        tensor_copy(&out, &t);
    } else {
        tensor_scalar(&out, &t, BinOp::Multiply, scale);
    }
    out
}

/// Loads rows `row0..row0+n` of a `[rows, Dh]` view into a new `[n, Dh]` tile.
fn load_rows(view: &HbmView, row0: AffineExpr, n: usize) -> Tile {
    let t = sbuf([n, view.shape()[1]], view.dtype());
    dma_copy(&t, view.clone().rows(row0, n));
    t
}

/// One kv head's keys and values on chip: `kᵀ` `[Dh, Sk]`, and `v` (and `k` for the backward)
/// as one `[keys, Dh]` tile per 128-key tile, separate tiles so their loads overlap. `vᵀ` too
/// for the backward.
struct KvHead {
    k_t: Tile,
    k: Vec<Tile>,
    v: Vec<Tile>,
    v_t: Option<Tile>,
}

impl KvHead {
    fn load(kv: &HbmView, vv: &HbmView, row0: &AffineExpr, d: Dims, backward: bool) -> KvHead {
        let dt = kv.dtype();
        let k_t = sbuf([d.dh, d.sk], dt);
        let v_t = backward.then(|| sbuf([d.dh, d.sk], dt));
        let (mut k, mut v) = (Vec::new(), Vec::new());
        for (k0, kw) in d.key_tiles() {
            let kn = load_rows(kv, row0.clone() + k0, kw);
            let kt = psum([d.dh, kw], dt);
            nc_transpose(&kt, &kn);
            tensor_copy(k_t.cols(k0, kw), &kt);
            let vn = load_rows(vv, row0.clone() + k0, kw);
            if let Some(v_t) = &v_t {
                let t = psum([d.dh, kw], dt);
                nc_transpose(&t, &vn);
                tensor_copy(v_t.cols(k0, kw), &t);
                k.push(kn);
            }
            v.push(vn);
        }
        KvHead { k_t, k, v, v_t }
    }
}

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
    require(Dh <= 128, H % Hkv == 0, Sk <= 8192),
    backward(flash_attention_backward, saves(q, k, v, out, lse)),
    replaces("aten::scaled_dot_product_attention", "*.sdpa_attention_forward"),
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
    affine_range(d.b * d.hkv, |bg| {
        let heads = KvHead::load(&kv, &vv, &(bg.clone() * d.sk), d, false);
        affine_range(group, |r| {
            let head_row0 = (bg.clone() * group + r) * d.s;
            for_each_query_tile(d.s, QUERY_GROUP, causal, false, |rows| {
                // The group's 128-row tiles, interleaved by `attend`.
                let subs: Vec<(usize, usize)> = (0..rows.size)
                    .step_by(PMAX)
                    .map(|o| (o, PMAX.min(rows.size - o)))
                    .collect();
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
    (0..w)
        .step_by(PMAX)
        .map(|c0| (c0, PMAX.min(w - c0)))
        .collect()
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
    require(Dh <= 128, H % Hkv == 0, Sk <= 8192),
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
    affine_range(d.b * d.hkv, |bg| {
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
            for_each_query_tile(d.s, PMAX, causal, true, |rows| {
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
