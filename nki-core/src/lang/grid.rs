//! The SPMD launch grid: `nl.program_id`, `nl.num_programs` and `nl.program_ndim` for Rust
//! kernels.
//!
//! A kernel launched on a grid (`kernel[2, 3]`, [`crate::lang::context::trace_grid`]) runs once
//! per program instance. A Rust kernel is traced once for all of them: [`program_id`] is a
//! symbolic index, an [`AffineExpr`] over the grid loop of its axis, usable wherever a loop
//! index is (HBM and tile offsets, `dynamic` bounds arithmetic), and like a loop index it is not
//! a Rust integer (no `if` on it, no trip count from it). The grid's sizes
//! ([`num_programs`], [`program_ndim`]) are plain integers: shapes may depend on them.

use crate::affine::AffineExpr;
use crate::lang::context::with_builder;
use crate::loc::SourceLoc;

/// The grid as NKI writes it, for messages: `(2,)`, `(2, 3)`, `()` without one.
pub(crate) fn grid_text(grid: &[usize]) -> String {
    match grid {
        [n] => format!("({n},)"),
        _ => {
            let dims: Vec<String> = grid.iter().map(usize::to_string).collect();
            format!("({})", dims.join(", "))
        }
    }
}

/// `nl.program_id(axis)`: this program's index along `axis` of the launch grid (symbolic; see
/// the module doc). Without a grid the kernel is one program and `program_id(0)` is 0. An axis
/// outside the grid is a trace error naming the axis and the grid (the result is then 0).
#[track_caller]
pub fn program_id(axis: usize) -> AffineExpr {
    let loc = SourceLoc::caller();
    with_builder(|b| {
        if let Some(id) = b.program_id.get(axis) {
            b.reads_program_id = true;
            return id.clone();
        }
        if b.grid.is_empty() && axis == 0 {
            return AffineExpr::constant(0);
        }
        let message = axis_error("program_id", axis, &b.grid);
        b.fail(loc, message);
        AffineExpr::constant(0)
    })
}

/// `nl.num_programs(axes)`: how many programs the launch grid has along `axes` (the product of
/// their sizes; `&[0]` is NKI's default). Without a grid the kernel is one program: 1 for axis
/// 0. An axis outside the grid is a trace error (the result is then 1).
#[track_caller]
pub fn num_programs(axes: &[usize]) -> usize {
    let loc = SourceLoc::caller();
    with_builder(|b| {
        let mut n = 1usize;
        for &axis in axes {
            match b.grid.get(axis) {
                Some(&size) => n = n.saturating_mul(size),
                None if b.grid.is_empty() && axis == 0 => {}
                None => {
                    let message = axis_error("num_programs", axis, &b.grid);
                    b.fail(loc, message);
                    return 1;
                }
            }
        }
        n
    })
}

/// `nl.program_ndim()`: how many axes the launch grid has (0 without a grid).
pub fn program_ndim() -> usize {
    with_builder(|b| b.grid.len())
}

/// The error for `axis` outside `grid`, from `function`.
pub(crate) fn axis_error(function: &str, axis: usize, grid: &[usize]) -> String {
    let axes = grid.len().max(1);
    format!(
        "{function}: axis {axis} is outside the launch grid {} (axes 0..{axes})",
        grid_text(grid)
    )
}
