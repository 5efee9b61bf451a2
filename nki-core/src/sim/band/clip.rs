//! One instruction restricted to one band of partitions.

use crate::ir::{DmaOperand, HbmAccess, Op, TileRegion};

/// The absolute partitions `c0..c1` an instruction covering `p0..p0 + np` has in the band
/// `b0..b1`, or `None` when it has none there.
fn overlap((p0, np): (usize, usize), b0: usize, b1: usize) -> Option<(usize, usize)> {
    let (c0, c1) = (p0.max(b0), (p0 + np).min(b1));
    (c0 < c1).then_some((c0, c1))
}

/// `r` cut to the absolute partitions `c0..c1`: re-based to the band's storage (where
/// partition `b0` is row 0) when the tile is band-local, absolute otherwise.
fn cut(r: &TileRegion, (c0, c1): (usize, usize), b0: usize, local: &[bool]) -> TileRegion {
    let base = if local[r.tile.0 as usize] { b0 } else { 0 };
    TileRegion {
        p0: c0 - base,
        np: c1 - c0,
        ..r.clone()
    }
}

/// `op` (a partition-local instruction covering partitions `span`, see [`super::plan`])
/// restricted to the partitions of the band `b0..b1`: `None` when it has none there. An HBM
/// side drops the rows of the partitions cut away. `local` says, per tile, whether the band
/// holds its storage.
pub(crate) fn clip(
    op: &Op,
    span: (usize, usize),
    b0: usize,
    b1: usize,
    local: &[bool],
) -> Option<Op> {
    let cols = overlap(span, b0, b1)?;
    let skipped = (cols.0 - span.0) as i64;
    let side = |o: &DmaOperand| match o {
        DmaOperand::Tile { region } => DmaOperand::Tile {
            region: cut(region, cols, b0, local),
        },
        DmaOperand::Hbm { access } => DmaOperand::Hbm {
            access: HbmAccess {
                tensor: access.tensor,
                offset: access.offset.clone() + skipped * access.p_stride,
                np: cols.1 - cols.0,
                nf: access.nf,
                p_stride: access.p_stride,
                f_stride: access.f_stride,
                // Dynamic accesses are never banded (sim/band/plan.rs).
                dynamic: access.dynamic.clone(),
                free_dims: access.free_dims.clone(),
            },
        },
    };
    Some(match op {
        Op::DmaCopy {
            dst,
            src,
            oob_mode,
            reinterpret,
        } => Op::DmaCopy {
            dst: side(dst),
            src: side(src),
            oob_mode: *oob_mode,
            reinterpret: *reinterpret,
        },
        _ => op.map_operands(&mut |r| cut(r, cols, b0, local), &mut |e| e.clone()),
    })
}

/// A matmul's stationary and moving operands restricted to the band `b0..b1` (its
/// destination is left whole), or `None` when they have no partitions there.
pub(crate) fn clip_operands(
    stationary: &TileRegion,
    moving: &TileRegion,
    b0: usize,
    b1: usize,
    local: &[bool],
) -> Option<(TileRegion, TileRegion)> {
    let cols = overlap((stationary.p0, stationary.np), b0, b1)?;
    Some((
        cut(stationary, cols, b0, local),
        cut(moving, cols, b0, local),
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::affine::AffineExpr;
    use crate::ir::{BinOp, ElementwiseEngine, HbmId, OobMode, TileId};

    fn region(tile: u32, p0: usize, np: usize) -> TileRegion {
        TileRegion::rect(TileId(tile), p0, np, 3, 10)
    }

    #[test]
    fn local_tiles_are_rebased_and_others_keep_their_partitions() {
        let op = Op::TensorTensor {
            dst: region(0, 0, 20),
            a: region(1, 0, 20),
            b: region(0, 0, 20),
            op: BinOp::Add,
            engine: ElementwiseEngine::Vector,
        };
        let local = [true, false];
        let Some(Op::TensorTensor { dst, a, b, .. }) = clip(&op, (0, 20), 8, 16, &local) else {
            panic!("the band has partitions 8..16")
        };
        assert_eq!((dst.p0, dst.np, dst.f0, dst.nf), (0, 8, 3, 10));
        assert_eq!(
            (a.p0, a.np),
            (8, 8),
            "an outer tile keeps absolute partitions"
        );
        assert_eq!((b.p0, b.np), (0, 8));
        let Some(Op::TensorTensor { dst, .. }) = clip(&op, (0, 20), 16, 24, &local) else {
            panic!("the band has partitions 16..20")
        };
        assert_eq!((dst.p0, dst.np), (0, 4));
        assert!(clip(&op, (0, 20), 24, 32, &local).is_none());
    }

    #[test]
    fn an_hbm_side_drops_the_rows_cut_away() {
        let op = Op::DmaCopy {
            dst: DmaOperand::Tile {
                region: region(0, 4, 12),
            },
            src: DmaOperand::Hbm {
                access: HbmAccess {
                    tensor: HbmId(0),
                    offset: AffineExpr::constant(100),
                    np: 12,
                    nf: 10,
                    p_stride: 64,
                    f_stride: 1,
                    dynamic: None,
                    free_dims: None,
                },
            },
            oob_mode: OobMode::Error,
            reinterpret: false,
        };
        let Some(Op::DmaCopy {
            dst: DmaOperand::Tile { region: r },
            src: DmaOperand::Hbm { access },
            ..
        }) = clip(&op, (4, 12), 8, 16, &[true])
        else {
            panic!("the band has partitions 8..16")
        };
        assert_eq!((r.p0, r.np), (0, 8));
        assert_eq!((access.offset.constant, access.np), (100 + 4 * 64, 8));
    }
}
