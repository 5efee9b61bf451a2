//! Loops with symbolic indices, device loops with register bounds, and the ragged-tiling
//! helper.

use crate::affine::AffineExpr;
use crate::ir::{LoopControl, LoopKind, RegisterValue};
use crate::lang::context::{Builder, record_loop, with_builder};
use crate::lang::register::Register;
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
pub fn for_each_tile(total: usize, tile: usize, body: impl FnMut(TileSpan)) {
    let tile = tile.max(1);
    range_tiles(0..total, tile, SourceLoc::caller(), body);
}

/// [`for_each_tile`] over this program's tiles only: the tiles of `0..total` (the ragged last
/// one included) are split across the program instances of the launch, each taking a
/// contiguous run ([`crate::lang::program_share`]), so a kernel launched on both cores of a
/// logical NeuronCore does each tile once. One program takes every tile.
#[track_caller]
pub fn for_each_program_tile(total: usize, tile: usize, body: impl FnMut(TileSpan)) {
    let tile = tile.max(1);
    range_tiles(program_range(total, tile), tile, SourceLoc::caller(), body);
}

/// This program's share of the elements `0..total` in whole `unit`-wide pieces (the last may
/// be ragged), as [`for_each_program_tile`] shares them: the instances' shares differ by at
/// most one piece, and one program takes all of it. A kernel that splits a dimension across
/// the cores in finer pieces than it loops over takes its range here and tiles it with
/// [`for_each_tile_in`].
pub fn program_range(total: usize, unit: usize) -> std::ops::Range<usize> {
    match crate::lang::program_instance() {
        Some((k, n)) => range_share_of(total, unit, k, n),
        None => 0..total,
    }
}

/// Share `k` of `n` of the elements `0..total` in whole `unit`-wide pieces, what
/// [`program_range`] gives program instance `k` of a launch of `n` ([`crate::lang::share_of`]
/// over the pieces, the last piece cut at `total`).
pub fn range_share_of(total: usize, unit: usize, k: usize, n: usize) -> std::ops::Range<usize> {
    let unit = unit.max(1);
    let share = crate::lang::share_of(total.div_ceil(unit), k, n);
    let start = share.start.saturating_mul(unit).min(total);
    start..share.end.saturating_mul(unit).min(total).max(start)
}

/// [`for_each_tile`] over the elements `range` of a dimension (a share of its tiles, say): the
/// `tile`-wide pieces from `range.start` as an affine loop, then the ragged last one (a
/// constant start), nothing for an empty range.
#[track_caller]
pub fn for_each_tile_in(range: std::ops::Range<usize>, tile: usize, body: impl FnMut(TileSpan)) {
    range_tiles(range, tile.max(1), SourceLoc::caller(), body);
}

/// [`for_each_tile_in`] with the loop at `loc`.
fn range_tiles(
    range: std::ops::Range<usize>,
    tile: usize,
    loc: SourceLoc,
    mut body: impl FnMut(TileSpan),
) {
    let len = range.end.saturating_sub(range.start);
    let full = len / tile;
    if full > 0 {
        record_loop(full, LoopKind::Affine, loc, |v| {
            body(TileSpan {
                start: AffineExpr::var(v) * tile + range.start,
                size: tile,
            })
        });
    }
    let rem = len % tile;
    if rem > 0 {
        body(TileSpan {
            start: AffineExpr::from(range.start + full * tile),
            size: rem,
        });
    }
}

/// Opens a device loop after checking its registers belong to the trace and its step is
/// positive; `None` (the error recorded) otherwise.
pub(crate) fn open_device_loop(
    b: &mut Builder,
    control: LoopControl,
    loc: SourceLoc,
) -> Option<crate::ir::DeviceLoopId> {
    let what = match control {
        LoopControl::Range { .. } => "dynamic_range",
        LoopControl::While { .. } => "while_loop",
    };
    if let LoopControl::Range { step: 0, .. } = control {
        b.fail(
            loc,
            format!("{what}: step must be a positive integer, got 0"),
        );
        return None;
    }
    if let Some(r) = control.reads().into_iter().find(|r| !b.has_register(*r)) {
        b.fail(
            loc,
            format!(
                "{what}: register #{} does not belong to this kernel's trace (a register kept \
                 from another one?)",
                r.0
            ),
        );
        return None;
    }
    Some(b.open_device_loop(control, loc))
}

/// `nl.dynamic_range(start, stop, step)` (and `nl.fori_loop`): a loop the device runs, its
/// bounds immediates or registers read when it starts, `step` a positive constant. The body is
/// traced once with the index register, which holds the iteration's value when it runs.
#[track_caller]
pub fn dynamic_range(
    start: impl Into<RegisterValue>,
    stop: impl Into<RegisterValue>,
    step: u32,
    body: impl FnOnce(Register),
) {
    let loc = SourceLoc::caller();
    let (start, stop) = (start.into(), stop.into());
    let index = with_builder(|b| {
        let index = b.add_register("", loc);
        let control = LoopControl::Range {
            start,
            stop,
            step,
            index,
        };
        open_device_loop(b, control, loc).map(|_| Register(index))
    });
    if let Some(index) = index {
        body(index);
        with_builder(|b| {
            b.close_loop();
        });
    }
}

/// `nl.while_loop` / `while reg:`: a loop the device runs while `cond` is nonzero, tested before
/// each iteration. The body is traced once; it updates `cond` (`register_load`, `register_move`).
#[track_caller]
pub fn while_loop(cond: &Register, body: impl FnOnce()) {
    let loc = SourceLoc::caller();
    let control = LoopControl::While { cond: cond.0 };
    if with_builder(|b| open_device_loop(b, control, loc)).is_some() {
        body();
        with_builder(|b| {
            b.close_loop();
        });
    }
}
