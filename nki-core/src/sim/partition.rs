//! Execution of the cross-partition instructions: GpSimd's `tensor_partition_reduce` and the
//! vector engine's `nc_stream_shuffle`. They read
//! other partitions than they write, so they never run band by band.

use crate::ir::{BinOp, Op};
use crate::sim::exec::{Ctx, ExecError};
use crate::sim::rows::fill_rows;
use crate::sim::store::TileStore;

/// Executes `tensor_partition_reduce`: each column of `data` reduced in fp32, partition 0
/// first, then rounded once to `dst`'s dtype.
pub(crate) fn partition_reduce(
    _ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    op: &Op,
) -> Result<(), ExecError> {
    let Op::TensorPartitionReduce { dst, op, data } = op else {
        unreachable!("called for tensor_partition_reduce");
    };
    let (op, dt) = (*op, store.dtype(dst.tile));
    let mut acc = store.row(data, 0)?.to_vec();
    for r in 1..data.np {
        let row = store.row(data, r)?;
        match op {
            BinOp::Add => acc.iter_mut().zip(row).for_each(|(a, &x)| *a += x),
            _ => acc
                .iter_mut()
                .zip(row)
                .for_each(|(a, &x)| *a = op.apply(*a, x)),
        }
    }
    // Read whole before dst is written: dst may be one of data's partitions.
    fill_rows(store, dst, false, |_, out| {
        out.iter_mut()
            .zip(&acc)
            .for_each(|(o, &a)| *o = dt.round(a));
    })?;
    Ok(())
}

/// Executes `nc_stream_shuffle`: every source partition the mask names copied first (the
/// shuffle may be in place), then written to the destination partitions that take one; the
/// others keep their values.
pub(crate) fn stream_shuffle(store: &mut TileStore<'_>, op: &Op) -> Result<(), ExecError> {
    let Op::NcStreamShuffle { dst, src, mask } = op else {
        unreachable!("called for nc_stream_shuffle");
    };
    let dt = store.dtype(dst.tile);
    let mut moves = Vec::new();
    for p in 0..dst.np {
        let m = mask[p % 32];
        if m != crate::isa::SHUFFLE_KEEP {
            let from = p / 32 * 32 + usize::from(m);
            moves.push((p, store.row(src, from)?.to_vec()));
        }
    }
    for (p, row) in moves {
        let out = store.row_mut(dst, p)?;
        out.iter_mut()
            .zip(&row)
            .for_each(|(o, &v)| *o = dt.round(v));
    }
    Ok(())
}
