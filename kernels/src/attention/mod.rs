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
//! `forward.rs`). The output is divided by the row sum once and rounded once;
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

mod backward;
mod forward;

pub use backward::*;
pub use forward::*;

use crate::tiling::spans;
pub(crate) use crate::tiling::transposed;
use nki_core::prelude::*;
use std::ops::Range;

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
        spans(self.sk, PMAX).collect()
    }
}

/// `scale`, or `1/√Dh` when not given (as `scaled_dot_product_attention`).
fn resolve_scale(scale: Option<f32>, dh: usize) -> f32 {
    scale.unwrap_or(1.0 / (dh as f32).sqrt())
}

/// Query row tiles `tiles` of `0..s` cut into `tile` rows (the last one ragged): one loop for a
/// non-causal kernel (`sequential` when iterations accumulate into shared SBUF), or unrolled so
/// each tile knows which keys it attends.
fn for_each_query_tile(
    s: usize,
    tile: usize,
    tiles: Range<usize>,
    unroll: bool,
    sequential: bool,
    mut body: impl FnMut(TileSpan),
) {
    let span = |q: usize| TileSpan {
        start: AffineExpr::from(q * tile),
        size: tile.min(s - q * tile),
    };
    if unroll {
        tiles.for_each(|q| body(span(q)));
        return;
    }
    let full = s / tile;
    let (first, end) = (tiles.start, tiles.end.min(full));
    let mut run = |i: AffineExpr| {
        body(TileSpan {
            start: offset(i, first) * tile,
            size: tile,
        })
    };
    if first < end {
        if sequential {
            sequential_range(end - first, &mut run);
        } else {
            affine_range(end - first, &mut run);
        }
    }
    if !s.is_multiple_of(tile) && tiles.contains(&full) {
        body(span(full));
    }
}

/// Loop index `i` counted from `first`.
fn offset(i: AffineExpr, first: usize) -> AffineExpr {
    if first == 0 { i } else { i + first }
}

/// The KV heads (`b · Hkv` of them) this program works on, split across the cores of the launch
/// ([`program_share`]); every KV head's work (its query heads, their query tiles) is then one
/// core's.
fn kv_head_share(d: &Dims) -> Range<usize> {
    program_share(d.b * d.hkv)
}

/// The first query row of an unrolled tile.
fn static_start(rows: &TileSpan) -> Option<usize> {
    rows.start.as_constant().map(|v| v as usize)
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
    /// `kᵀ`, `[Dh, Sk]`.
    k_t: Tile,
    /// `k` per 128-key tile (backward only).
    k: Vec<Tile>,
    /// `v` per 128-key tile.
    v: Vec<Tile>,
    /// `vᵀ`, `[Dh, Sk]` (backward only).
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

#[cfg(test)]
mod tests {
    use super::*;
    use nki_core::testing::*;

    /// Attention over no keys is refused by the contract, naming `Sk` (its softmax would
    /// normalise an empty row).
    #[test]
    fn attending_no_keys_is_a_contract_error() {
        let q = HostArray::new(&[1, 2, 4, 8], DType::F32, (0..64).map(|i| i as f32 / 64.0));
        let kv = HostArray::new(&[1, 2, 0, 8], DType::F32, std::iter::empty());
        let scalars = [ScalarValue::Bool(false), ScalarValue::None];
        let err = run_kernel(
            &FLASH_ATTENTION_KERNEL,
            &[q, kv.clone(), kv],
            &scalars,
            Target::Trn2,
        )
        .unwrap_err();
        assert!(err.to_string().contains("Sk >= 1"), "{err}");
    }
}
