//! Instructions whose tile operands are strided regions (step slices, `tile.ap(...)`,
//! broadcast views: [`crate::ir::TilePattern`]). Each distinct strided region is gathered into a
//! scratch tile of the same dtype, laid out as the rectangle the instruction sees (its rows at
//! the same partitions, its walk as one contiguous run); the instruction runs on those
//! rectangles, so every engine's simulation sees plain regions only; then the scratch of each
//! region it writes is scattered back along the walk. Every operand is read before anything is
//! written, as for a rectangle; a region written through a walk that visits an element twice
//! (a step of 0) leaves the last value written there.

use crate::ir::{Access, Instruction, Op, OperandUse, TileRegion};
use crate::sim::exec::{Ctx, ExecError};
use crate::sim::rows::Scratch;
use crate::sim::store::{StoreError, TileStore};

/// Whether any tile operand of `op` is strided.
pub(crate) fn any_strided(op: &Op) -> bool {
    let mut found = false;
    op.visit_operands(&mut |u| {
        if let OperandUse::Tile(r, _) = u {
            found |= !r.is_rect();
        }
    });
    found
}

/// One strided operand and its scratch tile.
struct Staged {
    region: TileRegion,
    scratch: TileRegion,
    written: bool,
}

/// Runs the instruction of `ctx` (which has strided operands) through scratch rectangles, with
/// `run` executing the rewritten instruction.
pub(crate) fn execute<'a: 'p, 'p>(
    ctx: &Ctx<'a, '_>,
    store: &mut TileStore<'p>,
    scratch: &mut Scratch,
    run: impl FnOnce(&Ctx<'a, '_>, &mut TileStore<'p>, &mut Scratch) -> Result<(), ExecError>,
) -> Result<(), ExecError> {
    let mut operands: Vec<(TileRegion, bool)> = Vec::new();
    ctx.inst.op.visit_operands(&mut |u| {
        if let OperandUse::Tile(r, access) = u
            && !r.is_rect()
        {
            let written = access == Access::Write;
            match operands.iter_mut().find(|(o, _)| o == r) {
                Some((_, w)) => *w |= written,
                None => operands.push((r.clone(), written)),
            }
        }
    });
    let first_scratch = store.tile_count();
    let result = (|| {
        let mut staged = Vec::with_capacity(operands.len());
        for (region, written) in operands {
            staged.push(gather(store, region, written)?);
        }
        let op = ctx.inst.op.map_operands(
            &mut |r| match staged.iter().find(|s| &s.region == r) {
                Some(s) => s.scratch.clone(),
                None => r.clone(),
            },
            &mut |e| e.clone(),
        );
        let inst = Instruction {
            op,
            loc: ctx.inst.loc,
        };
        run(
            &Ctx {
                inst: &inst,
                ..*ctx
            },
            store,
            scratch,
        )?;
        for s in staged.iter().filter(|s| s.written) {
            scatter(store, s)?;
        }
        Ok(())
    })();
    store.drop_scratch(first_scratch);
    result
}

/// A scratch tile holding `region`'s elements as the rectangle `[p0..p0+np, 0..nf]`.
fn gather(
    store: &mut TileStore<'_>,
    region: TileRegion,
    written: bool,
) -> Result<Staged, StoreError> {
    let offsets = region.free_offsets();
    let dtype = store.dtype(region.tile);
    let id = store.push_scratch(region.p0 + region.np, region.nf, dtype);
    let scratch = TileRegion::rect(id, region.p0, region.np, 0, region.nf);
    let mut row = Vec::with_capacity(region.nf);
    for r in 0..region.np {
        let (data, stride) = store.data(region.tile)?;
        let base = region.partition_of(r) * stride;
        row.clear();
        row.extend(offsets.iter().map(|&o| data[base + o]));
        store.row_mut(&scratch, r)?.copy_from_slice(&row);
    }
    Ok(Staged {
        region,
        scratch,
        written,
    })
}

/// Writes a scratch tile back along its region's walk.
fn scatter(store: &mut TileStore<'_>, s: &Staged) -> Result<(), StoreError> {
    let offsets = s.region.free_offsets();
    let free = store.stride(s.region.tile);
    let mut row = Vec::with_capacity(s.region.nf);
    for r in 0..s.region.np {
        row.clear();
        row.extend_from_slice(store.row(&s.scratch, r)?);
        let whole = TileRegion::rect(s.region.tile, s.region.partition_of(r), 1, 0, free);
        let out = store.row_mut(&whole, 0)?;
        for (&o, &v) in offsets.iter().zip(&row) {
            out[o] = v;
        }
    }
    Ok(())
}
