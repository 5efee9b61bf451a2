//! Which `affine_range` loops the simulator may run in parallel.
//!
//! A loop qualifies when its iterations cannot interfere: the body writes no tile allocated
//! outside it (so PSUM accumulation across iterations stays sequential and deterministic), reads
//! no output tensor, and the output regions different iterations write are provably disjoint.
//! Disjointness is shown on one coordinate: either the flat element offset, or — for row-major
//! tiles of an output `[.., R]` — the row or the column, when the loop index moves the written
//! window along that coordinate by at least the window's size each iteration. A body with a
//! random-number instruction never qualifies: the engines' generator states make those
//! instructions depend on the order they run in (program order, as a sequential reading of the
//! loop nest); neither does one with a register instruction or a device loop (the registers are
//! one state of the core, read and written in program order).

use crate::affine::{AffineExpr, LoopVar};
use crate::ir::{HbmAccess, HbmId, Instruction, LoopKind, Op, Program, Stmt, TileId};
use std::collections::{BTreeMap, HashSet};

/// For each loop variable: may its iterations run in parallel?
pub fn parallel_loops(program: &Program) -> Vec<bool> {
    let mut result = vec![false; program.loops.len()];
    fn visit(program: &Program, body: &[Stmt], result: &mut [bool]) {
        for s in body {
            match s {
                Stmt::Loop { var, body } => {
                    let decl = &program.loops[var.0 as usize];
                    result[var.0 as usize] = decl.kind == LoopKind::Affine
                        && decl.trip > 1
                        && independent(program, *var, body);
                    visit(program, body, result);
                }
                Stmt::DeviceLoop { body, .. } => visit(program, body, result),
                Stmt::Alloc { .. } | Stmt::Inst(_) => {}
            }
        }
    }
    visit(program, &program.body, &mut result);
    result
}

/// Calls `f` on every instruction of `body`, nested ones too; `false` when it holds a device
/// loop.
fn visit_body<'p>(
    body: &'p [Stmt],
    allocated: &mut HashSet<TileId>,
    f: &mut dyn FnMut(&'p Instruction),
) -> bool {
    let mut static_only = true;
    for s in body {
        match s {
            Stmt::Alloc { tile } => {
                allocated.insert(*tile);
            }
            Stmt::Inst(i) => f(i),
            Stmt::Loop { body, .. } => static_only &= visit_body(body, allocated, f),
            Stmt::DeviceLoop { body, .. } => {
                visit_body(body, allocated, f);
                static_only = false;
            }
        }
    }
    static_only
}

fn independent(program: &Program, var: LoopVar, body: &[Stmt]) -> bool {
    let mut allocated = HashSet::<TileId>::new();
    let mut written_tiles = Vec::<TileId>::new();
    let mut reads_output = false;
    let mut writes: BTreeMap<HbmId, Vec<&HbmAccess>> = BTreeMap::new();
    let mut prng = false;
    let mut dynamic_write = false;
    let mut registers = false;
    let static_only = visit_body(body, &mut allocated, &mut |inst| {
        prng |= super::random::uses_prng(&inst.op);
        // Registers, and the multi-core instructions (which lockstep refuses inside loops),
        // keep program order.
        registers |= inst.op.uses_registers()
            || matches!(inst.op, Op::CoreBarrier { .. } | Op::SendRecv { .. });
        written_tiles.extend(inst.op.tile_writes().into_iter().map(|r| r.tile));
        for (access, is_write) in inst.op.hbm_accesses() {
            if !program.hbm[access.tensor.0 as usize].kind.is_writable() {
                continue;
            }
            if is_write && (access.dynamic.is_some() || access.free_dims.is_some()) {
                // Where a runtime offset writes is known only when it runs; a multi-dim walk
                // is not one the window analysis below reads.
                dynamic_write = true;
            } else if is_write {
                writes.entry(access.tensor).or_default().push(access);
            } else {
                reads_output = true;
            }
        }
    });
    let trips = program.trips();
    // The window arithmetic below is plain i64 (see `HbmAccess::is_modest`).
    let modest = writes.values().flatten().all(|a| a.is_modest(&trips));
    // The generators' states order the random-number instructions: such a body runs its
    // iterations in program order.
    if prng
        || dynamic_write
        || registers
        || !static_only
        || !modest
        || reads_output
        || written_tiles.iter().any(|t| !allocated.contains(t))
    {
        return false;
    }
    writes.iter().all(|(tensor, accesses)| {
        let row_len = program.hbm[tensor.0 as usize]
            .shape
            .last()
            .copied()
            .unwrap_or(1) as i64;
        let flat: Option<Vec<Window>> = accesses
            .iter()
            .map(|a| Some(flat_window(a, var, &trips)))
            .collect();
        let rows_cols: Option<Vec<Window>> = accesses
            .iter()
            .map(|a| row_col_window(a, var, &trips, row_len))
            .collect();
        [flat, rows_cols]
            .into_iter()
            .flatten()
            .any(|w| disjoint(&w))
    })
}

/// Where one write lands along one coordinate: `coefficient·var + [lo, hi]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Window {
    /// Which coordinate (0 = flat or row, 1 = column).
    axis: u8,
    coefficient: i64,
    lo: i64,
    hi: i64,
}

/// Iterations write disjoint regions when every write moves along the same coordinate by the
/// same non-zero step, and the union of their windows is narrower than the step.
fn disjoint(windows: &[Window]) -> bool {
    let Some(first) = windows.first() else {
        return true;
    };
    let lo = windows.iter().map(|w| w.lo).min().unwrap_or(0);
    let hi = windows.iter().map(|w| w.hi).max().unwrap_or(0);
    first.coefficient != 0
        && windows
            .iter()
            .all(|w| w.axis == first.axis && w.coefficient == first.coefficient)
        && hi - lo < first.coefficient.abs()
}

fn without(expr: &AffineExpr, var: LoopVar) -> AffineExpr {
    expr.clone() - AffineExpr::var(var).scaled(expr.coefficient(var))
}

fn flat_window(a: &HbmAccess, var: LoopVar, trips: &[usize]) -> Window {
    let (lo, hi) = without(&a.offset, var).range(trips);
    let (below, above) = a.extent();
    Window {
        axis: 0,
        coefficient: a.offset.coefficient(var),
        lo: lo + below,
        hi: hi + above,
    }
}

/// The write seen as a box of rows and columns of a row-major `[.., row_len]` tensor, if it is
/// one: rows advance by whole rows, columns are contiguous and never wrap into the next row.
fn row_col_window(a: &HbmAccess, var: LoopVar, trips: &[usize], row_len: i64) -> Option<Window> {
    let whole_rows = a.np == 1 || a.p_stride % row_len == 0;
    if row_len <= 0 || a.offset.constant < 0 || !(a.nf == 1 || a.f_stride == 1) || !whole_rows {
        return None;
    }
    let mut row = AffineExpr::constant(a.offset.constant / row_len);
    let mut col = AffineExpr::constant(a.offset.constant % row_len);
    for &(v, k) in &a.offset.terms {
        if k % row_len == 0 {
            row = row + AffineExpr::var(v).scaled(k / row_len);
        } else {
            col = col + AffineExpr::var(v).scaled(k);
        }
    }
    let (col_lo, col_hi) = col.range(trips);
    if col_lo < 0 || col_hi + a.nf as i64 > row_len {
        return None;
    }
    let row_span = (a.np as i64 - 1) * (a.p_stride / row_len);
    let (row_below, row_above) = (row_span.min(0), row_span.max(0));
    if col.coefficient(var) != 0 {
        let (lo, hi) = without(&col, var).range(trips);
        Some(Window {
            axis: 1,
            coefficient: col.coefficient(var),
            lo,
            hi: hi + a.nf as i64 - 1,
        })
    } else {
        let (lo, hi) = without(&row, var).range(trips);
        Some(Window {
            axis: 0,
            coefficient: row.coefficient(var),
            lo: lo + row_below,
            hi: hi + row_above,
        })
    }
}
