//! Which `affine_range` loops the simulator may run in parallel.
//!
//! A loop qualifies when its iterations cannot interfere: the body writes no tile allocated
//! outside it (so PSUM accumulation across iterations stays sequential and deterministic), reads
//! no output tensor, and every output it writes is written in a window that moves by at least
//! the window's size from one iteration to the next.

use crate::affine::LoopVar;
use crate::ir::{HbmId, HbmKind, LoopKind, Program, Stmt, TileId};
use std::collections::{BTreeMap, HashSet};

/// For each loop variable: may its iterations run in parallel?
pub fn parallel_loops(program: &Program) -> Vec<bool> {
    let mut result = vec![false; program.loops.len()];
    fn visit(program: &Program, body: &[Stmt], result: &mut [bool]) {
        for s in body {
            if let Stmt::Loop { var, body } = s {
                let decl = &program.loops[var.0 as usize];
                result[var.0 as usize] = decl.kind == LoopKind::Affine
                    && decl.trip > 1
                    && independent(program, *var, body);
                visit(program, body, result);
            }
        }
    }
    visit(program, &program.body, &mut result);
    result
}

fn independent(program: &Program, var: LoopVar, body: &[Stmt]) -> bool {
    let mut allocated = HashSet::<TileId>::new();
    let mut written = Vec::<TileId>::new();
    let mut inner_vars = Vec::<LoopVar>::new();
    let mut ok = true;
    // (coefficient of `var`, lowest and highest offset relative to coefficient·var) per output.
    let mut windows: BTreeMap<HbmId, Vec<(i64, i64, i64)>> = BTreeMap::new();
    let trips = program.trips();
    fn walk(
        body: &[Stmt],
        allocated: &mut HashSet<TileId>,
        written: &mut Vec<TileId>,
        inner: &mut Vec<LoopVar>,
        f: &mut dyn FnMut(&crate::ir::Instruction),
    ) {
        for s in body {
            match s {
                Stmt::Alloc { tile } => {
                    allocated.insert(*tile);
                }
                Stmt::Inst(i) => {
                    written.extend(i.op.tile_writes().into_iter().map(|r| r.tile));
                    f(i);
                }
                Stmt::Loop { var, body } => {
                    inner.push(*var);
                    walk(body, allocated, written, inner, f);
                }
            }
        }
    }
    walk(
        body,
        &mut allocated,
        &mut written,
        &mut inner_vars,
        &mut |inst| {
            for (access, is_write) in inst.op.hbm_accesses() {
                let decl = &program.hbm[access.tensor.0 as usize];
                if decl.kind != HbmKind::Output {
                    continue;
                }
                if !is_write {
                    ok = false;
                    continue;
                }
                let k = access.offset.coefficient(var);
                let rel = access.offset.clone() - crate::affine::AffineExpr::var(var).scaled(k);
                let (lo, hi) = rel.range(&trips);
                let (below, above) = access.extent();
                let (lo, hi) = (lo + below, hi + above);
                windows.entry(access.tensor).or_default().push((k, lo, hi));
            }
        },
    );
    if !ok || written.iter().any(|t| !allocated.contains(t)) {
        return false;
    }
    windows.values().all(|w| {
        let k = w[0].0;
        let lo = w.iter().map(|x| x.1).min().unwrap_or(0);
        let hi = w.iter().map(|x| x.2).max().unwrap_or(0);
        w.iter().all(|x| x.0 == k) && k != 0 && hi - lo < k.abs()
    })
}
