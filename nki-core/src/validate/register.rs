//! The rules of the register instructions and `dma_compute` their NKI 0.7 docstrings state
//! (`nki.isa.register_load`, `register_store`, `dma_compute`): the memory they reach is HBM or
//! SBUF (`dma-psum`), every HBM element inside its tensor (`hbm-bounds`), and `dma_compute`
//! reduces 16 sources at most (`dma-compute-sources`) with `nl.add` (`dma-compute-op`) and unit
//! scales (`dma-compute-scales`), as NKI supports today.

use super::operands::check_hbm_bounds;
use super::violation;
use crate::error::NkiError;
use crate::ir::{BinOp, Buffer, DmaOperand, Instruction, Op, Program};
use crate::isa::DMA_COMPUTE_MAX_SOURCES;

/// Checks one instruction against the rules of this module.
pub(super) fn check(program: &Program, inst: &Instruction) -> Result<(), NkiError> {
    let name = inst.op.name();
    let sides: Vec<(String, &DmaOperand)> = match &inst.op {
        Op::RegisterLoad { src, .. } => vec![("src".into(), src)],
        Op::RegisterStore { dst, .. } => vec![("dst".into(), dst)],
        Op::DmaCompute {
            dst,
            srcs,
            reduce_op,
            scales,
            ..
        } => {
            if srcs.len() > DMA_COMPUTE_MAX_SOURCES {
                return Err(violation(
                    "dma-compute-sources",
                    format!("{DMA_COMPUTE_MAX_SOURCES} sources"),
                    format!("{} sources", srcs.len()),
                    name.into(),
                    format!(
                        "dma_compute reduces at most {DMA_COMPUTE_MAX_SOURCES} sources, got {}",
                        srcs.len()
                    ),
                    inst.loc,
                ));
            }
            if *reduce_op != BinOp::Add {
                return Err(violation(
                    "dma-compute-op",
                    "nl.add",
                    reduce_op.nki_name(),
                    name.into(),
                    format!(
                        "dma_compute supports reduce_op=nl.add only, got {}",
                        reduce_op.nki_name()
                    ),
                    inst.loc,
                ));
            }
            if let Some(s) = scales.iter().find(|s| **s != 1.0) {
                return Err(violation(
                    "dma-compute-scales",
                    "1.0",
                    s,
                    name.into(),
                    format!("dma_compute supports scales of 1.0 only (or scales=None), got {s}"),
                    inst.loc,
                ));
            }
            let mut v = vec![("dst".to_string(), dst)];
            v.extend(
                srcs.iter()
                    .enumerate()
                    .map(|(i, s)| (format!("srcs[{i}]"), s)),
            );
            v
        }
        _ => return Ok(()),
    };
    for (role, side) in sides {
        match side {
            DmaOperand::Tile { region } => {
                let t = &program.tiles[region.tile.0 as usize];
                if t.buffer == Buffer::Psum {
                    return Err(violation(
                        "dma-psum",
                        "hbm or sbuf",
                        "psum",
                        name.into(),
                        format!(
                            "{name} reaches HBM or SBUF, not PSUM ({role} {}); tensor_copy to \
                             SBUF first",
                            t.name
                        ),
                        inst.loc,
                    ));
                }
            }
            DmaOperand::Hbm { access } => check_hbm_bounds(program, access, inst)?,
        }
    }
    Ok(())
}
