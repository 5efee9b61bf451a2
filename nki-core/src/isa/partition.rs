//! The cross-partition instructions: GpSimd's `tensor_partition_reduce`.

use crate::ir::{BinOp, Op, TileRegion};
use crate::lang::context::with_builder;
use crate::loc::SourceLoc;

/// The operators `tensor_partition_reduce` implements (NKI also lists mean and the bitwise
/// operators, which torch-nki's operators do not have).
pub const PARTITION_REDUCE_OPS: &[BinOp] = &[BinOp::Add, BinOp::Maximum];

/// `nisa.tensor_partition_reduce(dst, op, data)`: on GpSimd, `dst[0, f] = op` over the
/// partitions `p` of `data[p, f]`: `data` `(P, F)` into the one-partition `dst` `(1, F)`, `op` add
/// or maximum. Where NKI's docs are silent: the reduction runs in fp32 in partition order
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
                    "{inst}: op must be add or maximum (NKI's partition reductions), got {op:?}"
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
