//! `dma_copy`: data movement between HBM and on-chip tiles.

use super::DmaArg;
use crate::ir::{DmaOperand, HbmKind, Op};
use crate::lang::context::with_builder;
use crate::loc::SourceLoc;

/// `nisa.dma_copy(dst, src)`: moves data between HBM and SBUF. DMA does not cast: both sides
/// have the same dtype and the same `[rows, cols]` shape.
#[track_caller]
pub fn dma_copy(dst: impl Into<DmaArg>, src: impl Into<DmaArg>) {
    let loc = SourceLoc::caller();
    let (dst, src) = (dst.into(), src.into());
    with_builder(|b| {
        let mut side = |a: DmaArg,
                        role: &str|
         -> Option<(DmaOperand, [usize; 2], crate::dtype::DType)> {
            match a {
                DmaArg::Hbm(v) => match v.to_access() {
                    Ok(access) => {
                        let decl = &b.hbm[access.tensor.0 as usize];
                        let dtype = decl.dtype;
                        if role == "dst" && decl.kind == HbmKind::Input {
                            let name = decl.name.clone();
                            b.fail(loc, format!("dma_copy: kernel input `{name}` is read-only; write to a shared_hbm output"));
                            return None;
                        }
                        let shape = [access.np, access.nf];
                        Some((DmaOperand::Hbm { access }, shape, dtype))
                    }
                    Err(m) => {
                        b.fail(loc, format!("dma_copy {role}: {m}"));
                        None
                    }
                },
                DmaArg::Tile(region) => {
                    if let Some(m) = b.region_problem(&region) {
                        b.fail(loc, format!("dma_copy {role}: {m}"));
                        return None;
                    }
                    let dtype = b.tiles[region.tile.0 as usize].dtype;
                    let shape = region.shape();
                    Some((DmaOperand::Tile { region }, shape, dtype))
                }
            }
        };
        let (Some((d, ds, dt)), Some((s, ss, st))) = (side(dst, "dst"), side(src, "src")) else {
            return;
        };
        if ds != ss {
            b.fail(
                loc,
                format!("dma_copy: dst has shape {ds:?} but src has shape {ss:?}"),
            );
        } else if dt != st {
            b.fail(loc, format!("dma_copy: dst is {dt} but src is {st}; DMA does not cast (load, then tensor_copy)"));
        } else {
            b.push_op(Op::DmaCopy { dst: d, src: s }, loc);
        }
    });
}
