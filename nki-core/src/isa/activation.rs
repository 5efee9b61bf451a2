//! The scalar engine's `activation`, `activation_reduce` and `activate2`.

use super::{column_ok, reduce_ok, same_shape, scalar_ok};
use crate::ir::{ActFn, BinOp, Op, ScalarOperand, TileRegion};
use crate::lang::context::Builder;
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

/// One tensor-scalar stage of [`activate2`]: an operator and its operand (an immediate or a
/// `(P, 1)` column), or `nl.bypass` (no operation), with its `reverse` flag.
#[derive(Clone, Debug, PartialEq)]
pub struct Activate2Stage {
    /// The operator and its operand; `None` for `nl.bypass`.
    pub op: Option<(BinOp, ScalarOperand)>,
    /// `operand <op> x` instead of `x <op> operand` (NKI's `reverse0` / `reverse1`).
    pub reverse: bool,
}

impl Activate2Stage {
    /// `nl.bypass`: the stage passes its input through.
    pub fn bypass() -> Activate2Stage {
        Activate2Stage {
            op: None,
            reverse: false,
        }
    }

    /// `x <op> operand`.
    pub fn new(op: BinOp, operand: impl Into<ScalarOperand>) -> Activate2Stage {
        Activate2Stage {
            op: Some((op, operand.into())),
            reverse: false,
        }
    }

    /// The same stage with its operands swapped: `operand <op> x`.
    pub fn reversed(self) -> Activate2Stage {
        Activate2Stage {
            reverse: true,
            ..self
        }
    }
}

/// The `(op0, op1)` pairs `activate2`'s tensor-scalar stages support (NKI 0.7's list; `None`
/// is `nl.bypass`).
pub const ACTIVATE2_STAGES: &[(Option<BinOp>, Option<BinOp>)] = &[
    (Some(BinOp::Multiply), Some(BinOp::Add)),
    (Some(BinOp::Multiply), Some(BinOp::Subtract)),
    (Some(BinOp::Multiply), None),
    (Some(BinOp::Add), None),
    (Some(BinOp::Subtract), None),
    (None, None),
];

/// `activate2`'s reduction operators.
pub const ACTIVATE2_REDUCE_OPS: &[BinOp] = &[
    BinOp::Add,
    BinOp::Maximum,
    BinOp::Minimum,
    BinOp::AbsMax,
    BinOp::AbsMin,
];

/// `nisa.activate2(dst, op, data, imm0, imm1, op0, op1, relu_param, reverse0, reverse1)`:
/// `op((data <op0> imm0) <op1> imm1)` on the scalar engine (NeuronCore-v4 and newer), `stage0`
/// and `stage1` one of the [`ACTIVATE2_STAGES`] pairs, `relu_param` the function's parameter
/// (`nl.prelu`'s slope; an immediate or a `(P, 1)` column).
#[track_caller]
pub fn activate2(
    dst: impl Into<TileRegion>,
    op: ActFn,
    data: impl Into<TileRegion>,
    stage0: Activate2Stage,
    stage1: Activate2Stage,
    relu_param: impl Into<ScalarOperand>,
) {
    record_activate2(
        SourceLoc::caller(),
        (dst.into(), op, data.into()),
        [stage0, stage1],
        relu_param.into(),
        None,
    );
}

/// [`activate2`] that also reduces each row of its fp32 results with `reduce_op` (one of
/// [`ACTIVATE2_REDUCE_OPS`]) into the `(P, 1)` column `reduce_res` (NKI's
/// `reduce_cmd=reset_reduce` with `reduce_res`).
#[track_caller]
pub fn activate2_reduce(
    dst: impl Into<TileRegion>,
    op: ActFn,
    data: impl Into<TileRegion>,
    (stage0, stage1): (Activate2Stage, Activate2Stage),
    relu_param: impl Into<ScalarOperand>,
    reduce_op: BinOp,
    reduce_res: impl Into<TileRegion>,
) {
    record_activate2(
        SourceLoc::caller(),
        (dst.into(), op, data.into()),
        [stage0, stage1],
        relu_param.into(),
        Some((reduce_op, reduce_res.into())),
    );
}

const ACTIVATE2: &str = "activate2";

fn record_activate2(
    loc: SourceLoc,
    (dst, func, data): (TileRegion, ActFn, TileRegion),
    [stage0, stage1]: [Activate2Stage; 2],
    relu_param: ScalarOperand,
    reduce: Option<(BinOp, TileRegion)>,
) {
    with_builder(|b| {
        let np = data.np;
        let ok = same_shape(b, loc, ACTIVATE2, &[("dst", &dst), ("data", &data)])
            && stages_ok(b, loc, &stage0, &stage1, np)
            && scalar_ok(b, loc, ACTIVATE2, "relu_param", &relu_param, np)
            && activate2_reduce_ok(b, loc, reduce.as_ref(), np);
        if ok {
            b.push_op(
                Op::Activate2 {
                    dst,
                    func,
                    data,
                    stage0: stage0.op,
                    reverse0: stage0.reverse,
                    stage1: stage1.op,
                    reverse1: stage1.reverse,
                    relu_param,
                    reduce,
                },
                loc,
            );
        }
    });
}

/// The stages are a supported pair, `reverse` only on a stage with an operator, their
/// operands immediates or `(np, 1)` columns, and two column operands of one dtype.
fn stages_ok(
    b: &mut Builder,
    loc: SourceLoc,
    s0: &Activate2Stage,
    s1: &Activate2Stage,
    np: usize,
) -> bool {
    let name = |s: &Activate2Stage| s.op.as_ref().map_or("nl.bypass", |(o, _)| o.nki_name());
    let pair = (s0.op.as_ref().map(|o| o.0), s1.op.as_ref().map(|o| o.0));
    if !ACTIVATE2_STAGES.contains(&pair) {
        let hint = if pair.0.is_none() {
            " (op1 requires op0 to be set)"
        } else {
            ""
        };
        b.fail(
            loc,
            format!(
                "activate2: (op0, op1) = ({}, {}) is not a supported pair{hint}; the pairs are \
                 (nl.multiply, nl.add), (nl.multiply, nl.subtract), (nl.multiply, nl.bypass), \
                 (nl.add, nl.bypass), (nl.subtract, nl.bypass), (nl.bypass, nl.bypass)",
                name(s0),
                name(s1)
            ),
        );
        return false;
    }
    for (i, s) in [s0, s1].into_iter().enumerate() {
        match &s.op {
            None if s.reverse => {
                b.fail(
                    loc,
                    format!(
                        "activate2: reverse{i}=True requires op{i} to be set (it is nl.bypass)"
                    ),
                );
                return false;
            }
            Some((_, operand))
                if !scalar_ok(b, loc, ACTIVATE2, &format!("imm{i}"), operand, np) =>
            {
                return false;
            }
            _ => {}
        }
    }
    if let (
        Some((_, ScalarOperand::Column { region: c0 })),
        Some((_, ScalarOperand::Column { region: c1 })),
    ) = (&s0.op, &s1.op)
    {
        let dtype = |r: &TileRegion| b.tiles.get(r.tile.0 as usize).map(|t| t.dtype);
        if let (Some(d0), Some(d1)) = (dtype(c0), dtype(c1))
            && d0 != d1
        {
            b.fail(
                loc,
                format!("activate2: imm0 and imm1 are tiles of different dtypes ({d0} and {d1}); both must have one dtype"),
            );
            return false;
        }
    }
    true
}

/// `reduce_res` is a `(np, 1)` column and `reduce_op` one of [`ACTIVATE2_REDUCE_OPS`].
fn activate2_reduce_ok(
    b: &mut Builder,
    loc: SourceLoc,
    reduce: Option<&(BinOp, TileRegion)>,
    np: usize,
) -> bool {
    let Some((op, res)) = reduce else {
        return true;
    };
    if !column_ok(b, loc, ACTIVATE2, "reduce_res", res, np) {
        return false;
    }
    if !ACTIVATE2_REDUCE_OPS.contains(op) {
        b.fail(
            loc,
            format!(
                "activate2: reduce_op={} is not one of its reductions (nl.add, nl.maximum, \
                 nl.minimum, nl.abs_max, nl.abs_min)",
                op.nki_name()
            ),
        );
        return false;
    }
    true
}
