//! Predicated copies: the vector engine's `tensor_copy_predicated` and `select_reduce` (a
//! predicate tile) and GpSimd's `affine_select` (a predicate computed from the indices).

use super::same_shape;
use crate::ir::{BinOp, Op, ScalarOperand, TileRegion};
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

/// `nisa.affine_select(dst, pattern=[[step, nf]], channel_multiplier, on_true_tile,
/// on_false_value, cmp_op=nl.equal, offset=0)` on the GpSimd engine: `dst[p, f] =
/// on_true_tile[p, f]` where `cmp_op(offset + channel_multiplier·p + step·f, 0)` holds and
/// `on_false_value` elsewhere, for the partition `p` and free index `f` within `dst` (as
/// [`super::iota`] numbers them; the affine value in int32, wrapping), rounded to `dst`'s dtype.
/// NKI's `pattern` is the one-dimensional `[[step, nf]]` over `dst`'s free size, so only its
/// `step` is a parameter here. `cmp_op` is a comparison (`nl.equal`, `not_equal`, `greater`,
/// `greater_equal`, `less`, `less_equal`). `dst` and `on_true_tile` have the same shape and are
/// in SBUF (GpSimd cannot reach PSUM; checked by [`crate::validate`]). A causal mask is
/// `affine_select(dst, -1, 1, scores, -inf, BinOp::GreaterEqual, 0)` (keep `f <= p`).
#[track_caller]
pub fn affine_select(
    dst: impl Into<TileRegion>,
    step: i32,
    channel_multiplier: i32,
    on_true_tile: impl Into<TileRegion>,
    on_false_value: f32,
    cmp_op: BinOp,
    offset: i32,
) {
    let loc = SourceLoc::caller();
    let (dst, on_true) = (dst.into(), on_true_tile.into());
    let inst = "affine_select";
    with_builder(|b| {
        if !cmp_op.is_comparison() {
            b.fail(
                loc,
                format!(
                    "{inst}: cmp_op is {}, but it must be a comparison (nl.equal, nl.not_equal, \
                     nl.greater, nl.greater_equal, nl.less, nl.less_equal)",
                    cmp_op.nki_name()
                ),
            );
        } else if same_shape(b, loc, inst, &[("dst", &dst), ("on_true_tile", &on_true)]) {
            b.push_op(
                Op::AffineSelect {
                    dst,
                    step,
                    channel_multiplier,
                    on_true,
                    on_false: on_false_value,
                    cmp: cmp_op,
                    offset,
                },
                loc,
            );
        }
    });
}

/// `nisa.select_reduce(dst, predicate, on_true, on_false, reduce_res=None, reduce_cmd=,
/// reduce_op=nl.maximum, reverse_pred=False)` on the vector engine: `dst[p, f] = on_true[p, f]`
/// where `predicate[p, f]` is nonzero (zero with `reverse_pred`: NKI's `~predicate` read as a
/// logical not) and `on_false` elsewhere (an immediate, or a `(P, 1)` column broadcast along the
/// row), in fp32 and rounded once to `dst`'s dtype. With `reduce_res` (a `(P, 1)` float column:
/// NKI's `reduce_cmd=reset_reduce`, the accumulator reset to −inf), each row's maximum of the
/// selected fp32 values, before they are rounded to `dst`, is written there; NaN loses to a
/// number, as in every row maximum of the simulator. `dst`, `predicate` and `on_true` share one
/// shape. The dtypes (an integer predicate, an `on_true` other than tfloat32 / int32 / uint32, an
/// fp32 `on_false` column, a float `reduce_res`) and the rule that `on_true` and `predicate` are
/// not both in PSUM are checked by [`crate::validate`].
#[track_caller]
pub fn select_reduce(
    dst: impl Into<TileRegion>,
    predicate: impl Into<TileRegion>,
    on_true: impl Into<TileRegion>,
    on_false: impl Into<ScalarOperand>,
    reduce_res: Option<TileRegion>,
    reverse_pred: bool,
) {
    let loc = SourceLoc::caller();
    let (dst, predicate, on_true, on_false) = (
        dst.into(),
        predicate.into(),
        on_true.into(),
        on_false.into(),
    );
    let inst = "select_reduce";
    with_builder(|b| {
        let np = on_true.np;
        let ok = same_shape(
            b,
            loc,
            inst,
            &[
                ("on_true", &on_true),
                ("dst", &dst),
                ("predicate", &predicate),
            ],
        ) && super::scalar_ok(b, loc, inst, "on_false", &on_false, np)
            && reduce_res
                .as_ref()
                .is_none_or(|r| super::column_ok(b, loc, inst, "reduce_res", r, np));
        if ok {
            b.push_op(
                Op::SelectReduce {
                    dst,
                    predicate,
                    on_true,
                    on_false,
                    reduce_res,
                    reverse_pred,
                },
                loc,
            );
        }
    });
}
