//! The iterations of `affine_range` loops, in both forms the IR holds them.
//!
//! A Rust kernel traces an `affine_range` once: one [`Stmt::Loop`] whose variable runs over
//! `0..trip`. The NKI frontend (and [`super::unroll`]) unroll it while tracing: every iteration is
//! its own one-trip loop, opened at the same source location, one after the other in the same
//! block (with, between them, the allocations [`super::hoist_escaping_allocs`] moved in front of
//! the iteration that first uses them). [`affine_runs`] finds the second form: a run of at least
//! two consecutive one-trip affine loops with the same location is taken as the iterations of one
//! loop. The frontend gives each `nl.affine_range` call its own column, so two calls at one
//! line back to back (in a plain Python `for`) stay two loops; in an unrolled Rust program,
//! two `affine_range` loops opened at one location back to back (a helper opening one, called
//! twice in a row) read as one loop.

use super::{LoopKind, Program, Stmt};

/// One unrolled `affine_range`: statements `start..end` of a block, the loops among them its
/// iterations in order (the other statements are allocations).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct AffineRun {
    /// First statement (a loop).
    pub start: usize,
    /// One past the last statement (a loop).
    pub end: usize,
    /// The indices of the iterations' loops, in program order.
    pub iterations: Vec<usize>,
}

/// The unrolled `affine_range` loops of `block` (not of nested blocks), in order.
pub fn affine_runs(program: &Program, block: &[Stmt]) -> Vec<AffineRun> {
    let one_trip_affine = |s: &Stmt| match s {
        Stmt::Loop { var, .. } => {
            let d = &program.loops[var.0 as usize];
            (d.trip == 1 && d.kind == LoopKind::Affine).then_some(d.loc)
        }
        _ => None,
    };
    let mut runs = Vec::new();
    let mut i = 0;
    while i < block.len() {
        let Some(loc) = one_trip_affine(&block[i]) else {
            i += 1;
            continue;
        };
        let mut iterations = vec![i];
        let mut j = i + 1;
        while j < block.len() {
            match &block[j] {
                Stmt::Alloc { .. } => j += 1,
                s if one_trip_affine(s) == Some(loc) => {
                    iterations.push(j);
                    j += 1;
                }
                _ => break,
            }
        }
        let end = iterations.last().map_or(i, |&l| l + 1);
        if iterations.len() > 1 {
            runs.push(AffineRun {
                start: i,
                end,
                iterations,
            });
        }
        i = end;
    }
    runs
}
