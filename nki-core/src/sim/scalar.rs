//! Execution of the scalar engine's `activate2`: its two tensor-scalar stages, the activation
//! function with its parameter, and the optional row reduction, in fp32, each result rounded
//! once to the destination (the row reduction reads the fp32 results, as `activation`'s does).

use crate::ir::{BinOp, Op, ScalarOperand};
use crate::sim::exec::{Ctx, ExecError};
use crate::sim::rounding::{column_values, round_into_in_place, write_column};
use crate::sim::row_math::reduce_row;
use crate::sim::rows::{Scratch, rows1};
use crate::sim::store::{StoreError, TileStore};

/// The per-partition operands of a stage (empty for `nl.bypass`).
fn stage_values(
    store: &TileStore<'_>,
    stage: &Option<(BinOp, ScalarOperand)>,
    np: usize,
) -> Result<Vec<f32>, StoreError> {
    match stage {
        Some((_, operand)) => column_values(store, operand, np),
        None => Ok(Vec::new()),
    }
}

/// `x <op> v`, or `v <op> x` when `reverse`; `x` itself for `nl.bypass`.
#[inline(always)]
fn stage(x: f32, op: Option<BinOp>, v: &[f32], r: usize, reverse: bool) -> f32 {
    match op {
        None => x,
        Some(op) if reverse => op.apply(v[r], x),
        Some(op) => op.apply(x, v[r]),
    }
}

/// A row reduced with one of `activate2`'s reduction operators: `nl.add`, `nl.maximum` and
/// `nl.minimum` as every fused reduction folds them; `nl.abs_max` / `nl.abs_min` fold the
/// magnitudes from 0 / +inf (their identities).
fn reduce(op: BinOp, row: &[f32]) -> f32 {
    match op {
        BinOp::AbsMax => row.iter().fold(0.0, |a, v| op.apply(a, *v)),
        BinOp::AbsMin => row.iter().fold(f32::INFINITY, |a, v| op.apply(a, *v)),
        op => reduce_row(op, row),
    }
}

/// Executes `activate2`.
pub(crate) fn activate2(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    s: &mut Scratch,
    op: &Op,
) -> Result<(), ExecError> {
    let Op::Activate2 {
        dst,
        func,
        data,
        stage0,
        reverse0,
        stage1,
        reverse1,
        relu_param,
        reduce: reduction,
    } = op
    else {
        unreachable!("called for activate2");
    };
    let dt = store.dtype(dst.tile);
    let (v0, v1) = (
        stage_values(store, stage0, dst.np)?,
        stage_values(store, stage1, dst.np)?,
    );
    let params = column_values(store, relu_param, dst.np)?;
    let (op0, op1) = (stage0.as_ref().map(|s| s.0), stage1.as_ref().map(|s| s.0));
    let (func, reverse0, reverse1) = (*func, *reverse0, *reverse1);
    let totals = rows1(
        store,
        dst,
        data,
        s,
        ctx.split,
        #[inline(always)]
        |r, out, x| {
            let param = params[r];
            for (o, v) in out.iter_mut().zip(x) {
                let t = stage(stage(*v, op0, &v0, r, reverse0), op1, &v1, r, reverse1);
                *o = func.apply_with(t, param);
            }
            let total = reduction.as_ref().map(|(op, _)| reduce(*op, out));
            round_into_in_place(out, dt);
            total
        },
    )?;
    if let Some((_, res)) = reduction {
        write_column(store, res, totals.into_iter().flatten().collect())?;
    }
    Ok(())
}
