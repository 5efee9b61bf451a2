//! The vector engine's predicated copy: `tensor_copy_predicated`.

use super::same_shape;
use crate::ir::{Op, ScalarOperand, TileRegion};
use crate::lang::context::with_builder;
use crate::loc::SourceLoc;

/// `nisa.tensor_copy_predicated(dst, src, predicate, reverse_pred=False)`: copies `src` (a tile of
/// `dst`'s shape and dtype, or an immediate, rounded to `dst`'s dtype) into `dst` where
/// `predicate` (`dst`'s shape) is nonzero, or zero with `reverse_pred`; elsewhere `dst` keeps
/// its values. NKI's predicate is a uint8/uint16/uint32 tile, which torch-nki does not have: here
/// a predicate of any dtype holds where it is nonzero (NaN counts as nonzero, as a float compared
/// with zero). `src` and `predicate` cannot both be in PSUM (checked by [`crate::validate`]).
#[track_caller]
pub fn tensor_copy_predicated(
    dst: impl Into<TileRegion>,
    src: impl Into<ScalarOperand>,
    predicate: impl Into<TileRegion>,
    reverse_pred: bool,
) {
    let loc = SourceLoc::caller();
    let (dst, src, predicate) = (dst.into(), src.into(), predicate.into());
    let inst = "tensor_copy_predicated";
    with_builder(|b| {
        let (src, imm) = match src {
            ScalarOperand::Column { region } => (Some(region), 0.0),
            ScalarOperand::Imm { value } => (None, value),
        };
        let mut ok = same_shape(b, loc, inst, &[("dst", &dst), ("predicate", &predicate)]);
        if let Some(s) = src.as_ref().filter(|_| ok) {
            ok = same_shape(b, loc, inst, &[("dst", &dst), ("src", s)]);
            let dtype = |r: &TileRegion| b.tiles.get(r.tile.0 as usize).map(|t| t.dtype);
            if let (true, Some(d), Some(s)) = (ok, dtype(&dst), dtype(s))
                && d != s
            {
                b.fail(
                    loc,
                    format!("{inst}: src is {s} but dst is {d}; they must share one dtype"),
                );
                ok = false;
            }
        }
        if ok {
            b.push_op(
                Op::TensorCopyPredicated {
                    dst,
                    src,
                    imm,
                    predicate,
                    reverse: reverse_pred,
                },
                loc,
            );
        }
    });
}
