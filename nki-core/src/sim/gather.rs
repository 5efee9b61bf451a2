//! Execution of GpSimd's gathers within SBUF, `local_gather` and `nc_n_gather`. The docs leave
//! an out-of-range index undefined (`local_gather`) or only require it in range
//! (`nc_n_gather`); the simulator stops with an error naming the index, its position and the
//! range, as it does for an out-of-bounds DMA. `local_gather` reads other partitions' indices
//! than it writes, so it never runs band by band; `nc_n_gather` is partition-local.

use crate::ir::{Op, TileRegion};
use crate::sim::exec::{Ctx, ExecError};
use crate::sim::rounding::round_into;
use crate::sim::store::TileStore;

/// An index tile's value as an element offset: a finite, non-negative integer below `limit`
/// (for a run of `run` elements, `value + run <= limit`), or the error naming it.
fn offset(
    ctx: &Ctx<'_, '_>,
    (value, run, limit): (f32, usize, usize),
    what: impl FnOnce() -> String,
) -> Result<usize, ExecError> {
    let ok = value.is_finite() && value >= 0.0 && value.fract() == 0.0;
    if ok && (value as usize).saturating_add(run) <= limit {
        return Ok(value as usize);
    }
    let reach = if run == 1 {
        format!("must be in 0..{limit}")
    } else {
        format!("plus {run} elements must stay within {limit}")
    };
    Err(ctx.err(format!("{} is {value}; it {reach}", what())).into())
}

/// Executes `local_gather`: per group of 16 partitions, its offsets (partition first, the
/// valid ones) read once; every group's rows gathered before any row is written (so `dst` may
/// share a tile with `src` or `index`).
pub(crate) fn local_gather(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    op: &Op,
) -> Result<(), ExecError> {
    let Op::LocalGather {
        dst,
        src,
        index,
        num_elem_per_idx: n,
        num_valid_indices,
    } = op
    else {
        unreachable!("called for local_gather");
    };
    let n = *n;
    let valid = num_valid_indices.unwrap_or(16 * index.nf);
    let dt = store.dtype(dst.tile);
    let mut gathered = Vec::with_capacity(src.np);
    for group in (0..src.np).step_by(16) {
        let parts = group..(group + 16).min(src.np);
        let mut offsets = Vec::with_capacity(valid);
        'collect: for f in 0..index.nf {
            for p in parts.clone() {
                if offsets.len() == valid {
                    break 'collect;
                }
                let v = store.row(index, p)?[f];
                let at = offset(ctx, (v, n, src.nf), || {
                    format!("index[{p}, {f}] (offset {} of its core)", offsets.len())
                })?;
                offsets.push(at);
            }
        }
        if offsets.len() < valid {
            return Err(ctx
                .err(format!(
                    "num_valid_indices is {valid} but partitions {}..{} of index hold {}",
                    parts.start,
                    parts.end,
                    offsets.len()
                ))
                .into());
        }
        for p in parts {
            let row = store.row(src, p)?;
            gathered.push(
                offsets
                    .iter()
                    .flat_map(|&o| row[o..o + n].iter().copied())
                    .collect::<Vec<f32>>(),
            );
        }
    }
    for (p, row) in gathered.iter().enumerate() {
        write_row(store, dst, p, row, dt)?;
    }
    Ok(())
}

/// Executes `nc_n_gather`: each partition's gathered row built from its own data and indices
/// before it is written.
pub(crate) fn n_gather(
    ctx: &Ctx<'_, '_>,
    store: &mut TileStore<'_>,
    op: &Op,
) -> Result<(), ExecError> {
    let Op::NcNGather { dst, data, indices } = op else {
        unreachable!("called for nc_n_gather");
    };
    let dt = store.dtype(dst.tile);
    for p in 0..dst.np {
        let (row, idx) = (store.row(data, p)?, store.row(indices, p)?);
        let got = idx
            .iter()
            .enumerate()
            .map(|(j, &v)| {
                let at = offset(ctx, (v, 1, data.nf), || format!("indices[{p}, {j}]"))?;
                Ok(row[at])
            })
            .collect::<Result<Vec<f32>, ExecError>>()?;
        write_row(store, dst, p, &got, dt)?;
    }
    Ok(())
}

fn write_row(
    store: &mut TileStore<'_>,
    dst: &TileRegion,
    p: usize,
    row: &[f32],
    dt: crate::dtype::DType,
) -> Result<(), ExecError> {
    round_into(store.row_mut(dst, p)?, dt, |i| row[i]);
    Ok(())
}
