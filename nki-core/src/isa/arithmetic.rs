//! The vector engine's arithmetic beyond `tensor_scalar`: `reciprocal`.

use super::same_shape;
use crate::ir::{Op, TileRegion};
use crate::lang::context::with_builder;
use crate::loc::SourceLoc;

/// `nisa.reciprocal(dst, data)`: `1 / data` elementwise on the vector engine, computed in fp32
/// and rounded to `dst`'s dtype (`1 / ±0 = ±inf`, `1 / ±inf = ±0`, NaN stays NaN). `dst` and
/// `data` have the same shape; either may be in SBUF or PSUM.
#[track_caller]
pub fn reciprocal(dst: impl Into<TileRegion>, data: impl Into<TileRegion>) {
    let loc = SourceLoc::caller();
    let (dst, data) = (dst.into(), data.into());
    with_builder(|b| {
        if same_shape(b, loc, "reciprocal", &[("dst", &dst), ("data", &data)]) {
            b.push_op(Op::Reciprocal { dst, data }, loc);
        }
    });
}
