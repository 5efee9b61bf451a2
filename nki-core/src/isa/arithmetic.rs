//! The vector engine's arithmetic beyond `tensor_scalar`: `reciprocal`, `exponential`,
//! `tensor_scalar_reduce`, `tensor_scalar_cumulative` and `tensor_tensor_scan`.

use super::{column_ok, float_ok, reduce_ok, same_shape, scalar_ok};
use crate::ir::{BinOp, Op, ScalarOperand, TileRegion};
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

/// `nisa.exponential(dst, src, max_value=0.0)` (NeuronCore-v4 and newer: Trn3):
/// `exp(src − max_value)` elementwise on the vector engine, in fp32 (the scalar engine's
/// exponential, [`crate::engine_math::exp`]), rounded to `dst`'s dtype. `max_value` is an
/// immediate or a `(P, 1)` column. [`exponential_reduce`] also sums each row.
#[track_caller]
pub fn exponential(
    dst: impl Into<TileRegion>,
    src: impl Into<TileRegion>,
    max_value: impl Into<ScalarOperand>,
) {
    record_exponential(
        SourceLoc::caller(),
        dst.into(),
        src.into(),
        max_value.into(),
        None,
        ScalarOperand::Imm { value: 0.0 },
    );
}

/// `nisa.exponential(dst, src, max_value, reduce_res=, reduce_cmd=reset_reduce | load_reduce,
/// reduce_init=)`: [`exponential`] that also writes, for each row, `reduce_init` plus the sum
/// of the row's exponentials into the `(P, 1)` column `reduce_res` (a float tile). The sum is of
/// the fp32 exponentials, before they are rounded to `dst`, in the order of every row
/// reduction of the simulator (eight interleaved lanes), added to `reduce_init` last. NKI's
/// `reset_reduce` is `reduce_init = 0.0`; `load_reduce` passes its `reduce_init` (an immediate or
/// a `(P, 1)` column).
#[track_caller]
pub fn exponential_reduce(
    dst: impl Into<TileRegion>,
    src: impl Into<TileRegion>,
    max_value: impl Into<ScalarOperand>,
    reduce_res: impl Into<TileRegion>,
    reduce_init: impl Into<ScalarOperand>,
) {
    record_exponential(
        SourceLoc::caller(),
        dst.into(),
        src.into(),
        max_value.into(),
        Some(reduce_res.into()),
        reduce_init.into(),
    );
}

fn record_exponential(
    loc: SourceLoc,
    dst: TileRegion,
    src: TileRegion,
    max_value: ScalarOperand,
    reduce_res: Option<TileRegion>,
    reduce_init: ScalarOperand,
) {
    let inst = "exponential";
    with_builder(|b| {
        let np = src.np;
        let ok = same_shape(b, loc, inst, &[("dst", &dst), ("src", &src)])
            && scalar_ok(b, loc, inst, "max_value", &max_value, np)
            && scalar_ok(b, loc, inst, "reduce_init", &reduce_init, np)
            && reduce_res.as_ref().is_none_or(|r| {
                column_ok(b, loc, inst, "reduce_res", r, np)
                    && float_ok(b, loc, inst, "reduce_res", r)
            });
        if ok {
            b.push_op(
                Op::Exponential {
                    dst,
                    src,
                    max_value,
                    reduce_res,
                    reduce_init,
                },
                loc,
            );
        }
    });
}

/// `nisa.tensor_scalar_reduce(dst, data, op0, operand0, reduce_op, reduce_res,
/// reduce_cmd=reset_reduce | load_reduce, reduce_init=, reduce_res_negate=)`: `data <op0>
/// operand0` into `dst` (as a one-operator [`super::tensor_scalar`]: `operand0` an immediate or
/// a `(P, 1)` column), and each row of its fp32 results reduced with `reduce_op` (add,
/// multiply, maximum or minimum) into the `(P, 1)` column `reduce_res`, before the results are
/// rounded to `dst`. The reduction starts from `reduce_op`'s identity (`reset_reduce`) or, with
/// `reduce_init` (`load_reduce`: an immediate or a `(P, 1)` column), is `reduce_init <reduce_op>
/// the row's reduction`; `reduce_res_negate` negates what is written (the reduction itself is
/// unchanged); `reverse0` computes `operand0 <op0> data` instead. Costs one more fixed
/// vector-engine overhead than `tensor_scalar` (NKI's estimate).
#[track_caller]
#[allow(clippy::too_many_arguments)]
pub fn tensor_scalar_reduce(
    dst: impl Into<TileRegion>,
    data: impl Into<TileRegion>,
    op0: BinOp,
    operand0: impl Into<ScalarOperand>,
    reduce_op: BinOp,
    reduce_res: impl Into<TileRegion>,
    reverse0: bool,
    reduce_init: Option<ScalarOperand>,
    reduce_res_negate: bool,
) {
    let loc = SourceLoc::caller();
    let (dst, data, operand0, reduce_res) =
        (dst.into(), data.into(), operand0.into(), reduce_res.into());
    let inst = "tensor_scalar_reduce";
    with_builder(|b| {
        let np = data.np;
        let ok = same_shape(b, loc, inst, &[("dst", &dst), ("data", &data)])
            && scalar_ok(b, loc, inst, "operand0", &operand0, np)
            && reduce_ok(b, loc, inst, Some(&(reduce_op, reduce_res.clone())), np)
            && reduce_init
                .as_ref()
                .is_none_or(|i| scalar_ok(b, loc, inst, "reduce_init", i, np));
        if ok {
            b.push_op(
                Op::TensorScalarReduce {
                    dst,
                    data,
                    op0,
                    operand0,
                    reverse0,
                    reduce_op,
                    reduce_res,
                    reduce_init,
                    negate: reduce_res_negate,
                },
                loc,
            );
        }
    });
}

/// `nisa.tensor_tensor_scan(dst, data0, data1, initial, op0, op1, reverse0=, reverse1=)`: a scan
/// along the free dim of each partition, `dst[f] = op1(op0(data0[f], dst[f−1]), data1[f])`, the
/// state before the first element being `initial` (an immediate or a `(P, 1)` column).
/// `reverse0` makes `data0` `op0`'s right operand, `reverse1` makes `data1` `op1`'s left one.
/// `data0`, `data1` and `dst` have one shape. In fp32: the state carried from element to element
/// is the fp32 result, each element rounded once, as it is written, to `dst`'s dtype (NKI: the
/// engine computes in fp32 and casts the results to `dst.dtype`).
#[track_caller]
#[allow(clippy::too_many_arguments)]
pub fn tensor_tensor_scan(
    dst: impl Into<TileRegion>,
    data0: impl Into<TileRegion>,
    data1: impl Into<TileRegion>,
    initial: impl Into<ScalarOperand>,
    op0: BinOp,
    op1: BinOp,
    reverse0: bool,
    reverse1: bool,
) {
    let loc = SourceLoc::caller();
    let (dst, data0, data1, initial) = (dst.into(), data0.into(), data1.into(), initial.into());
    let inst = "tensor_tensor_scan";
    with_builder(|b| {
        let ok = same_shape(
            b,
            loc,
            inst,
            &[("data0", &data0), ("data1", &data1), ("dst", &dst)],
        ) && scalar_ok(b, loc, inst, "initial", &initial, data0.np);
        if ok {
            b.push_op(
                Op::TensorTensorScan {
                    dst,
                    data0,
                    data1,
                    initial,
                    op0,
                    op1,
                    reverse0,
                    reverse1,
                },
                loc,
            );
        }
    });
}

/// The running reductions `tensor_scalar_cumulative` implements (NKI's list).
pub const CUMULATIVE_OPS: &[BinOp] = &[
    BinOp::Add,
    BinOp::Subtract,
    BinOp::Multiply,
    BinOp::Maximum,
    BinOp::Minimum,
];

/// `nisa.tensor_scalar_cumulative(dst, src, op0, op1, imm0, imm1=None,
/// reduce_cmd=reset_reduce | load_reduce)` on the vector engine: along each row,
/// `acc = op1(op0(src[f], imm0), acc)` and `dst[f] = acc`, the operands in the order of NKI's
/// pseudocode (with `subtract`, `acc = x − acc`). `acc` starts at `op1`'s identity (`imm1 =
/// None`, NKI's `reset_reduce`: 0 for add and subtract, 1 for multiply, −inf for maximum, +inf for
/// minimum) or at `imm1` (`Some`, NKI's `load_reduce`). `imm0` and `imm1` are immediates or
/// `(P, 1)` columns; `op0` is an arithmetic operator (not a comparison), `op1` one of
/// [`CUMULATIVE_OPS`]. Where the docs are silent: the elements are taken from the first to the
/// last, `acc` carried in fp32 and each element rounded once, as it is written, to `dst`'s dtype
/// (so a bf16 `dst` holds the rounded running values of an exact fp32 accumulation). The dtypes
/// (no int32 / uint32 `src` or `dst`, fp32 columns) are checked by [`crate::validate`].
#[track_caller]
pub fn tensor_scalar_cumulative(
    dst: impl Into<TileRegion>,
    src: impl Into<TileRegion>,
    op0: BinOp,
    op1: BinOp,
    imm0: impl Into<ScalarOperand>,
    imm1: Option<ScalarOperand>,
) {
    let loc = SourceLoc::caller();
    let (dst, src, imm0) = (dst.into(), src.into(), imm0.into());
    let inst = "tensor_scalar_cumulative";
    with_builder(|b| {
        if op0.is_comparison() {
            b.fail(
                loc,
                format!("{inst}: op0 must be an arithmetic operator, got the comparison {op0:?}"),
            );
            return;
        }
        if !CUMULATIVE_OPS.contains(&op1) {
            b.fail(
                loc,
                format!(
                    "{inst}: op1 must be add, subtract, multiply, maximum or minimum, got {op1:?}"
                ),
            );
            return;
        }
        let np = src.np;
        let ok = same_shape(b, loc, inst, &[("src", &src), ("dst", &dst)])
            && scalar_ok(b, loc, inst, "imm0", &imm0, np)
            && imm1
                .as_ref()
                .is_none_or(|i| scalar_ok(b, loc, inst, "imm1", i, np));
        if ok {
            b.push_op(
                Op::TensorScalarCumulative {
                    dst,
                    src,
                    op0,
                    op1,
                    imm0,
                    imm1,
                },
                loc,
            );
        }
    });
}
