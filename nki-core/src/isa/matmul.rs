//! The tensor engine's `nc_matmul` and `nc_transpose`.

use crate::ir::{Op, TileRegion};
use crate::lang::context::with_builder;
use crate::loc::SourceLoc;

/// `nisa.nc_matmul(dst, stationary, moving, accumulate=...)`: `dst (+)= stationaryᵀ · moving`
/// on the tensor engine, contracting over the partition dim: stationary `[K, M]`, moving
/// `[K, N]`, dst `[M, N]` in PSUM.
#[track_caller]
pub fn nc_matmul(
    dst: impl Into<TileRegion>,
    stationary: impl Into<TileRegion>,
    moving: impl Into<TileRegion>,
    accumulate: bool,
) {
    let loc = SourceLoc::caller();
    let (dst, stationary, moving) = (dst.into(), stationary.into(), moving.into());
    with_builder(|b| {
        let ([k1, m], [k2, n]) = (stationary.shape(), moving.shape());
        if k1 != k2 {
            b.fail(
                loc,
                format!("nc_matmul: stationary has {k1} partitions (K) but moving has {k2}"),
            );
        } else if dst.shape() != [m, n] {
            b.fail(
                loc,
                format!(
                    "nc_matmul: dst has shape {:?} but stationaryᵀ·moving is [{m}, {n}]",
                    dst.shape()
                ),
            );
        } else {
            b.push_op(
                Op::NcMatmul {
                    dst,
                    stationary,
                    moving,
                    accumulate,
                },
                loc,
            );
        }
    });
}

/// `nisa.nc_transpose(dst, data)` on the tensor engine: `dst = dataᵀ`, an SBUF `[P, F]` region
/// (`P, F ≤ 128`) into a PSUM `[F, P]` region (fp32, or bf16 on Trn3), exact for every dtype.
/// The usual way to turn a row-major tile into a stationary operand without a transposed DMA.
#[track_caller]
pub fn nc_transpose(dst: impl Into<TileRegion>, data: impl Into<TileRegion>) {
    let loc = SourceLoc::caller();
    let (dst, data) = (dst.into(), data.into());
    with_builder(|b| {
        let [p, f] = data.shape();
        if dst.shape() != [f, p] {
            b.fail(
                loc,
                format!(
                    "nc_transpose: dst has shape {:?} but the transpose of data {:?} is [{f}, {p}]",
                    dst.shape(),
                    data.shape()
                ),
            );
        } else {
            b.push_op(Op::NcTranspose { dst, data }, loc);
        }
    });
}
