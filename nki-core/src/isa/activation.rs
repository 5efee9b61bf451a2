//! The scalar engine's `activation` and `activation_reduce`.

use super::{column_ok, reduce_ok, same_shape, scalar_ok};
use crate::ir::{ActFn, BinOp, Op, ScalarOperand, TileRegion};
use crate::lang::context::with_builder;
use crate::loc::SourceLoc;

/// `nisa.activation(dst, op, data, bias=None, scale=1.0)`: `op(data * scale + bias)` on the
/// scalar engine. `bias` is a `(P, 1)` column or `None`; `scale` an immediate or a `(P, 1)`
/// column.
#[track_caller]
pub fn activation(
    dst: impl Into<TileRegion>,
    op: ActFn,
    data: impl Into<TileRegion>,
    bias: Option<TileRegion>,
    scale: impl Into<ScalarOperand>,
) {
    record_activation(
        SourceLoc::caller(),
        dst.into(),
        op,
        data.into(),
        scale.into(),
        bias,
        None,
    );
}

/// `nisa.activation_reduce(dst, op, data, reduce_op, reduce_res, bias=None, scale=1.0)`:
/// [`activation`] that also reduces each row of the result with `reduce_op` into the `(P, 1)`
/// column `reduce_res`.
#[track_caller]
pub fn activation_reduce(
    dst: impl Into<TileRegion>,
    op: ActFn,
    data: impl Into<TileRegion>,
    reduce_op: BinOp,
    reduce_res: impl Into<TileRegion>,
    bias: Option<TileRegion>,
    scale: impl Into<ScalarOperand>,
) {
    let reduce = Some((reduce_op, reduce_res.into()));
    record_activation(
        SourceLoc::caller(),
        dst.into(),
        op,
        data.into(),
        scale.into(),
        bias,
        reduce,
    );
}

fn record_activation(
    loc: SourceLoc,
    dst: TileRegion,
    func: ActFn,
    data: TileRegion,
    scale: ScalarOperand,
    bias: Option<TileRegion>,
    reduce: Option<(BinOp, TileRegion)>,
) {
    with_builder(|b| {
        let np = data.np;
        let ok = same_shape(b, loc, "activation", &[("dst", &dst), ("data", &data)])
            && scalar_ok(b, loc, "activation", "scale", &scale, np)
            && bias
                .as_ref()
                .is_none_or(|r| column_ok(b, loc, "activation", "bias", r, np))
            && reduce_ok(b, loc, "activation", reduce.as_ref(), np);
        if ok {
            b.push_op(
                Op::Activation {
                    dst,
                    func,
                    data,
                    scale,
                    bias,
                    reduce,
                },
                loc,
            );
        }
    });
}
