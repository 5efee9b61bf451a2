//! The cross-partition instructions: GpSimd's `tensor_partition_reduce` and the vector engine's
//! `nc_stream_shuffle`.

use crate::ir::{BinOp, Op, TileRegion};
use crate::lang::context::with_builder;
use crate::loc::SourceLoc;

/// The operators `tensor_partition_reduce` implements (NKI also lists mean and the bitwise
/// operators, which torch-nki's operators do not have).
pub const PARTITION_REDUCE_OPS: &[BinOp] = &[
    BinOp::Add,
    BinOp::Maximum,
    BinOp::BitwiseOr,
    BinOp::BitwiseAnd,
];

/// `nisa.tensor_partition_reduce(dst, op, data)`: on GpSimd, `dst[0, f] = op` over the
/// partitions `p` of `data[p, f]`: `data` `(P, F)` into the one-partition `dst` `(1, F)`, `op` add,
/// maximum, or (on integer tiles) bitwise_or / bitwise_and; NKI's `nl.average` is not
/// implemented yet. Where NKI's docs are silent: the reduction runs in fp32 in partition order
/// (partition 0 first) and is rounded once, to `dst`'s dtype; maximum follows `f32::max` (a NaN
/// loses to a number). GpSimd cannot reach PSUM (checked by [`crate::validate`]).
#[track_caller]
pub fn tensor_partition_reduce(dst: impl Into<TileRegion>, op: BinOp, data: impl Into<TileRegion>) {
    let loc = SourceLoc::caller();
    let (dst, data) = (dst.into(), data.into());
    let inst = "tensor_partition_reduce";
    with_builder(|b| {
        if !PARTITION_REDUCE_OPS.contains(&op) {
            b.fail(
                loc,
                format!(
                    "{inst}: op must be add, maximum, bitwise_or or bitwise_and (NKI's partition \
                     reductions; average is not implemented yet), got {op:?}"
                ),
            );
            return;
        }
        if dst.shape() != [1, data.nf] {
            b.fail(
                loc,
                format!(
                    "{inst}: dst must be one partition of data's free size, shape [1, {}], got \
                     shape {:?}",
                    data.nf,
                    dst.shape()
                ),
            );
            return;
        }
        b.push_op(Op::TensorPartitionReduce { dst, op, data }, loc);
    });
}

/// The `shuffle_mask` entry that leaves a destination partition unmodified.
pub const SHUFFLE_KEEP: u8 = 255;

/// `nisa.nc_stream_shuffle(dst, src, shuffle_mask)`: on the vector engine, within each quadrant
/// of 32 partitions (counted from the regions' first partitions), `dst` partition `32·q + i`
/// takes `src` partition `32·q + shuffle_mask[i]`, or is left unmodified where
/// `shuffle_mask[i]` is 255; the same 32-entry mask for every quadrant. `dst` and `src` share
/// one dtype and free size; the number of partitions may differ, but every source partition the
/// mask names must exist. In place (`dst` = `src`) reads every source partition before writing.
/// The hardware's rule on the start partitions is checked by [`crate::validate`].
#[track_caller]
pub fn nc_stream_shuffle(
    dst: impl Into<TileRegion>,
    src: impl Into<TileRegion>,
    shuffle_mask: &[u8],
) {
    let loc = SourceLoc::caller();
    let (dst, src) = (dst.into(), src.into());
    let inst = "nc_stream_shuffle";
    with_builder(|b| {
        let fail =
            |b: &mut crate::lang::context::Builder, m: String| b.fail(loc, format!("{inst}: {m}"));
        if shuffle_mask.len() != 32 {
            fail(
                b,
                format!(
                    "shuffle_mask must have 32 entries, got {}",
                    shuffle_mask.len()
                ),
            );
            return;
        }
        if let Some((i, m)) = shuffle_mask
            .iter()
            .enumerate()
            .find(|&(_, &m)| m >= 32 && m != SHUFFLE_KEEP)
        {
            fail(
                b,
                format!(
                    "shuffle_mask[{i}] is {m}; an entry is a partition 0..31 within the quadrant, \
                     or 255 to leave one unmodified"
                ),
            );
            return;
        }
        if dst.nf != src.nf {
            fail(
                b,
                format!(
                    "dst has {} elements per partition but src has {}; they must match",
                    dst.nf, src.nf
                ),
            );
            return;
        }
        let dtype = |r: &TileRegion| b.tiles.get(r.tile.0 as usize).map(|t| t.dtype);
        if let (Some(d), Some(s)) = (dtype(&dst), dtype(&src))
            && d != s
        {
            fail(
                b,
                format!("src is {s} but dst is {d}; they must share one dtype"),
            );
            return;
        }
        let missing = (0..dst.np).find_map(|p| {
            let m = shuffle_mask[p % 32];
            let from = p / 32 * 32 + usize::from(m);
            (m != SHUFFLE_KEEP && from >= src.np).then_some((p, m, from))
        });
        if let Some((p, m, from)) = missing {
            fail(
                b,
                format!(
                    "dst partition {p} takes src partition {from} (shuffle_mask[{}] is {m}) but \
                     src has {} partitions",
                    p % 32,
                    src.np
                ),
            );
            return;
        }
        let mask = shuffle_mask.to_vec();
        b.push_op(Op::NcStreamShuffle { dst, src, mask }, loc);
    });
}
