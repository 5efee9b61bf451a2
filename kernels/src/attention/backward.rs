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
    let mask = causal.then(DiagonalMask::new);
    let group = d.group();
    // A unit's dQ (its sets side by side, fp32) and its dsᵀ each fill at most one PSUM bank.
    let (ql, kl) = Layout::pair(&d, causal, BACKWARD_ROWS_PER_PARTITION);
    let tiles = kl.tiles();
    // The cores of the launch split the KV heads: a KV head's dK and dV sum over its query
    // heads and tiles, so they stay on one core.
    let kv_heads = kv_head_share(&d);
    affine_range(kv_heads.len(), |i| {
        let bg = offset(i, kv_heads.start);
        let kv_row0 = bg.clone() * d.sk;
        let heads = KvHead::load(&kv, &vv, &kv_row0, &kl, true);
        let side = [PMAX.min(d.sk), tiles.len() * d.dh];
        let (dk_acc, dv_acc) = (sbuf(side, DType::F32), sbuf(side, DType::F32));
        memset(&dk_acc, 0.0);
        memset(&dv_acc, 0.0);
        let acc = Accumulators {
            dk: &dk_acc,
            dv: &dv_acc,
            dh: d.dh,
        };
        // Query heads and units accumulate into dK and dV: in order.
        sequential_range(group, |r| {
            let head_row0 = (bg.clone() * group + r) * d.s;
            let units = 0..query_units(&ql, 1);
            for_each_query_unit(&ql, 1, units, causal, true, |unit| {
                let row0 = head_row0.clone() + unit.start.clone();
                let (n, parts) = (unit.n, unit.rows.div_ceil(unit.n));
                let load = |view: &HbmView| load_block(view, row0.clone(), parts, n);
                let (qb, gob, ob) = (load(&qv), load(&gov), load(&ov));
                let neg_lse = load(&lv);
                tensor_scalar(&neg_lse, &neg_lse, BinOp::Multiply, -1.0);
                // Δ = rowsum(dO ∘ O) − grad_lse, fp32, a column per set.
                let prod = sbuf([parts, n * d.dh], DType::F32);
                tensor_tensor(&prod, &gob, &ob, BinOp::Multiply);
                let delta = sbuf([parts, n], DType::F32);
                for set in 0..n {
                    let row = prod.cols(set * d.dh, d.dh);
                    tensor_reduce(delta.cols(set, 1), BinOp::Add, row, 1, false);
                }
                let gl = load(&glv);
                let neg_delta = sbuf([parts, n], DType::F32);
                tensor_tensor(&neg_delta, &gl, &delta, BinOp::Subtract);
                let sets: Vec<QuerySet> = (0..n)
                    .map(|set| {
                        let cols = set * d.dh;
                        QuerySet {
                            qn: qb.cols(cols, d.dh),
                            gon: gob.cols(cols, d.dh),
                            neg_lse: neg_lse.cols(set, 1),
                            neg_delta: neg_delta.cols(set, 1),
                            rows: unit.set((0, parts), set),
                        }
                    })
                    .collect();
                let dq = gradients(&sets, &heads, &tiles, (mask.as_ref(), &acc), (sign, mag));
                let dq_out = sbuf([parts, n * d.dh], dt);
                tensor_scalar(&dq_out, &dq, BinOp::Multiply, scale);
                dma_copy(block_view(&dqv, row0, parts, n), &dq_out);
            });
        });
        for (start, parts, n) in kl.loads() {
            // The transfer's key tiles' columns, side by side.
            let cols = start / PMAX * d.dh;
            let width = n * d.dh;
            let (dk_out, dv_out) = (sbuf([parts, width], dt), sbuf([parts, width], dt));
            let (dk, dv) = (
                dk_acc.rows(parts).cols(cols, width),
                dv_acc.rows(parts).cols(cols, width),
            );
            tensor_scalar(&dk_out, dk, BinOp::Multiply, scale);
            tensor_copy(&dv_out, dv);
            let at = kv_row0.clone() + start;
            dma_copy(block_view(&dkv, at.clone(), parts, n), &dk_out);
            dma_copy(block_view(&dvv, at, parts, n), &dv_out);
        }
    });
    (grad_q, grad_k, grad_v)
}

/// The most rows per partition of the backward's blocks: four sets' `dQ` (`Dh ≤ 128`, fp32)
/// fill one PSUM bank.
const BACKWARD_ROWS_PER_PARTITION: usize = 4;

/// The backward's fp32 SBUF accumulators of one kv head: `dK` and `dV`, `Dh` columns per
/// 128-slot key tile.
struct Accumulators<'a> {
    /// `Σ dsᵀ·q` (scaled when stored).
    dk: &'a Tile,
    /// `Σ pᵀ·dO`.
    dv: &'a Tile,
    /// Head dim.
    dh: usize,
}

/// One 128-row query tile of the backward: regions of its unit's tiles.
struct QuerySet {
    /// `q`, `[rows, Dh]`.
    qn: TileRegion,
    /// `dO`, `[rows, Dh]`.
    gon: TileRegion,
    /// `−lse`, `[rows, 1]` fp32.
    neg_lse: TileRegion,
    /// `−Δ`, `[rows, 1]` fp32.
    neg_delta: TileRegion,
    /// Its rows, when causal (an unrolled unit).
    rows: Option<RowSet>,
}

/// The query sets of a unit against every key tile they attend, key tiles outer: per key tile
/// and set `p = exp(s − lse)` (masked on the diagonal) and `ds = p ∘ (dO·vᵀ − Δ)`; `pᵀ·dO`
/// and `dsᵀ·q` of the unit's sets summed in PSUM and added once to the key tile's `dV` and
/// `dK` accumulators. Returns `dQ = Σ ds·k_j` (unscaled) in PSUM, the sets side by side.
///
/// Each key tile runs in stages over all its sets, so each engine has a set's work to do while
/// the next engine finishes another's: the scores and `dO·vᵀ` of every set (tensor engine),
/// `p` and `ds` (scalar, vector), `pᵀ·dO`, `dsᵀ·q` and the transposes of `ds` (tensor), the
/// copy of `dsᵀ` out of PSUM (scalar), `dQ` (tensor). The scores of the next key tile are issued
/// before this one's second tensor stage.
fn gradients(
    sets: &[QuerySet],
    heads: &KvHead,
    tiles: &[RowSet],
    (mask, acc): (Option<&DiagonalMask>, &Accumulators),
    (sign, mag): (f32, f32),
) -> Tile {
    let dt = heads.k_t.dtype();
    let dh = acc.dh;
    let qs = sets.first().map_or(0, |q| q.qn.shape()[0]);
    let transposes: Vec<(Tile, Tile)> = sets
        .iter()
        .map(|q| {
            let q_t = transposed_on_scalar(q.qn.clone(), dt, sign);
            (q_t, transposed_on_scalar(q.gon.clone(), dt, 1.0))
        })
        .collect();
    let unit = Unit {
        sets,
        transposes: &transposes,
        heads,
        mask,
        acc,
        mag,
        dq: psum([qs, sets.len() * dh], DType::F32),
    };
    let mut started = vec![false; sets.len()];
    let (mut scored, mut products): (Option<Scored>, Option<Products>) = (None, None);
    let scores = tiles.iter().enumerate().map(|(j, k)| unit.score(j, k));
    // One key tile scored ahead and one's products behind: the tensor engine's queue is the
    // scores of tile j + 1, the products of tile j, then the dQ terms of tile j − 1.
    for next in scores.flatten().map(Some).chain([None]) {
        if let Some(s) = std::mem::replace(&mut scored, next)
            && let Some(p) = products.replace(unit.products(s))
        {
            unit.accumulate(p, &mut started);
        }
    }
    if let Some(p) = products {
        unit.accumulate(p, &mut started);
    }
    unit.dq
}

/// A unit's query sets in the backward, with what their key tiles share.
struct Unit<'a> {
    sets: &'a [QuerySet],
    /// `±qᵀ` and `dOᵀ` per set.
    transposes: &'a [(Tile, Tile)],
    heads: &'a KvHead,
    mask: Option<&'a DiagonalMask>,
    acc: &'a Accumulators<'a>,
    /// `|scale|`.
    mag: f32,
    /// `dQ` of the sets side by side, `[rows, sets·Dh]` fp32 PSUM.
    dq: Tile,
}

/// A key tile after the first tensor stage of [`gradients`].
struct Scored {
    /// Its index.
    j: usize,
    /// Its first slot and keys.
    keys: (usize, usize),
    /// The sets that attend it, and how.
    attending: Vec<(usize, Causal)>,
    /// Scores and `dO·vᵀ` side by side per set, two sets to a PSUM tile (one bank).
    sd: Vec<Tile>,
}

impl Unit<'_> {
    /// First stage of key tile `j`: which sets attend it; their scores and `dO·vᵀ`.
    fn score(&self, j: usize, k: &RowSet) -> Option<Scored> {
        let (k0, kw) = (k.slot(), k.size);
        let attending: Vec<(usize, Causal)> = self
            .sets
            .iter()
            .enumerate()
            .map(|(i, q)| match (self.mask, &q.rows) {
                (Some(_), Some(rows)) => (i, causal(rows, k)),
                _ => (i, Causal::All),
            })
            .filter(|&(_, c)| c != Causal::None)
            .collect();
        if attending.is_empty() {
            return None;
        }
        let v_t = self.heads.v_t.as_ref().expect("vᵀ is held");
        let sd: Vec<Tile> = attending
            .chunks(2)
            .map(|pair| {
                let qs = self.sets[pair[0].0].qn.shape()[0];
                let t = psum([qs, 2 * pair.len() * kw], DType::F32);
                for (c, &(i, _)) in pair.iter().enumerate() {
                    let (q_t, go_t) = &self.transposes[i];
                    let at = 2 * c * kw;
                    let (scores, relation) = (t.cols(at, kw), pair[c].1);
                    nc_matmul(scores.clone(), q_t, self.heads.k_t.cols(k0, kw), false);
                    if let (Causal::Masked(offset), Some(mask)) = (relation, self.mask) {
                        mask.add(scores, offset);
                    }
                    nc_matmul(t.cols(at + kw, kw), go_t, v_t.cols(k0, kw), false);
                }
                t
            })
            .collect();
        Some(Scored {
            j,
            keys: (k0, kw),
            attending,
            sd,
        })
    }

    /// The other stages of a scored key tile; `started[i]`: set `i`'s `dQ` has a first term.
    fn products(&self, s: Scored) -> Products {
        let (_, kw) = s.keys;
        let dh = self.acc.dh;
        let dt = self.heads.k_t.dtype();
        let qs = self.sets[0].qn.shape()[0];
        // p = exp(s − lse), with the mask on the diagonal; ds = p ∘ (dO·vᵀ − Δ), the
        // difference in fp32, rounded once.
        let pds: Vec<(Tile, Tile)> = s
            .attending
            .iter()
            .enumerate()
            .map(|(c, &(i, _))| {
                let q = &self.sets[i];
                let (sd, at) = (&s.sd[c / 2], 2 * (c % 2) * kw);
                let p = sbuf([qs, kw], dt);
                let scores = sd.cols(at, kw);
                activation(&p, ActFn::Exp, scores, Some(q.neg_lse.clone()), self.mag);
                let ds = sbuf([qs, kw], dt);
                let dp = sd.cols(at + kw, kw);
                let neg_delta = q.neg_delta.clone();
                scalar_tensor_tensor(&ds, dp, BinOp::Add, neg_delta, BinOp::Multiply, &p);
                (p, ds)
            })
            .collect();
        // dV_j += Σ pᵀ·dO, dK_j += Σ dsᵀ·q (scaled at the end), side by side in one bank;
        // dsᵀ of every set side by side.
        let parts = psum([kw, 2 * dh], DType::F32);
        let ds_tp = psum([kw, pds.len() * qs], dt);
        for (c, ((i, _), (p, ds))) in s.attending.iter().zip(&pds).enumerate() {
            let q = &self.sets[*i];
            nc_matmul(parts.cols(0, dh), p, q.gon.clone(), c > 0);
            nc_matmul(parts.cols(dh, dh), ds, q.qn.clone(), c > 0);
            nc_transpose(ds_tp.cols(c * qs, qs), ds);
        }
        // dsᵀ out of PSUM on the scalar engine (exact), beside the vector engine's work.
        let ds_t = sbuf([kw, pds.len() * qs], dt);
        activation(&ds_t, ActFn::Identity, &ds_tp, None, 1.0);
        Products {
            j: s.j,
            kw,
            sets: s.attending.iter().map(|&(i, _)| i).collect(),
            parts,
            ds_t,
        }
    }

    /// The last stage of a key tile: the `dQ` terms of its sets (tensor engine) and its sums
    /// added to the `dV` and `dK` accumulators (vector).
    fn accumulate(&self, p: Products, started: &mut [bool]) {
        let (dh, qs) = (self.acc.dh, self.sets[0].qn.shape()[0]);
        for (c, &i) in p.sets.iter().enumerate() {
            let k = self.heads.k[p.j].clone();
            let ds_t = p.ds_t.cols(c * qs, qs);
            nc_matmul(self.dq.cols(i * dh, dh), ds_t, k, started[i]);
            started[i] = true;
        }
        let (cols, kw) = (p.j * dh, p.kw);
        for (sum, part) in [(self.acc.dv, 0), (self.acc.dk, dh)] {
            let dst = sum.rows(kw).cols(cols, dh);
            tensor_tensor(dst.clone(), dst, p.parts.cols(part, dh), BinOp::Add);
        }
    }
}

/// A key tile after the second tensor stage of [`gradients`].
struct Products {
    /// Its index.
    j: usize,
    /// Its keys.
    kw: usize,
    /// The sets that attend it.
    sets: Vec<usize>,
    /// `Σ pᵀ·dO` and `Σ dsᵀ·q` side by side, fp32 PSUM.
    parts: Tile,
    /// `dsᵀ` of each set side by side.
    ds_t: Tile,
}

/// The backward's causal mask, added to the scores of a diagonal key tile on the tensor engine
/// (an identity matmul accumulating into the scores' PSUM), not by the vector engine: `0` where
/// key column `f ≤ p + offset` (`offset` 0 or −1, see [`causal`]), the most negative bf16
/// elsewhere, whose exponential (scaled, less the log-sum-exp) is 0, as `−inf`'s.
struct DiagonalMask {
    /// `[128, 130]` bf16: `0` where `f ≤ p + 1`.
    mask: Tile,
    /// The bf16 identity.
    eye: Tile,
}

impl DiagonalMask {
    fn new() -> DiagonalMask {
        let mask = sbuf([PMAX, PMAX + 2], DType::BF16);
        memset(&mask, 0.0);
        let most_negative = -f32::from_bits(0x7f7f_0000);
        affine_select(&mask, -1, 1, &mask, most_negative, BinOp::GreaterEqual, 1);
        DiagonalMask {
            mask,
            eye: identity(DType::BF16),
        }
    }

    /// Adds the mask for `offset` to the `[rows, keys]` fp32 PSUM `scores`.
    fn add(&self, scores: TileRegion, offset: isize) {
        let [rows, keys] = scores.shape();
        assert!((-1..=0).contains(&offset), "a diagonal offset {offset}");
        let window = self.mask.rows(rows).cols((1 - offset) as usize, keys);
        nc_matmul(
            scores,
            self.eye.region().slice(0, rows, 0, rows),
            window,
            true,
        );
    }
}
