//! Execution of the vector engine's `exponential` and `tensor_scalar_reduce` (fp32 arithmetic,
//! row reductions of the fp32 results before they are rounded to the destination), of
//! `tensor_copy_predicated` and `select_reduce`, and of `tensor_tensor_scan` and
//! `tensor_scalar_cumulative` (their state carried in fp32).

use crate::dtype::DType;
use crate::ir::{BinOp, Op, ScalarOperand, TileRegion};
use crate::sim::exec::{Ctx, ExecError};
use crate::sim::rounding::{column_values, round_into, round_into_in_place, write_column};
use crate::sim::row_math::{reduce_row, with_op};
use crate::sim::rows::{Scratch, rows1, rows2};
use crate::sim::store::TileStore;

/// Executes `exponential`.
pub(crate) fn exponential(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    s: &mut Scratch,
    (dst, src, max_value): (&TileRegion, &TileRegion, &ScalarOperand),
    reduce: Option<(&TileRegion, &ScalarOperand)>,
) -> Result<(), ExecError> {
    let dt = store.dtype(dst.tile);
    let maxes = column_values(store, max_value, dst.np)?;
    let inits = match reduce {
        Some((_, init)) => column_values(store, init, dst.np)?,
        None => Vec::new(),
    };
    let sums = rows1(
        store,
        dst,
        src,
        s,
        ctx.split,
        #[inline(always)]
        |r, out, x| {
            // x · 1 + (−max) is x − max exactly: the scalar engine's vectorised exponential.
            crate::engine_math::exp_row_inline(x, 1.0, -maxes[r], out);
            let sum = reduce
                .is_some()
                .then(|| inits[r] + reduce_row(BinOp::Add, out));
            round_into_in_place(out, dt);
            sum
        },
    )?;
    if let Some((res, _)) = reduce {
        write_column(store, res, sums.into_iter().flatten().collect())?;
    }
    Ok(())
}

/// Executes `tensor_scalar_reduce`.
pub(crate) fn tensor_scalar_reduce(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    s: &mut Scratch,
    op: &Op,
) -> Result<(), ExecError> {
    let Op::TensorScalarReduce {
        dst,
        data,
        op0,
        operand0,
        reverse0,
        reduce_op,
        reduce_res,
        reduce_init,
        negate,
    } = op
    else {
        unreachable!("called for tensor_scalar_reduce");
    };
    let dt = store.dtype(dst.tile);
    let v0 = column_values(store, operand0, dst.np)?;
    let inits = match reduce_init {
        Some(init) => Some(column_values(store, init, dst.np)?),
        None => None,
    };
    let totals = rows1(
        store,
        dst,
        data,
        s,
        ctx.split,
        #[inline(always)]
        |r, out, x| {
            let v0 = v0[r];
            if *reverse0 {
                let op0 = *op0;
                round_into(out, DType::F32, |i| {
                    super::exec::oriented(op0, true, x[i], v0)
                });
            } else {
                with_op!(*op0, |f0| round_into(out, DType::F32, |i| f0(x[i], v0)));
            }
            // The fp32 results reduced before they are rounded to dst, as for the other fused
            // reductions; reduce_init is folded in last.
            let row = reduce_row(*reduce_op, out);
            let total = inits.as_ref().map_or(row, |i| reduce_op.apply(i[r], row));
            round_into_in_place(out, dt);
            if *negate { -total } else { total }
        },
    )?;
    write_column(store, reduce_res, totals)?;
    Ok(())
}

/// Executes `tensor_copy_predicated`: the destination row as stored, overwritten where the
/// predicate holds (`!= 0`, NaN included; `== 0` with `reverse`).
pub(crate) fn tensor_copy_predicated(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    s: &mut Scratch,
    (dst, src, imm): (&TileRegion, Option<&TileRegion>, f32),
    predicate: &TileRegion,
    reverse: bool,
) -> Result<(), ExecError> {
    let dt = store.dtype(dst.tile);
    let holds = move |p: f32| (p != 0.0) != reverse;
    match src {
        Some(src) => {
            rows2(
                store,
                dst,
                src,
                predicate,
                s,
                ctx.split,
                #[inline(always)]
                |_, out, x, p| {
                    for (i, o) in out.iter_mut().enumerate() {
                        if holds(p[i]) {
                            *o = dt.round(x[i]);
                        }
                    }
                },
            )?;
        }
        None => {
            let v = dt.round(imm);
            rows1(
                store,
                dst,
                predicate,
                s,
                ctx.split,
                #[inline(always)]
                |_, out, p| {
                    for (o, p) in out.iter_mut().zip(p) {
                        if holds(*p) {
                            *o = v;
                        }
                    }
                },
            )?;
        }
    }
    Ok(())
}

/// Executes `tensor_tensor_scan`: along each row, `state = op1(op0(data0[f], state), data1[f])`
/// (operands swapped by `reverse0` / `reverse1`) from the row's `initial`, the state kept in
/// fp32 and each element rounded to `dst`'s dtype as it is written.
pub(crate) fn tensor_tensor_scan(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    s: &mut Scratch,
    op: &Op,
) -> Result<(), ExecError> {
    let Op::TensorTensorScan {
        dst,
        data0,
        data1,
        initial,
        op0,
        op1,
        reverse0,
        reverse1,
    } = op
    else {
        unreachable!("called for tensor_tensor_scan");
    };
    let dt = store.dtype(dst.tile);
    let init = column_values(store, initial, dst.np)?;
    let (reverse0, reverse1) = (*reverse0, *reverse1);
    rows2(
        store,
        dst,
        data0,
        data1,
        s,
        ctx.split,
        #[inline(always)]
        |r, out, x, y| {
            with_op!(*op0, |f0| with_op!(*op1, |f1| {
                let mut state = init[r];
                for ((o, &a), &b) in out.iter_mut().zip(x).zip(y) {
                    let t = if reverse0 { f0(state, a) } else { f0(a, state) };
                    state = if reverse1 { f1(b, t) } else { f1(t, b) };
                    *o = dt.round(state);
                }
            }))
        },
    )?;
    Ok(())
}

/// Executes `select_reduce`: `on_true` where the predicate holds (`!= 0`, NaN included; `== 0`
/// with `reverse_pred`), the row's `on_false` elsewhere, and with `reduce_res` the row maximum of
/// those fp32 values (from −inf) before they are rounded to `dst`.
pub(crate) fn select_reduce(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    s: &mut Scratch,
    op: &Op,
) -> Result<(), ExecError> {
    let Op::SelectReduce {
        dst,
        predicate,
        on_true,
        on_false,
        reduce_res,
        reverse_pred,
    } = op
    else {
        unreachable!("called for select_reduce");
    };
    let dt = store.dtype(dst.tile);
    let falses = column_values(store, on_false, dst.np)?;
    let (reverse, reduce) = (*reverse_pred, reduce_res.is_some());
    let maxima = rows2(
        store,
        dst,
        predicate,
        on_true,
        s,
        ctx.split,
        #[inline(always)]
        |r, out, p, x| {
            let v = falses[r];
            round_into(out, DType::F32, |i| {
                if (p[i] != 0.0) != reverse { x[i] } else { v }
            });
            let max = reduce.then(|| reduce_row(BinOp::Maximum, out));
            round_into_in_place(out, dt);
            max
        },
    )?;
    if let Some(res) = reduce_res {
        write_column(store, res, maxima.into_iter().flatten().collect())?;
    }
    Ok(())
}

/// Executes `tensor_scalar_cumulative`: along each row, from the first element to the last,
/// `acc = op1(op0(src[f], imm0), acc)` from `imm1` or `op1`'s identity (0 for subtract), `acc`
/// kept in fp32 and each element rounded to `dst`'s dtype as it is written.
pub(crate) fn tensor_scalar_cumulative(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    s: &mut Scratch,
    op: &Op,
) -> Result<(), ExecError> {
    let Op::TensorScalarCumulative {
        dst,
        src,
        op0,
        op1,
        imm0,
        imm1,
    } = op
    else {
        unreachable!("called for tensor_scalar_cumulative");
    };
    let dt = store.dtype(dst.tile);
    let v0 = column_values(store, imm0, dst.np)?;
    let start = match imm1 {
        Some(init) => column_values(store, init, dst.np)?,
        None => {
            let identity = match op1 {
                BinOp::Subtract => Some(0.0),
                op => op.reduce_identity(),
            };
            let identity = identity.ok_or_else(|| {
                ctx.err(format!(
                    "tensor_scalar_cumulative: {op1:?} is not a running reduction"
                ))
            })?;
            vec![identity; dst.np]
        }
    };
    rows1(
        store,
        dst,
        src,
        s,
        ctx.split,
        #[inline(always)]
        |r, out, x| {
            with_op!(*op0, |f0| with_op!(*op1, |f1| {
                let (v0, mut acc) = (v0[r], start[r]);
                for (o, &a) in out.iter_mut().zip(x) {
                    acc = f1(f0(a, v0), acc);
                    *o = dt.round(acc);
                }
            }))
        },
    )?;
    Ok(())
}
