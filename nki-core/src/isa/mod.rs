//! `nki_core::isa`: engine instructions, named and ordered as `nki.isa` (destination first,
//! then the arguments in NKI's order; NKI's keyword arguments are trailing parameters or, for
//! `tensor_scalar`'s second operation, `.then(op1, operand1)`). Each call records one
//! instruction with the caller's source line; operand shapes are checked here, hardware limits
//! later by [`crate::validate`].

use crate::ir::{
    ActFn, BinOp, DmaOperand, ElementwiseEngine, HbmKind, Op, ScalarOperand, TileRegion,
};
use crate::ir::{Instruction, Stmt};
use crate::lang::context::{Builder, StmtRef, with_builder};
use crate::lang::hbm::{Hbm, HbmView};
use crate::lang::tile::Tile;
use crate::loc::SourceLoc;

mod statistics;
pub use statistics::{BN_STATS_FMAX, bn_aggr, bn_stats};

/// Either side of a `dma_copy`: an HBM view or a tile region.
#[derive(Clone, Debug)]
pub enum DmaArg {
    /// Device memory.
    Hbm(HbmView),
    /// On-chip tile.
    Tile(TileRegion),
}

impl From<HbmView> for DmaArg {
    fn from(v: HbmView) -> DmaArg {
        DmaArg::Hbm(v)
    }
}

impl From<&Hbm> for DmaArg {
    fn from(h: &Hbm) -> DmaArg {
        DmaArg::Hbm(h.view())
    }
}

impl From<TileRegion> for DmaArg {
    fn from(r: TileRegion) -> DmaArg {
        DmaArg::Tile(r)
    }
}

impl From<&TileRegion> for DmaArg {
    fn from(r: &TileRegion) -> DmaArg {
        DmaArg::Tile(r.clone())
    }
}

impl From<Tile> for DmaArg {
    fn from(t: Tile) -> DmaArg {
        DmaArg::Tile(t.region())
    }
}

impl From<&Tile> for DmaArg {
    fn from(t: &Tile) -> DmaArg {
        DmaArg::Tile(t.region())
    }
}

impl From<f32> for ScalarOperand {
    fn from(value: f32) -> ScalarOperand {
        ScalarOperand::Imm { value }
    }
}

impl From<TileRegion> for ScalarOperand {
    fn from(region: TileRegion) -> ScalarOperand {
        ScalarOperand::Column { region }
    }
}

impl From<&TileRegion> for ScalarOperand {
    fn from(region: &TileRegion) -> ScalarOperand {
        ScalarOperand::Column {
            region: region.clone(),
        }
    }
}

impl From<Tile> for ScalarOperand {
    fn from(t: Tile) -> ScalarOperand {
        ScalarOperand::Column { region: t.region() }
    }
}

impl From<&Tile> for ScalarOperand {
    fn from(t: &Tile) -> ScalarOperand {
        ScalarOperand::Column { region: t.region() }
    }
}

fn same_shape(b: &mut Builder, loc: SourceLoc, inst: &str, what: &[(&str, &TileRegion)]) -> bool {
    let (n0, r0) = what[0];
    for (n, r) in &what[1..] {
        if r.shape() != r0.shape() {
            b.fail(
                loc,
                format!(
                    "{inst}: {n} has shape {:?} but {n0} has shape {:?}",
                    r.shape(),
                    r0.shape()
                ),
            );
            return false;
        }
    }
    true
}

fn column_ok(
    b: &mut Builder,
    loc: SourceLoc,
    inst: &str,
    name: &str,
    col: &TileRegion,
    np: usize,
) -> bool {
    if col.shape() != [np, 1] {
        b.fail(
            loc,
            format!(
                "{inst}: {name} must be a ({np}, 1) column, got shape {:?}",
                col.shape()
            ),
        );
        return false;
    }
    true
}

fn scalar_ok(
    b: &mut Builder,
    loc: SourceLoc,
    inst: &str,
    name: &str,
    s: &ScalarOperand,
    np: usize,
) -> bool {
    match s {
        ScalarOperand::Imm { .. } => true,
        ScalarOperand::Column { region } => column_ok(b, loc, inst, name, region, np),
    }
}

/// Checks an instruction's optional free-dim reduction `(reduce_op, reduce_res)`: `reduce_res`
/// is a `(np, 1)` column and `reduce_op` a reduction operator (add, multiply, maximum, minimum:
/// those with an identity to start from).
fn reduce_ok(
    b: &mut Builder,
    loc: SourceLoc,
    inst: &str,
    reduce: Option<&(BinOp, TileRegion)>,
    np: usize,
) -> bool {
    let Some((op, res)) = reduce else {
        return true;
    };
    if !column_ok(b, loc, inst, "reduce_res", res, np) {
        return false;
    }
    if op.reduce_identity().is_none() {
        b.fail(loc, format!("{inst}: {op:?} is not a reduction operator"));
        return false;
    }
    true
}

/// `nisa.dma_copy(dst, src)`: moves data between HBM and SBUF. DMA does not cast: both sides
/// have the same dtype and the same `[rows, cols]` shape.
#[track_caller]
pub fn dma_copy(dst: impl Into<DmaArg>, src: impl Into<DmaArg>) {
    let loc = SourceLoc::caller();
    let (dst, src) = (dst.into(), src.into());
    with_builder(|b| {
        let mut side = |a: DmaArg,
                        role: &str|
         -> Option<(DmaOperand, [usize; 2], crate::dtype::DType)> {
            match a {
                DmaArg::Hbm(v) => match v.to_access() {
                    Ok(access) => {
                        let decl = &b.hbm[access.tensor.0 as usize];
                        let dtype = decl.dtype;
                        if role == "dst" && decl.kind == HbmKind::Input {
                            let name = decl.name.clone();
                            b.fail(loc, format!("dma_copy: kernel input `{name}` is read-only; write to a shared_hbm output"));
                            return None;
                        }
                        let shape = [access.np, access.nf];
                        Some((DmaOperand::Hbm { access }, shape, dtype))
                    }
                    Err(m) => {
                        b.fail(loc, format!("dma_copy {role}: {m}"));
                        None
                    }
                },
                DmaArg::Tile(region) => {
                    if let Some(m) = b.region_problem(&region) {
                        b.fail(loc, format!("dma_copy {role}: {m}"));
                        return None;
                    }
                    let dtype = b.tiles[region.tile.0 as usize].dtype;
                    let shape = region.shape();
                    Some((DmaOperand::Tile { region }, shape, dtype))
                }
            }
        };
        let (Some((d, ds, dt)), Some((s, ss, st))) = (side(dst, "dst"), side(src, "src")) else {
            return;
        };
        if ds != ss {
            b.fail(
                loc,
                format!("dma_copy: dst has shape {ds:?} but src has shape {ss:?}"),
            );
        } else if dt != st {
            b.fail(loc, format!("dma_copy: dst is {dt} but src is {st}; DMA does not cast (load, then tensor_copy)"));
        } else {
            b.push_op(Op::DmaCopy { dst: d, src: s }, loc);
        }
    });
}

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
    /// Adds `<op1> operand1` after `op0` (NKI's `op1=`, `operand1=`). Chain it directly on the
    /// `tensor_scalar(...)` call.
    #[track_caller]
    pub fn then(self, op1: BinOp, operand1: impl Into<ScalarOperand>) {
        let loc = SourceLoc::caller();
        let operand1 = operand1.into();
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
            if let Some(Stmt::Inst(Instruction {
                op: Op::TensorScalar { op1: slot, .. },
                ..
            })) = b.stmt_mut(at)
            {
                *slot = Some((op1, operand1));
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
                    op1: None,
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
        None,
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
        Some((reduce_op, reduce_res.into())),
    );
}

fn record_scalar_tensor_tensor(
    loc: SourceLoc,
    dst: TileRegion,
    data: TileRegion,
    (op0, operand0): (BinOp, ScalarOperand),
    (op1, operand1): (BinOp, TileRegion),
    reduce: Option<(BinOp, TileRegion)>,
) {
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
                    op1,
                    operand1,
                    reduce,
                },
                loc,
            );
        }
    });
}

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

/// `nisa.tensor_reduce(dst, op, data, axis, negate=False)`: reduces each partition's free
/// elements into a `(P, 1)` destination. Tiles here are `[partition, free]`, so `axis` must be
/// 1: reductions never cross partitions (across them, use `nc_matmul` with a ones column).
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
            b.fail(
                loc,
                format!("tensor_reduce: {op:?} is not a reduction operator"),
            );
        } else if column_ok(b, loc, "tensor_reduce", "dst", &dst, data.np) {
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
/// int32 and written in `dst`'s dtype (i32, or a float type: rounded like every write). NKI's
/// `pattern` is the one-dimensional `[[step, nf]]` over `dst`'s free size, so only its `step`
/// is a parameter here (last, after `offset` and `channel_multiplier`). `dst` must be in SBUF
/// (GpSimd cannot reach PSUM; checked by [`crate::validate`]).
#[track_caller]
pub fn iota(dst: impl Into<TileRegion>, offset: i32, channel_multiplier: i32, step: i32) {
    let loc = SourceLoc::caller();
    let dst = dst.into();
    with_builder(|b| {
        b.push_op(
            Op::Iota {
                dst,
                offset,
                channel_multiplier,
                step,
            },
            loc,
        )
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
/// reduce_cmd=reset_reduce, reduce_res=None, reduce_op=nl.maximum, range_start=0.0,
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

/// `nisa.nc_matmul(dst, stationary, moving, accumulate=...)`: `dst (+)= stationaryᵀ · moving`
/// on the tensor engine, contracting over the partition dim: stationary `[K, M]`, moving
/// `[K, N]`, dst `[M, N]` in PSUM.
#[track_caller]
pub fn nc_matmul(
    dst: impl Into<TileRegion>,
    stationary: impl Into<TileRegion>,
    moving: impl Into<TileRegion>,
    accumulate: bool,
) {
    let loc = SourceLoc::caller();
    let (dst, stationary, moving) = (dst.into(), stationary.into(), moving.into());
    with_builder(|b| {
        let ([k1, m], [k2, n]) = (stationary.shape(), moving.shape());
        if k1 != k2 {
            b.fail(
                loc,
                format!("nc_matmul: stationary has {k1} partitions (K) but moving has {k2}"),
            );
        } else if dst.shape() != [m, n] {
            b.fail(
                loc,
                format!(
                    "nc_matmul: dst has shape {:?} but stationaryᵀ·moving is [{m}, {n}]",
                    dst.shape()
                ),
            );
        } else {
            b.push_op(
                Op::NcMatmul {
                    dst,
                    stationary,
                    moving,
                    accumulate,
                },
                loc,
            );
        }
    });
}

/// `nisa.nc_transpose(dst, data)` on the tensor engine: `dst = dataᵀ`, an SBUF `[P, F]` region
/// (`P, F ≤ 128`) into a PSUM `[F, P]` region (fp32, or bf16 on Trn3), exact for every dtype.
/// The usual way to turn a row-major tile into a stationary operand without a transposed DMA.
#[track_caller]
pub fn nc_transpose(dst: impl Into<TileRegion>, data: impl Into<TileRegion>) {
    let loc = SourceLoc::caller();
    let (dst, data) = (dst.into(), data.into());
    with_builder(|b| {
        let [p, f] = data.shape();
        if dst.shape() != [f, p] {
            b.fail(
                loc,
                format!(
                    "nc_transpose: dst has shape {:?} but the transpose of data {:?} is [{f}, {p}]",
                    dst.shape(),
                    data.shape()
                ),
            );
        } else {
            b.push_op(Op::NcTranspose { dst, data }, loc);
        }
    });
}
