//! Loops with symbolic indices, and the ragged-tiling helper.

use crate::affine::AffineExpr;
use crate::ir::LoopKind;
use crate::lang::context::record_loop;
use crate::loc::SourceLoc;

/// `nl.affine_range(n)`: independent iterations. The body is traced once with a symbolic index;
/// the loop stays a loop in the IR and the simulator may run iterations in parallel.
/// Accumulating into a PSUM tile declared outside the loop is allowed.
#[track_caller]
pub fn affine_range(n: usize, body: impl FnOnce(AffineExpr)) {
    let loc = SourceLoc::caller();
    if n > 0 {
        record_loop(n, LoopKind::Affine, loc, |v| body(AffineExpr::var(v)));
    }
}

/// `nl.sequential_range(n)`: iterations run in order and may carry state.
#[track_caller]
pub fn sequential_range(n: usize, body: impl FnOnce(AffineExpr)) {
    let loc = SourceLoc::caller();
    if n > 0 {
        record_loop(n, LoopKind::Sequential, loc, |v| body(AffineExpr::var(v)));
    }
}

/// One tile of a tiled dimension: elements `start..start+size`.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct TileSpan {
    /// First element (symbolic inside the loop over full tiles, constant for the tail).
    pub start: AffineExpr,
    /// Elements in this tile: the tile size, or the remainder for the ragged last tile.
    pub size: usize,
}

/// Tiles `0..total` by `tile`: an `affine_range` over the full tiles, then (when `total` is not
/// a multiple of `tile`) the ragged last tile traced once more with a constant start. This is
/// how NKI 0.2+ kernels handle ragged sizes without masks.
#[track_caller]
pub fn for_each_tile(total: usize, tile: usize, mut body: impl FnMut(TileSpan)) {
    let loc = SourceLoc::caller();
    let tile = tile.max(1);
    let full = total / tile;
    if full > 0 {
        record_loop(full, LoopKind::Affine, loc, |v| {
            body(TileSpan {
                start: AffineExpr::var(v) * tile,
                size: tile,
            })
        });
    }
    let rem = total % tile;
    if rem > 0 {
        body(TileSpan {
            start: AffineExpr::from(full * tile),
            size: rem,
        });
    }
}
