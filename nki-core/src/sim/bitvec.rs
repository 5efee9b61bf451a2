//! Execution of the instructions whose operators are bitvec (`nl.bitwise_and`, `nl.invert`,
//! `nl.left_shift`, ...): `tensor_tensor`, `tensor_scalar` and `tensor_reduce` on 32-bit
//! patterns instead of fp32 values, each result keeping the destination dtype's low bits
//! ([`DType::from_bits32`]) instead of being rounded and saturated.

use crate::dtype::DType;
use crate::ir::{BinOp, ScalarOperand, TileRegion, to_bits32};
use crate::sim::exec::{Ctx, ExecError};
use crate::sim::rounding::column_values;
use crate::sim::rows::{Scratch, rows1, rows2};
use crate::sim::store::TileStore;

/// `op` on two patterns (bitvec operators only: the instructions check that both operators of
/// one instruction are of the same family).
#[inline(always)]
fn bits(op: BinOp, a: u32, b: u32) -> u32 {
    op.apply_bits(a, b).unwrap_or(0)
}

/// `dst = a <op> b` on patterns.
pub(crate) fn tensor_tensor(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    s: &mut Scratch,
    (dst, a, b): (&TileRegion, &TileRegion, &TileRegion),
    op: BinOp,
) -> Result<(), ExecError> {
    let dt = store.dtype(dst.tile);
    rows2(
        store,
        dst,
        a,
        b,
        s,
        ctx.split,
        #[inline(always)]
        |_, out, x, y| {
            for (i, o) in out.iter_mut().enumerate() {
                *o = dt.from_bits32(bits(op, to_bits32(x[i]), to_bits32(y[i])));
            }
        },
    )?;
    Ok(())
}

/// `dst = (data <op0> operand0) <op1> operand1` on patterns.
pub(crate) fn tensor_scalar(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    s: &mut Scratch,
    (dst, data): (&TileRegion, &TileRegion),
    (op0, operand0): (BinOp, &ScalarOperand),
    op1: Option<(BinOp, &ScalarOperand)>,
    (reverse0, reverse1): (bool, bool),
) -> Result<(), ExecError> {
    let oriented = |op: BinOp, reverse: bool, x: u32, v: u32| {
        if reverse {
            bits(op, v, x)
        } else {
            bits(op, x, v)
        }
    };
    let dt = store.dtype(dst.tile);
    let v0: Vec<u32> = column_values(store, operand0, dst.np)?
        .into_iter()
        .map(to_bits32)
        .collect();
    let second = match op1 {
        Some((op, o)) => Some((op, column_values(store, o, dst.np)?)),
        None => None,
    };
    rows1(
        store,
        dst,
        data,
        s,
        ctx.split,
        #[inline(always)]
        |r, out, x| {
            for (i, o) in out.iter_mut().enumerate() {
                let mut v = oriented(op0, reverse0, to_bits32(x[i]), v0[r]);
                if let Some((op1, v1)) = &second {
                    v = oriented(*op1, reverse1, v, to_bits32(v1[r]));
                }
                *o = dt.from_bits32(v);
            }
        },
    )?;
    Ok(())
}

/// Each row of `data` reduced with `op` from its identity (all bits set for `bitwise_and`,
/// none for `bitwise_or` / `bitwise_xor`), into the `(P, 1)` `dst` (or each consecutive group
/// of a row into a column of a `(P, K)` `dst`).
pub(crate) fn tensor_reduce(
    store: &mut TileStore<'_>,
    dst: &TileRegion,
    op: BinOp,
    data: &TileRegion,
) -> Result<(), ExecError> {
    let dt: DType = store.dtype(dst.tile);
    let identity = to_bits32(op.reduce_identity().unwrap_or(0.0));
    let group = data.nf / dst.nf.max(1);
    for r in 0..data.np {
        let reduced: Vec<u32> = (store.row(data, r)?.chunks(group))
            .map(|g| {
                g.iter()
                    .fold(identity, |acc, &v| bits(op, acc, to_bits32(v)))
            })
            .collect();
        for (o, acc) in store.row_mut(dst, r)?.iter_mut().zip(reduced) {
            *o = dt.from_bits32(acc);
        }
    }
    Ok(())
}
