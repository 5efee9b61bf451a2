//! The rules every other one relies on: HBM tensors a host can hold (`hbm-size`), tile operands
//! that name a declared tile and stay inside it (`tile-region`), partition broadcasts only as
//! a DMA's source (`tile-partition-broadcast`), and access patterns that stay
//! inside their tensor for every loop index, computed without overflow (`hbm-bounds`).

use super::{describe_tile, violation};
use crate::error::NkiError;
use crate::ir::{Access, HbmAccess, Instruction, Op, OperandUse, Program};
use crate::loc::SourceLoc;

/// Every HBM tensor's byte size is a number the host can hold (a shape whose product
/// overflows would otherwise wrap into a small tensor, or abort an allocation).
pub(super) fn check_hbm_sizes(program: &Program) -> Result<(), NkiError> {
    for d in &program.hbm {
        let bytes = d
            .shape
            .iter()
            .try_fold(d.dtype.size_bytes(), |n, &dim| n.checked_mul(dim))
            .filter(|&b| b <= isize::MAX as usize);
        if bytes.is_none() {
            return Err(violation(
                "hbm-size",
                format!("{} bytes", isize::MAX),
                format!("{:?} {}", d.shape, d.dtype),
                format!("tensor {}", d.name),
                format!(
                    "tensor {} of shape {:?} is larger than any host buffer can be",
                    d.name, d.shape
                ),
                SourceLoc::caller(),
            ));
        }
    }
    Ok(())
}

/// Every tile operand names a declared tile and stays inside it: the other rules index tiles
/// by these, and the simulator's storage may be longer than a tile.
pub(super) fn check_regions(program: &Program, inst: &Instruction) -> Result<(), NkiError> {
    let name = inst.op.name();
    let regions = inst
        .op
        .tile_reads()
        .into_iter()
        .chain(inst.op.tile_writes());
    for r in regions {
        let Some(t) = program.tiles.get(r.tile.0 as usize) else {
            return Err(violation(
                "tile-region",
                format!("one of {} tiles", program.tiles.len()),
                format!("tile {}", r.tile.0),
                name.into(),
                format!(
                    "{name} uses tile {}, which the program does not declare",
                    r.tile.0
                ),
                inst.loc,
            ));
        };
        if !r.within(t.partitions, t.free) {
            return Err(violation(
                "tile-region",
                format!("[{}, {}]", t.partitions, t.free),
                {
                    let ((p0, p1), (f0, f1)) = (r.partition_span(), r.free_span());
                    format!("partitions {p0}..{p1}, elements {f0}..{f1}")
                },
                name.into(),
                format!("{name} reaches outside tile {}", describe_tile(t)),
                inst.loc,
            ));
        }
    }
    check_partition_broadcasts(inst)
}

/// A region that reads one partition for every row (`partition_step` 0, as `nl.broadcast_to`
/// of a one-partition tile makes) is the source of a DMA: the engines read partitions
/// contiguously (the NKI docs' access-pattern rules), a DMA reads any address.
fn check_partition_broadcasts(inst: &Instruction) -> Result<(), NkiError> {
    let name = inst.op.name();
    let mut bad = None;
    inst.op.visit_operands(&mut |u| {
        if let OperandUse::Tile(r, access) = u
            && r.partition_step() == 0
            && r.np > 1
            && (access == Access::Write || !matches!(inst.op, Op::DmaCopy { .. }))
            && bad.is_none()
        {
            bad = Some((r.clone(), access));
        }
    });
    match bad {
        None => Ok(()),
        Some((r, access)) => Err(violation(
            "tile-partition-broadcast",
            "a dma_copy source",
            format!(
                "{} {} of t{}",
                match access {
                    Access::Read => "read by",
                    Access::Write => "written by",
                },
                name,
                r.tile.0
            ),
            name.into(),
            format!(
                "{name}: a tile region that repeats partition {} over {} rows can only be read \
                 by a DMA (engines read partitions contiguously)",
                r.p0, r.np
            ),
            inst.loc,
        )),
    }
}

/// `a` reaches only elements of its tensor, over every iteration of the loops.
pub(super) fn check_hbm_bounds(
    program: &Program,
    a: &HbmAccess,
    inst: &Instruction,
) -> Result<(), NkiError> {
    let Some(decl) = program.hbm.get(a.tensor.0 as usize) else {
        return Err(violation(
            "hbm-bounds",
            format!("one of {} tensors", program.hbm.len()),
            format!("tensor {}", a.tensor.0),
            inst.op.name().into(),
            format!(
                "access to tensor {}, which the program does not declare",
                a.tensor.0
            ),
            inst.loc,
        ));
    };
    let (lo, hi) = a.reach(&program.trips());
    let numel = decl.numel() as i128;
    if lo < 0 || hi >= numel {
        return Err(violation(
            "hbm-bounds",
            format!("[0, {numel})"),
            format!("[{lo}, {}]", hi),
            inst.op.name().into(),
            format!(
                "access pattern reaches outside {} (shape {:?})",
                decl.name, decl.shape
            ),
            inst.loc,
        ));
    }
    Ok(())
}
