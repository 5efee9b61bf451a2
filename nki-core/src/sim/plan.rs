//! The execution plan of a program: facts the simulator derives once per compiled program
//! rather than on every run — which loops may run in parallel, and which tile allocations need
//! their NaN poison written.

use crate::ir::{Program, Stmt, TileId};
use crate::sim::parallel::parallel_loops;

/// Per-program facts for the simulator. Build once with [`ExecPlan::new`] and pass it in
/// [`crate::sim::SimOptions::plan`] on every run.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecPlan {
    /// For each loop variable: may its iterations run in parallel?
    pub parallel: Vec<bool>,
    /// For each tile: must a fresh allocation be filled with NaN? `false` when the first
    /// instruction to touch the tile overwrites all of it without reading it, so the poison
    /// could never be observed.
    pub poison: Vec<bool>,
}

impl ExecPlan {
    /// Analyses `program`.
    pub fn new(program: &Program) -> ExecPlan {
        ExecPlan {
            parallel: parallel_loops(program),
            poison: poison_needed(program),
        }
    }

    /// Whether this plan was made for a program of this shape.
    pub(crate) fn fits(&self, program: &Program) -> bool {
        self.parallel.len() == program.loops.len() && self.poison.len() == program.tiles.len()
    }
}

/// What the first instruction after an allocation does to the tile.
#[derive(Clone, Copy, PartialEq, Eq)]
enum FirstTouch {
    /// Writes the whole tile and reads none of it.
    Overwrites,
    /// Anything else (reads it, or writes only part of it).
    Other,
}

fn poison_needed(program: &Program) -> Vec<bool> {
    let mut first: Vec<Option<FirstTouch>> = vec![None; program.tiles.len()];
    fn walk(program: &Program, body: &[Stmt], first: &mut [Option<FirstTouch>]) {
        for s in body {
            match s {
                // A tile is allocated once in program order (each handle comes from one call).
                Stmt::Alloc { .. } => {}
                Stmt::Inst(inst) => {
                    let reads: Vec<TileId> = inst.op.tile_reads().iter().map(|r| r.tile).collect();
                    for r in inst.op.tile_reads() {
                        first[r.tile.0 as usize].get_or_insert(FirstTouch::Other);
                    }
                    for w in inst.op.tile_writes() {
                        let decl = &program.tiles[w.tile.0 as usize];
                        let whole =
                            w.p0 == 0 && w.f0 == 0 && w.np == decl.partitions && w.nf == decl.free;
                        let touch = if whole && !reads.contains(&w.tile) {
                            FirstTouch::Overwrites
                        } else {
                            FirstTouch::Other
                        };
                        first[w.tile.0 as usize].get_or_insert(touch);
                    }
                }
                Stmt::Loop { body, .. } => walk(program, body, first),
            }
        }
    }
    walk(program, &program.body, &mut first);
    first
        .into_iter()
        .map(|t| t != Some(FirstTouch::Overwrites))
        .collect()
}
