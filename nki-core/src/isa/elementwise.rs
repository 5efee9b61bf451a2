//! The vector engine's (and GpSimd's) elementwise instructions: `tensor_tensor`,
//! `tensor_scalar`, `scalar_tensor_tensor`, `tensor_reduce`, `tensor_copy`, `memset`, `iota` and
//! `range_select`.

use super::{column_ok, reduce_ok, same_shape, scalar_ok};
use crate::ir::{
    BinOp, ElementwiseEngine, Instruction, IotaDim, Op, ScalarOperand, Stmt, TileRegion,
};
use crate::lang::context::{StmtRef, with_builder};
use crate::loc::SourceLoc;

/// `nisa.tensor_tensor(dst, a, b, op)`: elementwise `a <op> b` on the vector engine. Chain
/// [`.on(ElementwiseEngine::GpSimd)`](TensorTensor::on) for NKI's `engine=nisa.engine.gpsimd`.
#[track_caller]
pub fn tensor_tensor(
    dst: impl Into<TileRegion>,
    a: impl Into<TileRegion>,
    b: impl Into<TileRegion>,
    op: BinOp,
) -> TensorTensor {
    let loc = SourceLoc::caller();
    let (dst, a, bb) = (dst.into(), a.into(), b.into());
    let at = with_builder(|b| {
        same_shape(
            b,
            loc,
            "tensor_tensor",
            &[("dst", &dst), ("a", &a), ("b", &bb)],
        )
        .then(|| {
            b.push_op(
                Op::TensorTensor {
                    dst,
                    a,
                    b: bb,
                    op,
                    engine: ElementwiseEngine::Vector,
                },
                loc,
            )
        })
    });
    TensorTensor { at, loc }
}

/// A recorded `tensor_tensor`, to choose its engine with [`TensorTensor::on`].
#[derive(Debug)]
pub struct TensorTensor {
    at: Option<StmtRef>,
    loc: SourceLoc,
}

impl TensorTensor {
    /// Runs the instruction on `engine` (NKI's `engine=`) instead of the vector engine. Chain it
    /// directly on the `tensor_tensor(...)` call. GpSimd cannot reach PSUM; the validator
    /// rejects PSUM operands there.
    #[track_caller]
    pub fn on(self, engine: ElementwiseEngine) {
        let loc = SourceLoc::caller();
        with_builder(|b| {
            let Some(at) = self.at else {
                return; // the tensor_tensor itself failed and was reported
            };
            match b.stmt_mut(at) {
                Some(Stmt::Inst(Instruction {
                    op: Op::TensorTensor { engine: slot, .. },
                    loc: recorded,
                })) if *recorded == self.loc => *slot = engine,
                _ => b.fail(
                    loc,
                    "tensor_tensor(...).on(...): chain `.on` directly on the `tensor_tensor` call"
                        .into(),
                ),
            }
        });
    }
}

/// `nisa.tensor_scalar(dst, data, op0, operand0)`: `data <op0> operand0`, where the operand is
/// an immediate or a `(P, 1)` column broadcast along the free dim. Chain
/// [`.then(op1, operand1)`](TensorScalar::then) for NKI's `op1=`/`operand1=`:
/// `(data <op0> operand0) <op1> operand1` in one instruction.
#[track_caller]
pub fn tensor_scalar(
    dst: impl Into<TileRegion>,
    data: impl Into<TileRegion>,
    op0: BinOp,
    operand0: impl Into<ScalarOperand>,
) -> TensorScalar {
    let loc = SourceLoc::caller();
    let at = record_tensor_scalar(loc, dst.into(), data.into(), op0, operand0.into());
    TensorScalar { at, loc }
}

/// A recorded `tensor_scalar`, to add its second operation with [`TensorScalar::then`].
#[derive(Debug)]
pub struct TensorScalar {
    at: Option<StmtRef>,
    loc: SourceLoc,
}

impl TensorScalar {
    /// Swaps `op0`'s operands: `operand0 <op0> data` (NKI's `reverse0=True`). Chain it directly
    /// on the `tensor_scalar(...)` call, before [`TensorScalar::then`].
    #[track_caller]
    pub fn reverse0(self) -> TensorScalar {
        let loc = SourceLoc::caller();
        with_builder(|b| match self.at.and_then(|at| b.stmt_mut(at)) {
            Some(Stmt::Inst(Instruction {
                op: Op::TensorScalar { reverse0, .. },
                loc: recorded,
            })) if *recorded == self.loc => *reverse0 = true,
            Some(_) => b.fail(
                loc,
                "tensor_scalar(...).reverse0(): chain it directly on the `tensor_scalar` call"
                    .into(),
            ),
            None => {} // the tensor_scalar itself failed and was reported
        });
        self
    }

    /// [`TensorScalar::then`] with `op1`'s operands swapped: `operand1 <op1> (data <op0>
    /// operand0)` (NKI's `reverse1=True`).
    #[track_caller]
    pub fn then_reversed(self, op1: BinOp, operand1: impl Into<ScalarOperand>) {
        self.chain(SourceLoc::caller(), op1, operand1.into(), true);
    }

    /// Adds `<op1> operand1` after `op0` (NKI's `op1=`, `operand1=`). Chain it directly on the
    /// `tensor_scalar(...)` call.
    #[track_caller]
    pub fn then(self, op1: BinOp, operand1: impl Into<ScalarOperand>) {
        self.chain(SourceLoc::caller(), op1, operand1.into(), false);
    }

    fn chain(self, loc: SourceLoc, op1: BinOp, operand1: ScalarOperand, reversed: bool) {
        with_builder(|b| {
            let Some(at) = self.at else {
                return; // the tensor_scalar itself failed and was reported
            };
            let np = match b.stmt_mut(at) {
                Some(Stmt::Inst(Instruction {
                    op:
                        Op::TensorScalar {
                            data, op1: None, ..
                        },
                    loc: recorded,
                })) if *recorded == self.loc => data.np,
                _ => {
                    b.fail(
                        loc,
                        "tensor_scalar(...).then(...): chain `.then` directly on the `tensor_scalar` call"
                            .into(),
                    );
                    return;
                }
            };
            if !scalar_ok(b, loc, "tensor_scalar", "operand1", &operand1, np) {
                return;
            }
            let tiles = std::mem::take(&mut b.tiles);
            let problem = match b.stmt_mut(at) {
                Some(Stmt::Inst(Instruction {
                    op: op @ Op::TensorScalar { .. },
                    ..
                })) => {
                    if let Op::TensorScalar {
                        op1: slot,
                        reverse1,
                        ..
                    } = op
                    {
                        *slot = Some((op1, operand1));
                        *reverse1 = reversed;
                    }
                    crate::isa::operators::operator_problem(&tiles, op)
                }
                _ => None,
            };
            b.tiles = tiles;
            if let Some(message) = problem {
                b.fail(loc, message);
            }
        });
    }
}

fn record_tensor_scalar(
    loc: SourceLoc,
    dst: TileRegion,
    data: TileRegion,
    op0: BinOp,
    operand0: ScalarOperand,
) -> Option<StmtRef> {
    with_builder(|b| {
        let np = data.np;
        let ok = same_shape(b, loc, "tensor_scalar", &[("dst", &dst), ("data", &data)])
            && scalar_ok(b, loc, "tensor_scalar", "operand0", &operand0, np);
        ok.then(|| {
            b.push_op(
                Op::TensorScalar {
                    dst,
                    data,
                    op0,
                    operand0,
                    reverse0: false,
                    op1: None,
                    reverse1: false,
                },
                loc,
            )
        })
    })
}

/// `nisa.scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1)`:
/// `(data <op0> operand0) <op1> operand1` on the vector engine, where `operand0` is an
/// immediate or a `(P, 1)` column broadcast along the free dim (as in [`tensor_scalar`]) and
/// `operand1` a tile region of `data`'s shape: a `tensor_scalar` into an fp32 temporary and a
/// `tensor_tensor` in one instruction, at `tensor_tensor`'s cost. `data` and `operand1` cannot
/// both be in PSUM. [`scalar_tensor_tensor_reduce`] also reduces each row of the result.
#[track_caller]
pub fn scalar_tensor_tensor(
    dst: impl Into<TileRegion>,
    data: impl Into<TileRegion>,
    op0: BinOp,
    operand0: impl Into<ScalarOperand>,
    op1: BinOp,
    operand1: impl Into<TileRegion>,
) {
    record_scalar_tensor_tensor(
        SourceLoc::caller(),
        dst.into(),
        data.into(),
        (op0, operand0.into()),
        (op1, operand1.into()),
        ScalarTensorTensorArgs::default(),
    );
}

/// The optional keywords of `nisa.scalar_tensor_tensor`, for
/// [`scalar_tensor_tensor_with`]; the default is NKI's.
#[derive(Clone, Debug, Default)]
pub struct ScalarTensorTensorArgs {
    /// `operand0 <op0> data` instead of `data <op0> operand0` (NKI's `reverse0`).
    pub reverse0: bool,
    /// `operand1 <op1> first` instead of `first <op1> operand1` (NKI's `reverse1`).
    pub reverse1: bool,
    /// `reduce_op` and `reduce_res`, as in [`scalar_tensor_tensor_reduce`].
    pub reduce: Option<(BinOp, TileRegion)>,
}

/// [`scalar_tensor_tensor`] with the optional keywords: the operand orders and the row
/// reduction.
#[track_caller]
pub fn scalar_tensor_tensor_with(
    dst: impl Into<TileRegion>,
    data: impl Into<TileRegion>,
    (op0, operand0): (BinOp, ScalarOperand),
    (op1, operand1): (BinOp, TileRegion),
    args: ScalarTensorTensorArgs,
) {
    record_scalar_tensor_tensor(
        SourceLoc::caller(),
        dst.into(),
        data.into(),
        (op0, operand0),
        (op1, operand1),
        args,
    );
}

/// `nisa.scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1, reduce_op=,
/// reduce_res=)` (NKI 2.33, Trn2/Trn3): [`scalar_tensor_tensor`] that also reduces each row of
/// its result with `reduce_op` (add, multiply, maximum or minimum) into the `(P, 1)` column
/// `reduce_res`, starting afresh (`reduce_cmd=reset_reduce`). The engine reduces the fp32
/// results, before they are rounded to `dst`; the reduction costs one more fixed vector-engine
/// overhead (64 cycles, NKI's estimate for `tensor_scalar_reduce`).
#[track_caller]
#[allow(clippy::too_many_arguments)]
pub fn scalar_tensor_tensor_reduce(
    dst: impl Into<TileRegion>,
    data: impl Into<TileRegion>,
    op0: BinOp,
    operand0: impl Into<ScalarOperand>,
    op1: BinOp,
    operand1: impl Into<TileRegion>,
    reduce_op: BinOp,
    reduce_res: impl Into<TileRegion>,
) {
    record_scalar_tensor_tensor(
        SourceLoc::caller(),
        dst.into(),
        data.into(),
        (op0, operand0.into()),
        (op1, operand1.into()),
        ScalarTensorTensorArgs {
            reduce: Some((reduce_op, reduce_res.into())),
            ..Default::default()
        },
    );
}

fn record_scalar_tensor_tensor(
    loc: SourceLoc,
    dst: TileRegion,
    data: TileRegion,
    (op0, operand0): (BinOp, ScalarOperand),
    (op1, operand1): (BinOp, TileRegion),
    args: ScalarTensorTensorArgs,
) {
    let ScalarTensorTensorArgs {
        reverse0,
        reverse1,
        reduce,
    } = args;
    with_builder(|b| {
        let inst = "scalar_tensor_tensor";
        let np = data.np;
        let ok = same_shape(
            b,
            loc,
            inst,
            &[("dst", &dst), ("data", &data), ("operand1", &operand1)],
        ) && scalar_ok(b, loc, inst, "operand0", &operand0, np)
            && reduce_ok(b, loc, inst, reduce.as_ref(), np);
        if ok {
            b.push_op(
                Op::ScalarTensorTensor {
                    dst,
                    data,
                    op0,
                    operand0,
                    reverse0,
                    op1,
                    operand1,
                    reverse1,
                    reduce,
                },
                loc,
            );
        }
    });
}

/// `nisa.tensor_reduce(dst, op, data, axis, negate=False)`: reduces each partition's free
/// elements into a `(P, 1)` destination, or, with a `(P, K)` destination, each of the `K`
/// consecutive groups of `F / K` free elements into one column (NKI's reduction over the last
/// free dims of a multi-dimensional tile, `axis=(k, ..., last)`). Tiles here are
/// `[partition, free]`, so `axis` must be 1: reductions never cross partitions (across them,
/// use `nc_matmul` with a ones column).
#[track_caller]
pub fn tensor_reduce(
    dst: impl Into<TileRegion>,
    op: BinOp,
    data: impl Into<TileRegion>,
    axis: usize,
    negate: bool,
) {
    let loc = SourceLoc::caller();
    let (dst, data) = (dst.into(), data.into());
    with_builder(|b| {
        if axis != 1 {
            b.fail(
                loc,
                format!(
                    "tensor_reduce: axis {axis} is not a free axis; reductions run over axis 1 of a \
                     [partition, free] tile (across partitions, use nc_matmul with a ones column)"
                ),
            );
        } else if op.reduce_identity().is_none() {
            b.fail(loc, super::not_a_reduction("tensor_reduce", op));
        } else if reduce_groups_ok(b, loc, &dst, &data) {
            b.push_op(
                Op::TensorReduce {
                    dst,
                    op,
                    data,
                    negate,
                },
                loc,
            );
        }
    });
}

/// `tensor_reduce`'s `dst`: `data`'s partitions, and a number of elements per partition that
/// divides `data`'s (each consecutive group of `data.nf / dst.nf` reduces to one); a strided
/// `data` split into groups must end in free dims that make up a group exactly (so the groups
/// are its outer dims, as codegen spells them).
fn reduce_groups_ok(
    b: &mut crate::lang::context::Builder,
    loc: SourceLoc,
    dst: &TileRegion,
    data: &TileRegion,
) -> bool {
    let groups = dst.nf;
    let divides = groups >= 1 && data.nf.is_multiple_of(groups);
    if dst.np != data.np || !divides {
        b.fail(
            loc,
            format!(
                "tensor_reduce: dst must have data's {} partitions and a number of elements per \
                 partition that divides data's {} (each consecutive group reduces to one element), \
                 got shape {:?}",
                data.np,
                data.nf,
                dst.shape()
            ),
        );
        return false;
    }
    if groups > 1 && crate::ir::reduced_free_dims(data, groups).is_none() {
        b.fail(
            loc,
            format!(
                "tensor_reduce: data's access pattern cannot be split into {groups} groups of {} \
                 elements by its last free dims",
                data.nf / groups
            ),
        );
        return false;
    }
    true
}

/// `nisa.tensor_copy(dst, src)`: copies with a cast to `dst`'s dtype (e.g. PSUM fp32 → SBUF bf16).
#[track_caller]
pub fn tensor_copy(dst: impl Into<TileRegion>, src: impl Into<TileRegion>) {
    let loc = SourceLoc::caller();
    let (dst, src) = (dst.into(), src.into());
    with_builder(|b| {
        if same_shape(b, loc, "tensor_copy", &[("dst", &dst), ("src", &src)]) {
            b.push_op(Op::TensorCopy { dst, src }, loc);
        }
    });
}

/// `nisa.memset(dst, value)`.
#[track_caller]
pub fn memset(dst: impl Into<TileRegion>, value: f32) {
    let loc = SourceLoc::caller();
    let dst = dst.into();
    with_builder(|b| b.push_op(Op::Memset { dst, value }, loc));
}

/// `nisa.iota(dst, pattern=[[step, nf]], offset, channel_multiplier)` on the GpSimd engine:
/// fills `dst` with `offset + channel_multiplier·p + step·f`, where `p` and `f` are the
/// partition and free index within `dst` (so `dst[0, 0] = offset`). The values are computed in
/// int32 and written in `dst`'s dtype (i32, or a float type: rounded like every write). This is
/// the one-progression pattern `[[step, nf]]` over `dst`'s free size ([`iota_pattern`] takes
/// several). `dst` must be in SBUF (GpSimd cannot reach PSUM; checked by [`crate::validate`]).
#[track_caller]
pub fn iota(dst: impl Into<TileRegion>, offset: i32, channel_multiplier: i32, step: i32) {
    let loc = SourceLoc::caller();
    let dst = dst.into();
    let pattern = vec![IotaDim { step, num: dst.nf }];
    record_iota(loc, dst, offset, channel_multiplier, pattern);
}

/// `nisa.iota(dst, pattern, offset, channel_multiplier)` with NKI's whole `pattern`: entries
/// `(step, num)`, outermost first, that the free elements of `dst` walk as nested loops
/// (`[(8, 4), (1, 8)]` over 32 free elements gives `0..8, 8..16, ...`; `[(1, 4), (4, 8)]` the
/// transposed order). The sizes' product must be `dst`'s free size (a trace error otherwise).
#[track_caller]
pub fn iota_pattern(
    dst: impl Into<TileRegion>,
    offset: i32,
    channel_multiplier: i32,
    pattern: &[(i32, usize)],
) {
    let loc = SourceLoc::caller();
    let dst = dst.into();
    let pattern = pattern
        .iter()
        .map(|&(step, num)| IotaDim { step, num })
        .collect();
    record_iota(loc, dst, offset, channel_multiplier, pattern);
}

fn record_iota(
    loc: SourceLoc,
    dst: TileRegion,
    offset: i32,
    channel_multiplier: i32,
    pattern: Vec<IotaDim>,
) {
    with_builder(|b| {
        let covered: usize = pattern.iter().map(|d| d.num).product();
        if covered != dst.nf {
            return b.fail(
                loc,
                format!(
                    "iota: pattern covers {covered} elements per partition but dst has {}",
                    dst.nf
                ),
            );
        }
        b.push_op(
            Op::Iota {
                dst,
                offset,
                channel_multiplier,
                pattern,
            },
            loc,
        );
    });
}

/// The comparisons `range_select` takes for `comp_op0` / `comp_op1` (`nki.isa.range_select`:
/// equal, less, less_equal, greater, greater_equal; not `not_equal`).
pub const RANGE_SELECT_COMPARISONS: [BinOp; 5] = [
    BinOp::Equal,
    BinOp::Less,
    BinOp::LessEqual,
    BinOp::Greater,
    BinOp::GreaterEqual,
];

/// `nisa.range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1,
/// reduce_cmd=reset_reduce, reduce_res=None, reduce_op=nl.maximum, range_start=0,
/// on_false_value=...)` on the vector engine (NeuronCore-v3 and newer: Trn2, Trn3). For the free
/// index `f` of row `p` and `i = f + range_start` (in fp32), writes `on_true_tile[p, f]` where
/// `i comp_op0 bound0[p]` and `i comp_op1 bound1[p]` both hold, and `on_false_value` elsewhere.
/// `bound0` and `bound1` are fp32 `(P, 1)` columns; `comp_op0`/`comp_op1` are among
/// [`RANGE_SELECT_COMPARISONS`]. With `reduce_res` (a `(P, 1)` column), each row of the result
/// is also reduced with `reduce_op` (a reduction operator) into it, starting afresh
/// (`reduce_cmd=reset_reduce`); `reduce_op` is ignored without `reduce_res`.
#[track_caller]
#[allow(clippy::too_many_arguments)]
pub fn range_select(
    dst: impl Into<TileRegion>,
    on_true_tile: impl Into<TileRegion>,
    comp_op0: BinOp,
    comp_op1: BinOp,
    bound0: impl Into<TileRegion>,
    bound1: impl Into<TileRegion>,
    reduce_res: Option<TileRegion>,
    reduce_op: BinOp,
    range_start: f32,
    on_false_value: f32,
) {
    let loc = SourceLoc::caller();
    let (dst, on_true, bound0, bound1) = (
        dst.into(),
        on_true_tile.into(),
        bound0.into(),
        bound1.into(),
    );
    let inst = "range_select";
    with_builder(|b| {
        let np = on_true.np;
        let mut ok = same_shape(b, loc, inst, &[("on_true_tile", &on_true), ("dst", &dst)])
            && column_ok(b, loc, inst, "bound0", &bound0, np)
            && column_ok(b, loc, inst, "bound1", &bound1, np);
        for (name, op) in [("comp_op0", comp_op0), ("comp_op1", comp_op1)] {
            if ok && !RANGE_SELECT_COMPARISONS.contains(&op) {
                let allowed: Vec<&str> = RANGE_SELECT_COMPARISONS
                    .iter()
                    .map(|c| c.nki_name())
                    .collect();
                b.fail(
                    loc,
                    format!(
                        "{inst}: {name} is {}, but it must be one of {}",
                        op.nki_name(),
                        allowed.join(", ")
                    ),
                );
                ok = false;
            }
        }
        let reduce = reduce_res.map(|r| (reduce_op, r));
        if ok && reduce_ok(b, loc, inst, reduce.as_ref(), np) {
            b.push_op(
                Op::RangeSelect {
                    dst,
                    on_true,
                    comp0: comp_op0,
                    bound0,
                    comp1: comp_op1,
                    bound1,
                    range_start,
                    on_false: on_false_value,
                    reduce,
                },
                loc,
            );
        }
    });
}
