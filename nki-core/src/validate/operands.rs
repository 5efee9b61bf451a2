//! The rules every other one relies on: HBM tensors a host can hold (`hbm-size`), tile operands
//! that name a declared tile and stay inside it (`tile-region`), and access patterns that stay
//! inside their tensor for every loop index, computed without overflow (`hbm-bounds`).

use super::{describe_tile, violation};
use crate::error::NkiError;
use crate::ir::{HbmAccess, Instruction, Program};
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
                format!(
                    "partitions {}..+{}, elements {}..+{}",
                    r.p0, r.np, r.f0, r.nf
                ),
                name.into(),
                format!("{name} reaches outside tile {}", describe_tile(t)),
                inst.loc,
            ));
        }
    }
    Ok(())
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
