//! Flash attention: `softmax(q·kᵀ·scale [+ causal mask]) · v` without materialising the score
//! matrix, with grouped-query attention, forward and backward.
//!
//! Transfers. A head's rows move in blocks of `128·n` rows, one DMA each, partition `p` holding
//! the `n` consecutive rows `p·n ..` (see `layout.rs`): at `Dh = 128` in bf16 a 128-row tile is
//! 256 bytes per partition, which the DMA overview's curve runs at about a tenth of the engines'
//! rate. Each column group of a block (a *set*: rows `p·n + i`) is a 128-row tile for the
//! matmuls; the order in which queries, or keys with their values, are taken does not change
//! attention, and the causal mask follows the sets' rows.
//!
//! Layout on chip. Keys and values of one kv head stay in SBUF for every query tile and every
//! query head of its group: `kᵀ` as `[Dh, Sk]` (the moving operand of `q·kᵀ`, transposed on the
//! tensor engine once per kv head), `v` as 128-key tiles `[keys, Dh]` (the moving operand of
//! `p·v`). Queries go 128 rows (a set) at a time; their transpose (sign-flipped for a negative
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
//! `S = Sk = 4096`, `Dh = 128`, bf16, the cost model has the tensor engine 86 % busy, at 56 % of
//! its peak for these operands (`torch-nki cost flash_attention`).
//!
//! Backward (per kv head; query blocks outer, 128-key tiles inner, the sets of a block together):
//! `p = exp(s − lse)` is recomputed from the saved `lse`, `dp = dO·vᵀ`, `ds = p ∘ (dp − Δ)` with
//! `Δ = rowsum(dO ∘ O) − grad_lse`; `dQ` accumulates in PSUM over the key tiles; a key tile's
//! `dK` and `dV` terms of a block's sets are summed in PSUM, then added to fp32 SBUF
//! accumulators over every block of every head of the group (see `backward.rs`).
//!
//! Causal masking is top-left aligned, as `scaled_dot_product_attention(is_causal=True)`:
//! query `i` attends keys `j ≤ i`. Blocks wholly above the diagonal are skipped (the query tiles
//! are then unrolled, so each knows its key range); blocks crossing it add a precomputed
//! `−inf` mask (the backward's, the most negative bf16, added on the tensor engine).

mod backward;
mod forward;
mod layout;

pub use backward::*;
pub use forward::*;

use crate::tiling::identity;
use crate::tiling::spans;
use layout::{Causal, Layout, RowSet, block_view, causal, load_block};
use nki_core::prelude::*;
use std::ops::Range;

/// Keys per score piece of the forward: one fp32 PSUM bank of scores per query row.
const KEY_BLOCK: usize = PSUM_BANK_FMAX;

/// Score pieces per online-softmax block of the forward (1024 keys).
const BANKS_PER_BLOCK: usize = 2;

/// Query rows the forward processes together: two 128-row tiles, their blocks interleaved.
const QUERY_GROUP: usize = 2 * PMAX;

/// The largest shift of the causal mask: a window of `KEY_BLOCK` columns starting at
/// `MASK_SHIFT − o` masks keys `k0 + f > q0 + p` for a block whose query tile starts
/// `o = q0 − k0` (a multiple of 128 below `KEY_BLOCK`) rows after its first key.
const MASK_SHIFT: usize = KEY_BLOCK - PMAX;

/// The forward's additive causal mask, fp32 `[128, shift + width]`: `0` where
/// `f ≤ p + shift`, `−inf` elsewhere. Built once per kernel: zeros, then one `affine_select`
/// (GpSimd). Sized to the problem: the shift is the largest offset a query tile can have
/// from the first key of a piece (`MASK_SHIFT`, or less when the queries are fewer), the width
/// the widest piece plus the one column of an offset of `−1`, so a short sequence does not
/// build (and the simulator does not fill) a `[128, 896]` mask.
struct CausalMask {
    tile: Tile,
    shift: usize,
}

impl CausalMask {
    fn new(queries: usize, keys: usize) -> CausalMask {
        let shift = MASK_SHIFT.min((queries.max(1) - 1) / PMAX * PMAX);
        let tile = sbuf([PMAX, shift + KEY_BLOCK.min(keys + 1)], DType::F32);
        memset(&tile, 0.0);
        // Kept where shift + p − f ≥ 0.
        affine_select(
            &tile,
            -1,
            1,
            &tile,
            f32::NEG_INFINITY,
            BinOp::GreaterEqual,
            shift as i32,
        );
        CausalMask { tile, shift }
    }

    /// The window for a `[rows, width]` score block whose first query row is `offset` rows
    /// after its first key (`−1 ≤ offset ≤ shift`; `−1` only for a width of at most 128): key
    /// column `f` is kept for query partition `p` where `f ≤ p + offset`.
    fn window(&self, rows: usize, offset: isize, width: usize) -> TileRegion {
        let start = self.shift as isize - offset;
        assert!(
            start >= 0,
            "a query tile {offset} rows after its first key, past the mask's shift {}",
            self.shift
        );
        self.tile.rows(rows).cols(start as usize, width)
    }
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
}

/// `scale`, or `1/√Dh` when not given (as `scaled_dot_product_attention`).
fn resolve_scale(scale: Option<f32>, dh: usize) -> f32 {
    scale.unwrap_or(1.0 / (dh as f32).sqrt())
}

/// A run of a head's query rows the kernels load and store together: rows
/// `start .. start + rows`, as one block of `128·n` rows (`n > 1`, see [`layout`]) or as
/// consecutive 128-row tiles (`n = 1`).
struct QueryUnit {
    /// Its first row in the head, symbolic in a loop.
    start: AffineExpr,
    /// Rows.
    rows: usize,
    /// Rows per partition.
    n: usize,
}

impl QueryUnit {
    /// Its first row, when known at trace time (an unrolled loop).
    fn static_start(&self) -> Option<usize> {
        self.start.as_constant().map(|v| v as usize)
    }

    /// Its transfers: `(row offset, partitions)`, each of `n` rows per partition.
    fn loads(&self) -> Vec<(usize, usize)> {
        if self.n > 1 {
            vec![(0, PMAX)]
        } else {
            spans(self.rows, PMAX).collect()
        }
    }

    /// Set `set` of transfer `(offset, parts)` (see [`Self::loads`]), when the start is known.
    fn set(&self, (offset, parts): (usize, usize), set: usize) -> Option<RowSet> {
        let start = self.static_start()?;
        Some(RowSet::new(start + offset, parts, self.n, set))
    }
}

/// The query units of `layout` (its blocks, then its 128-row tiles `group` at a time): how many.
fn query_units(layout: &Layout, group: usize) -> usize {
    layout.blocks() + (layout.len - layout.blocked()).div_ceil(group * PMAX)
}

/// Runs `body` over query units `units` (of [`query_units`]) of `layout`: one loop over the
/// blocks and one over the whole groups of 128-row tiles (`sequential` when iterations
/// accumulate into shared SBUF), or unrolled so each unit knows which keys it attends, then a
/// ragged last group.
fn for_each_query_unit(
    layout: &Layout,
    group: usize,
    units: Range<usize>,
    unroll: bool,
    sequential: bool,
    mut body: impl FnMut(QueryUnit),
) {
    let blocks = layout.blocks();
    let (n, blocked) = (layout.n, layout.blocked());
    let run = (0, blocked, layout.block_rows(), n);
    let tail = (blocked, layout.len - blocked, group * PMAX, 1);
    let ranges = [
        units.start.min(blocks)..units.end.min(blocks),
        units.start.max(blocks) - blocks..units.end.max(blocks) - blocks,
    ];
    for ((base, len, size, n), tiles) in [run, tail].into_iter().zip(ranges) {
        for_each_span(len, size, tiles, unroll, sequential, |span| {
            body(QueryUnit {
                start: span.start + base,
                rows: span.size,
                n,
            })
        });
    }
}

/// Row tiles `tiles` of `0..len` cut into `tile` rows (the last one ragged): one loop, or
/// unrolled.
fn for_each_span(
    len: usize,
    tile: usize,
    tiles: Range<usize>,
    unroll: bool,
    sequential: bool,
    mut body: impl FnMut(TileSpan),
) {
    let span = |q: usize| TileSpan {
        start: AffineExpr::from(q * tile),
        size: tile.min(len - q * tile),
    };
    if unroll {
        tiles.for_each(|q| body(span(q)));
        return;
    }
    let full = len / tile;
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
    if !len.is_multiple_of(tile) && tiles.contains(&full) {
        body(span(full));
    }
}

/// `xᵀ` of a `[p, f]` region of a `dt` tile, times `scale` (`±1`: exact), copied out of PSUM by
/// the scalar engine, which both kernels keep less busy than the vector engine.
fn transposed_on_scalar(x: TileRegion, dt: DType, scale: f32) -> Tile {
    let [p, f] = x.shape();
    let t = psum([f, p], dt);
    nc_transpose(&t, x);
    let out = sbuf([f, p], dt);
    activation(&out, ActFn::Identity, &t, None, scale);
    out
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

/// One kv head's keys and values on chip, in the slot order of its key [`Layout`]: `kᵀ` as
/// `[Dh, Sk]`, and `v` (and `k` for the backward) as one `[keys, Dh]` region per 128-slot tile
/// (a set of a block's tile, or a 128-row tile). `vᵀ` too for the backward.
struct KvHead {
    /// `kᵀ`, `[Dh, Sk]`.
    k_t: Tile,
    /// `k` per 128-slot tile (backward only).
    k: Vec<TileRegion>,
    /// `v` per 128-slot tile.
    v: Vec<TileRegion>,
    /// `vᵀ`, `[Dh, Sk]` (backward only).
    v_t: Option<Tile>,
}

impl KvHead {
    fn load(kv: &HbmView, vv: &HbmView, row0: &AffineExpr, kl: &Layout, backward: bool) -> KvHead {
        let (dt, dh) = (kv.dtype(), kv.shape()[1]);
        let k_t = sbuf([dh, kl.len], dt);
        let v_t = backward.then(|| sbuf([dh, kl.len], dt));
        let (mut k, mut v) = (Vec::new(), Vec::new());
        for (start, parts, n) in kl.loads() {
            let kb = load_block(kv, row0.clone() + start, parts, n);
            let vb = load_block(vv, row0.clone() + start, parts, n);
            for set in 0..n {
                let slot = RowSet::new(start, parts, n, set).slot();
                let (kn, vn) = (kb.cols(set * dh, dh), vb.cols(set * dh, dh));
                let kt = psum([dh, parts], dt);
                nc_transpose(&kt, kn.clone());
                tensor_copy(k_t.cols(slot, parts), &kt);
                if let Some(v_t) = &v_t {
                    let t = psum([dh, parts], dt);
                    nc_transpose(&t, vn.clone());
                    tensor_copy(v_t.cols(slot, parts), &t);
                    k.push(kn);
                }
                v.push(vn);
            }
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
