//! `dma_copy`: data movement between HBM and on-chip tiles.

use super::DmaArg;
use crate::ir::{DmaOperand, HbmKind, Op};
use crate::lang::context::with_builder;
use crate::loc::SourceLoc;

/// `nisa.dma_copy(dst, src)`: moves data between HBM and SBUF. Both sides have the same
/// `[rows, cols]` shape; where their dtypes differ the DMA engines convert, through fp32 (as
/// NKI documents: `src.dtype` → float32 → `dst.dtype`, rounding as a tile write does).
#[track_caller]
pub fn dma_copy(dst: impl Into<DmaArg>, src: impl Into<DmaArg>) {
    let loc = SourceLoc::caller();
    let (dst, src) = (dst.into(), src.into());
    with_builder(|b| {
        let mut side = |a: DmaArg, role: &str| -> Option<(DmaOperand, [usize; 2])> {
            match a {
                DmaArg::Hbm(v) => match v.to_access() {
                    Ok(access) => {
                        let decl = &b.hbm[access.tensor.0 as usize];
                        if role == "dst" && decl.kind == HbmKind::Input {
                            let name = decl.name.clone();
                            b.fail(loc, format!("dma_copy: kernel input `{name}` is read-only; write to a shared_hbm output"));
                            return None;
                        }
                        let shape = [access.np, access.nf];
                        Some((DmaOperand::Hbm { access }, shape))
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
                    let shape = region.shape();
                    Some((DmaOperand::Tile { region }, shape))
                }
            }
        };
        let (Some((d, ds)), Some((s, ss))) = (side(dst, "dst"), side(src, "src")) else {
            return;
        };
        if ds != ss {
            b.fail(
                loc,
                format!("dma_copy: dst has shape {ds:?} but src has shape {ss:?}"),
            );
        } else {
            b.push_op(Op::DmaCopy { dst: d, src: s }, loc);
        }
    });
}
