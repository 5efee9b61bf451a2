//! Execution of GpSimd's `sequence_bounds`, `nonzero_with_count` and `topk`. Every input row
//! is copied before a destination row is written, so an output may share a tile with its input.

use crate::ir::Op;
use crate::isa::GPSIMD_CORE_PARTITIONS;
use crate::sim::exec::{Ctx, ExecError};
use crate::sim::store::TileStore;
use std::cmp::Ordering;

/// Executes `sequence_bounds`: each row's run starts (or `N` for id 0) into the first half of
/// the destination row and run ends, exclusive (or −1 for id 0), into the second.
pub(crate) fn sequence_bounds(store: &mut TileStore<'_>, op: &Op) -> Result<(), ExecError> {
    let Op::SequenceBounds { dst, segment_ids } = op else {
        unreachable!("called for sequence_bounds");
    };
    let dt = store.dtype(dst.tile);
    for r in 0..segment_ids.np {
        let ids = store.row(segment_ids, r)?.to_vec();
        let n = ids.len();
        let mut bounds = vec![0.0f32; 2 * n];
        for i in 0..n {
            bounds[i] = if ids[i] == 0.0 {
                n as f32
            } else if i > 0 && ids[i] == ids[i - 1] {
                bounds[i - 1]
            } else {
                i as f32
            };
        }
        for i in (0..n).rev() {
            bounds[n + i] = if ids[i] == 0.0 {
                -1.0
            } else if i + 1 < n && ids[i] == ids[i + 1] {
                bounds[n + i + 1]
            } else {
                (i + 1) as f32
            };
        }
        let out = store.row_mut(dst, r)?;
        out.iter_mut()
            .zip(&bounds)
            .for_each(|(o, &b)| *o = dt.round(b));
    }
    Ok(())
}

/// Executes `nonzero_with_count` on the rows whose `src` partition is a multiple of 16.
pub(crate) fn nonzero_with_count(store: &mut TileStore<'_>, op: &Op) -> Result<(), ExecError> {
    let Op::NonzeroWithCount {
        dst,
        src,
        index_offset,
        padding_val,
    } = op
    else {
        unreachable!("called for nonzero_with_count");
    };
    let dt = store.dtype(dst.tile);
    for r in (0..src.np).filter(|r| (src.p0 + r) % GPSIMD_CORE_PARTITIONS == 0) {
        let row = store.row(src, r)?;
        // In i64: an index plus a large offset does not wrap; the write saturates to int32.
        let found: Vec<i64> = (0..row.len())
            .filter(|&i| row[i] != 0.0)
            .map(|i| i as i64 + i64::from(*index_offset))
            .collect();
        let count = found.len() as i64;
        let out = store.row_mut(dst, r)?;
        let (slots, last) = out.split_at_mut(src.nf);
        for (j, o) in slots.iter_mut().enumerate() {
            let v = found.get(j).copied().unwrap_or(i64::from(*padding_val));
            *o = dt.round(v as f32);
        }
        last[0] = dt.round(count as f32);
    }
    Ok(())
}

/// `topk`'s order of values, ascending: NaN above every number, `-0.0` equal to `0.0`.
fn ascending(a: f32, b: f32) -> Ordering {
    match (a.is_nan(), b.is_nan()) {
        (true, true) => Ordering::Equal,
        (true, false) => Ordering::Greater,
        (false, true) => Ordering::Less,
        (false, false) => a.partial_cmp(&b).unwrap_or(Ordering::Equal),
    }
}

/// Executes `topk`: each group of 16 partitions read as a snake of `n` values, its `K` largest
/// written ascending (equal values lower index first) as a snake into `val_dst` and `idx_dst`.
pub(crate) fn topk(ctx: &Ctx<'_, '_>, store: &mut TileStore<'_>, op: &Op) -> Result<(), ExecError> {
    let Op::Topk {
        val_dst,
        idx_dst,
        src,
        n,
    } = op
    else {
        unreachable!("called for topk");
    };
    let (g, k, n) = (GPSIMD_CORE_PARTITIONS, val_dst.nf, *n);
    if n > g * src.nf || k > n {
        return Err(ctx
            .err(format!(
                "topk: a snake of {n} elements does not fit src's {} columns, or K = {k} > n",
                src.nf
            ))
            .into());
    }
    let (vdt, idt) = (store.dtype(val_dst.tile), store.dtype(idx_dst.tile));
    for group in 0..src.np / g {
        let mut snake = Vec::with_capacity(n);
        for e in 0..n {
            snake.push((store.row(src, group * g + e % g)?[e / g], e));
        }
        // Selected largest first, equal values lower index first; written ascending, equal
        // values lower index first.
        snake.sort_by(|a, b| ascending(b.0, a.0).then(a.1.cmp(&b.1)));
        snake.truncate(k);
        snake.sort_by(|a, b| ascending(a.0, b.0).then(a.1.cmp(&b.1)));
        for (j, &(v, e)) in snake.iter().enumerate() {
            let (p, c) = (group * g + j % g, j / g);
            store.row_mut(val_dst, p)?[c] = vdt.round(v);
            store.row_mut(idx_dst, p)?[c] = idt.round(e as f32);
        }
    }
    Ok(())
}
