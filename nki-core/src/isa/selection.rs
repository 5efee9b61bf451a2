//! The vector engine's selection of the largest values of each partition, eight at a time:
//! `max8` finds them, `nc_find_index8` where they are, and `nc_match_replace8` replaces them
//! (by `-inf`, say) so that the next `max8` finds the next eight: a top-k in `k / 8` rounds.
//!
//! Indices are written to int32 tiles, the integer dtype torch-nki has: NKI writes them as
//! uint32 (or uint16), and the all-ones "not found" value reads as −1 in int32.

use super::{SourceLoc, TileRegion};
use crate::dtype::DType;
use crate::ir::Op;
use crate::lang::context::{Builder, with_builder};

/// The fewest elements per partition the selection instructions read.
pub const SELECT8_MIN_ELEMENTS: usize = 8;

/// The most elements per partition the selection instructions read.
pub const SELECT8_MAX_ELEMENTS: usize = 16384;

fn elements_ok(b: &mut Builder, loc: SourceLoc, inst: &str, name: &str, r: &TileRegion) -> bool {
    if (SELECT8_MIN_ELEMENTS..=SELECT8_MAX_ELEMENTS).contains(&r.nf) {
        return true;
    }
    b.fail(
        loc,
        format!(
            "{inst}: {name} has {} elements per partition; it must have between \
             {SELECT8_MIN_ELEMENTS} and {SELECT8_MAX_ELEMENTS}",
            r.nf
        ),
    );
    false
}

fn eight_ok(
    b: &mut Builder,
    loc: SourceLoc,
    inst: &str,
    name: &str,
    r: &TileRegion,
    np: usize,
) -> bool {
    if r.shape() == [np, 8] {
        return true;
    }
    b.fail(
        loc,
        format!(
            "{inst}: {name} must be ({np}, 8), eight values per partition, got shape {:?}",
            r.shape()
        ),
    );
    false
}

fn index_dtype_ok(b: &mut Builder, loc: SourceLoc, inst: &str, name: &str, r: &TileRegion) -> bool {
    match b.tiles.get(r.tile.0 as usize).map(|t| t.dtype) {
        Some(dt) if !matches!(dt, DType::U32 | DType::I32) => {
            b.fail(
                loc,
                format!(
                    "{inst}: {name} must be a uint32 tile (indices; int32 is accepted too), \
                     got {dt}"
                ),
            );
            false
        }
        _ => true,
    }
}

/// `nisa.max8(dst, src)`: the eight largest values of each partition of `src` (8 to 16384
/// elements per partition), in descending order, into `dst` (`(P, 8)`), compared in fp32 and
/// rounded to `dst`'s dtype. The docs do not order NaN or ties; here a NaN ranks above every
/// number (as `torch.topk` ranks it), `-0.0` equals `0.0`, and equal values keep their order in
/// the row.
#[track_caller]
pub fn max8(dst: impl Into<TileRegion>, src: impl Into<TileRegion>) {
    let loc = SourceLoc::caller();
    let (dst, src) = (dst.into(), src.into());
    with_builder(|b| {
        if elements_ok(b, loc, "max8", "src", &src) && eight_ok(b, loc, "max8", "dst", &dst, src.np)
        {
            b.push_op(Op::Max8 { dst, src }, loc);
        }
    });
}

/// `nisa.nc_find_index8(dst, data, vals)`: for each of the eight values of each partition of
/// `vals` (`(P, 8)`), the index of its first occurrence in that partition of `data` (8 to 16384
/// elements), into the int32 `dst` (`(P, 8)`). A value repeated in `vals` takes the next
/// occurrence each time (its k-th repetition the k-th occurrence, in ascending order, as the
/// docs describe for duplicates), so the eight values of a [`max8`] with ties get distinct
/// indices. A value with no (further) occurrence gets −1 (uint32's all-ones sentinel, as
/// int32). Values match when equal in fp32 (`-0.0` matches `0.0`) and, where the docs are
/// silent, a NaN matches a NaN, so every value [`max8`] returns is found.
#[track_caller]
pub fn nc_find_index8(
    dst: impl Into<TileRegion>,
    data: impl Into<TileRegion>,
    vals: impl Into<TileRegion>,
) {
    let loc = SourceLoc::caller();
    let (dst, data, vals) = (dst.into(), data.into(), vals.into());
    let inst = "nc_find_index8";
    with_builder(|b| {
        let np = data.np;
        let ok = elements_ok(b, loc, inst, "data", &data)
            && eight_ok(b, loc, inst, "vals", &vals, np)
            && eight_ok(b, loc, inst, "dst", &dst, np)
            && index_dtype_ok(b, loc, inst, "dst", &dst);
        if ok {
            b.push_op(Op::NcFindIndex8 { dst, data, vals }, loc);
        }
    });
}

/// `nisa.nc_match_replace8(dst, data, vals, imm, dst_idx=None)`: `data` into `dst` (same shape,
/// 8 to 16384 elements per partition) with, for each of the eight values of each partition of
/// `vals` (`(P, 8)`), its first occurrence in the partition replaced by `imm` (rounded to
/// `dst`'s dtype). `vals` is taken in reverse order (`vals[7]` first) and each value takes the
/// first occurrence not replaced yet, so a value repeated in `vals` is paired with its
/// occurrences in descending slot order (the docs' rule); with `dst_idx` (an int32 `(P, 8)`
/// tile), slot `i` gets the index `vals[i]` replaced, or −1 where it found none (the docs are
/// silent; the sentinel of [`nc_find_index8`]). Values match as for [`nc_find_index8`];
/// replaced elements are never matched again, even when `imm` equals a later value. `dst` may
/// be `data` (the top-k loop: `max8`, then replace the eight by `-inf` in place).
#[track_caller]
pub fn nc_match_replace8(
    dst: impl Into<TileRegion>,
    data: impl Into<TileRegion>,
    vals: impl Into<TileRegion>,
    imm: f32,
    dst_idx: Option<TileRegion>,
) {
    let loc = SourceLoc::caller();
    let (dst, data, vals) = (dst.into(), data.into(), vals.into());
    let inst = "nc_match_replace8";
    with_builder(|b| {
        let np = data.np;
        let ok = elements_ok(b, loc, inst, "data", &data)
            && super::same_shape(b, loc, inst, &[("dst", &dst), ("data", &data)])
            && eight_ok(b, loc, inst, "vals", &vals, np)
            && dst_idx.as_ref().is_none_or(|i| {
                eight_ok(b, loc, inst, "dst_idx", i, np)
                    && index_dtype_ok(b, loc, inst, "dst_idx", i)
            });
        if ok {
            b.push_op(
                Op::NcMatchReplace8 {
                    dst,
                    data,
                    vals,
                    imm,
                    dst_idx,
                },
                loc,
            );
        }
    });
}
