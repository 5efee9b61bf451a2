//! The execution plan of a program: facts the simulator derives once per compiled program
//! rather than on every run — which loops may run in parallel, which tile allocations need
//! their NaN poison written, and after which statement each tile's storage can be released.

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
    /// Per block (the program body is block 0, then each loop body in program order), per
    /// statement: the tiles allocated in that block whose last use is that statement (or a
    /// statement nested in it). Their storage goes back to the pool there, so a long unrolled
    /// program reuses a few buffers instead of touching fresh memory for every tile.
    pub release: Vec<Vec<Vec<TileId>>>,
    /// For each loop variable: the block of its body.
    pub loop_block: Vec<usize>,
}

impl ExecPlan {
    /// Analyses `program`.
    pub fn new(program: &Program) -> ExecPlan {
        let (release, loop_block) = release_points(program);
        ExecPlan {
            parallel: parallel_loops(program),
            poison: poison_needed(program),
            release,
            loop_block,
        }
    }

    /// Whether this plan was made for a program of this shape.
    pub(crate) fn fits(&self, program: &Program) -> bool {
        self.parallel.len() == program.loops.len()
            && self.poison.len() == program.tiles.len()
            && self.loop_block.len() == program.loops.len()
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

/// [`ExecPlan::release`] and [`ExecPlan::loop_block`].
fn release_points(program: &Program) -> (Vec<Vec<Vec<TileId>>>, Vec<usize>) {
    struct Walk {
        /// Per tile: the block that allocates it and the last statement there that uses it.
        owner: Vec<Option<(usize, usize)>>,
        release: Vec<Vec<Vec<TileId>>>,
        loop_block: Vec<usize>,
    }
    impl Walk {
        /// Numbers the block, records its tiles' last uses; returns every tile it uses.
        fn block(&mut self, body: &[Stmt]) -> Vec<TileId> {
            let id = self.release.len();
            self.release.push(vec![Vec::new(); body.len()]);
            let mut used = Vec::new();
            for (i, s) in body.iter().enumerate() {
                let tiles: Vec<TileId> = match s {
                    Stmt::Alloc { tile } => vec![*tile],
                    Stmt::Inst(inst) => {
                        let (reads, writes) = (inst.op.tile_reads(), inst.op.tile_writes());
                        reads.iter().chain(&writes).map(|r| r.tile).collect()
                    }
                    Stmt::Loop { var, body } => {
                        self.loop_block[var.0 as usize] = self.release.len();
                        self.block(body)
                    }
                };
                for t in tiles {
                    let owner = &mut self.owner[t.0 as usize];
                    match owner {
                        _ if matches!(s, Stmt::Alloc { .. }) => *owner = Some((id, i)),
                        Some((block, last)) if *block == id => *last = i,
                        _ => {}
                    }
                    used.push(t);
                }
            }
            used.sort_unstable_by_key(|t| t.0);
            used.dedup();
            used
        }
    }
    let mut walk = Walk {
        owner: vec![None; program.tiles.len()],
        release: Vec::new(),
        loop_block: vec![0; program.loops.len()],
    };
    walk.block(&program.body);
    for (t, owner) in walk.owner.iter().enumerate() {
        if let Some((block, last)) = *owner {
            walk.release[block][last].push(TileId(t as u32));
        }
    }
    (walk.release, walk.loop_block)
}
