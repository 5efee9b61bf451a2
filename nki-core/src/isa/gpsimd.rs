//! GpSimd's data-dependent instructions: `sequence_bounds` (segment bounds of a row of ids),
//! `nonzero_with_count` (the positions of the nonzero elements, one row per GpSimd core) and
//! `topk` (the largest values of a 16-partition snake, one per GpSimd core). Operand shapes are
//! checked here; dtypes, buffers, the hardware's size limits and targets by [`crate::validate`].

use crate::ir::{Op, TileRegion};
use crate::lang::context::{Builder, with_builder};
use crate::loc::SourceLoc;

/// Partitions per GpSimd core: `nonzero_with_count` works on the first of each group of this
/// many partitions, `topk` reads each group as one snake.
pub const GPSIMD_CORE_PARTITIONS: usize = 16;

/// The fewest elements a `topk` snake holds (its `n`).
pub const TOPK_N_MIN: usize = 8;

/// The most elements a `topk` snake holds (`n < 65536`).
pub const TOPK_N_MAX: usize = 65535;

/// The most values `topk` selects (`K < 32768`).
pub const TOPK_K_MAX: usize = 32767;

fn shape_ok(
    b: &mut Builder,
    loc: SourceLoc,
    inst: &str,
    name: &str,
    r: &TileRegion,
    want: [usize; 2],
    why: &str,
) -> bool {
    if r.shape() == want {
        return true;
    }
    b.fail(
        loc,
        format!(
            "{inst}: {name} must have shape {want:?} ({why}), got shape {:?}",
            r.shape()
        ),
    );
    false
}

/// `nisa.sequence_bounds(dst, segment_ids)` on GpSimd: for each element `i` of the `(1, N)`
/// `segment_ids`, the bounds of the run of consecutive equal ids it belongs to, its first index
/// (the start) into `dst[0, i]` and one past its last (the end) into `dst[0, N + i]`: `dst` is
/// NKI's `(1, 2, N)` tile, a `(1, 2, N)` tile here too or a `(1, 2·N)` region. Id 0 is padding:
/// its elements get start `N` and end −1. Ids compare in fp32; where the docs are silent, a
/// negative id (they require non-negative ids) is one more segment id, and two runs of one id
/// separated by another are two segments (each element's bounds are those of its own run, as
/// the docs' reference computes them). One partition (rule `sequence-bounds-partitions`);
/// float32 or int32 tiles in SBUF (checked by [`crate::validate`]).
#[track_caller]
pub fn sequence_bounds(dst: impl Into<TileRegion>, segment_ids: impl Into<TileRegion>) {
    let loc = SourceLoc::caller();
    let (dst, segment_ids) = (dst.into(), segment_ids.into());
    with_builder(|b| {
        let want = [segment_ids.np, 2 * segment_ids.nf];
        let why = "a start and an end for each segment id";
        if shape_ok(b, loc, "sequence_bounds", "dst", &dst, want, why) {
            b.push_op(Op::SequenceBounds { dst, segment_ids }, loc);
        }
    });
}

/// `nisa.nonzero_with_count(dst, src, index_offset=0, padding_val=-1)` on GpSimd
/// (NeuronCore-v3 and newer): in each partition of the regions whose tile partition is a
/// multiple of 16 (the first partition of each GpSimd core: 0, 16, ..., 112), the indices of
/// `src`'s nonzero elements in ascending order plus `index_offset`, then `padding_val` up to
/// `src`'s free size `T`, then their count, into `dst` (`T + 1` elements per partition). The other
/// partitions of `dst` keep their values. A NaN counts as nonzero, `-0.0` as zero. `dst` row `i`
/// takes `src` row `i`; the partitions counted are `src`'s. `src` float32 or int32, `dst` int32,
/// both in SBUF (checked by [`crate::validate`]).
#[track_caller]
pub fn nonzero_with_count(
    dst: impl Into<TileRegion>,
    src: impl Into<TileRegion>,
    index_offset: i32,
    padding_val: i32,
) {
    let loc = SourceLoc::caller();
    let (dst, src) = (dst.into(), src.into());
    with_builder(|b| {
        let want = [src.np, src.nf + 1];
        let why = "src's partitions, one more element for the count";
        if shape_ok(b, loc, "nonzero_with_count", "dst", &dst, want, why) {
            b.push_op(
                Op::NonzeroWithCount {
                    dst,
                    src,
                    index_offset,
                    padding_val,
                },
                loc,
            );
        }
    });
}

/// `nisa.topk(val_dst, idx_dst, src, n)` on GpSimd: each group of 16 partitions of `src` (from
/// the region's first) is one snake of `n` bf16 values, element `e` at partition `e % 16`,
/// column `e / 16`. Of each snake, the `K` largest (`K` is `val_dst`'s free size) are written in
/// ascending order as a snake of the same layout into the group's partitions of `val_dst`
/// (bf16), and their snake indices into `idx_dst` (uint32): result `j` at partition `j % 16`,
/// column `j / 16`. Where the docs are silent: the other elements of `val_dst` and `idx_dst`
/// keep their values; a NaN ranks above every number, `-0.0` equals `0.0`; among equal values
/// the lower snake index is selected first (so ties at the K-th value keep the lower indices)
/// and, in the ascending output, equal values are written lower index first. `val_dst` and
/// `idx_dst` are `[P, K]` for `src`'s `P`; the limits (`8 ≤ n < 65536`, `1 ≤ K < 32768`,
/// `K ≤ n`, `16 · src's free size ≥ n`, `P` a multiple of 16) and dtypes are checked by
/// [`crate::validate`].
#[track_caller]
pub fn topk(
    val_dst: impl Into<TileRegion>,
    idx_dst: impl Into<TileRegion>,
    src: impl Into<TileRegion>,
    n: usize,
) {
    let loc = SourceLoc::caller();
    let (val_dst, idx_dst, src) = (val_dst.into(), idx_dst.into(), src.into());
    with_builder(|b| {
        let want = [src.np, val_dst.nf];
        let ok = shape_ok(
            b,
            loc,
            "topk",
            "val_dst",
            &val_dst,
            want,
            "src's partitions",
        ) && shape_ok(b, loc, "topk", "idx_dst", &idx_dst, want, "val_dst's shape");
        if ok {
            b.push_op(
                Op::Topk {
                    val_dst,
                    idx_dst,
                    src,
                    n,
                },
                loc,
            );
        }
    });
}
