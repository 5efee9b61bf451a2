//! Tile lifetimes as Python has them: a tile allocated in a loop body that runs once and used
//! after that body ends has its allocation moved out, to the block where it is still in use.
//!
//! The NKI frontend unrolls every Python loop while it traces, recording each iteration as a
//! one-trip loop (its own scope). A Python tile stays valid as long as the kernel refers to it —
//! the matrix-multiplication tutorial fills a list with tiles in one `affine_range` loop and
//! reads them in the next — while the IR keeps the simpler invariant every pass relies on: a tile
//! is used only inside the block that allocated it. [`hoist_escaping_allocs`] reconciles the two
//! when the program is finished.
//!
//! The allocation moves to the innermost block that contains both it and every use, just before
//! the statement (the one-trip loop) that contained it; liveness, and so the SBUF/PSUM capacity
//! checks, still runs from there to the last use. A body that runs more than once has one tile
//! per iteration, so a use after such a loop stays where it is and validation's `tile-scope`
//! rule reports it; so does a device loop's body (it runs as often as registers say).

use super::{LoopDecl, Stmt, TileId};
use std::collections::BTreeMap;

/// A statement's position: its index in each enclosing block, outermost first.
type Path = Vec<usize>;

/// Moves the allocation of every tile used after the one-trip loop bodies that allocated it
/// ends (see the module doc). Programs whose tiles stay in their blocks are left unchanged.
pub fn hoist_escaping_allocs(body: &mut Vec<Stmt>, loops: &[LoopDecl]) {
    let mut allocs: BTreeMap<TileId, Path> = BTreeMap::new();
    let mut uses: Vec<(TileId, Path)> = Vec::new();
    collect(body, &mut Vec::new(), &mut allocs, &mut uses);
    // Per tile, how many leading path entries its new block keeps (its depth).
    let mut depth: BTreeMap<TileId, usize> = BTreeMap::new();
    for (tile, at) in &uses {
        let Some(alloc) = allocs.get(tile) else {
            continue;
        };
        let owner = &alloc[..alloc.len() - 1];
        if at.starts_with(owner) {
            continue;
        }
        let common = owner.iter().zip(at).take_while(|(a, b)| a == b).count();
        let d = depth.entry(*tile).or_insert(owner.len());
        *d = (*d).min(common);
    }
    let moves: Vec<(TileId, Path, Path)> = depth
        .into_iter()
        .filter_map(|(tile, d)| {
            let from = allocs[&tile].clone();
            runs_once(body, &from[..from.len() - 1], d, loops)
                .then(|| (tile, from[..=d].to_vec(), from))
        })
        .collect();
    if moves.is_empty() {
        return;
    }
    let mut insert: BTreeMap<Path, Vec<TileId>> = BTreeMap::new();
    let mut remove: Vec<Path> = Vec::new();
    for (tile, before, from) in moves {
        insert.entry(before).or_default().push(tile);
        remove.push(from);
    }
    *body = rebuild(std::mem::take(body), &mut Vec::new(), &insert, &remove);
}

/// Records each tile's allocation path and every use's path.
fn collect(
    body: &[Stmt],
    path: &mut Path,
    allocs: &mut BTreeMap<TileId, Path>,
    uses: &mut Vec<(TileId, Path)>,
) {
    for (i, s) in body.iter().enumerate() {
        path.push(i);
        match s {
            Stmt::Alloc { tile } => {
                allocs.insert(*tile, path.clone());
            }
            Stmt::Inst(inst) => {
                let (reads, writes) = (inst.op.tile_reads(), inst.op.tile_writes());
                for r in reads.into_iter().chain(writes) {
                    uses.push((r.tile, path.clone()));
                }
            }
            Stmt::Loop { body, .. } | Stmt::DeviceLoop { body, .. } => {
                collect(body, path, allocs, uses)
            }
        }
        path.pop();
    }
}

/// Whether every loop from depth `keep` down to the block at `block` runs exactly once.
fn runs_once(body: &[Stmt], block: &[usize], keep: usize, loops: &[LoopDecl]) -> bool {
    let mut stmts = body;
    for (level, &i) in block.iter().enumerate() {
        let (trip, body) = match stmts.get(i) {
            Some(Stmt::Loop { var, body }) => (Some(loops[var.0 as usize].trip), body),
            Some(Stmt::DeviceLoop { body, .. }) => (None, body),
            _ => return false,
        };
        if level >= keep && trip != Some(1) {
            return false;
        }
        stmts = body;
    }
    true
}

/// The block at `path` with `remove`d allocations dropped and `insert`ed ones placed before
/// their statements.
fn rebuild(
    body: Vec<Stmt>,
    path: &mut Path,
    insert: &BTreeMap<Path, Vec<TileId>>,
    remove: &[Path],
) -> Vec<Stmt> {
    let mut out = Vec::with_capacity(body.len());
    for (i, s) in body.into_iter().enumerate() {
        path.push(i);
        if let Some(tiles) = insert.get(path.as_slice()) {
            out.extend(tiles.iter().map(|&tile| Stmt::Alloc { tile }));
        }
        match s {
            Stmt::Alloc { .. } if remove.iter().any(|r| r == path) => {}
            Stmt::Loop { var, body } => out.push(Stmt::Loop {
                var,
                body: rebuild(body, path, insert, remove),
            }),
            Stmt::DeviceLoop { id, body } => out.push(Stmt::DeviceLoop {
                id,
                body: rebuild(body, path, insert, remove),
            }),
            s => out.push(s),
        }
        path.pop();
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Instruction, LoopKind, LoopVar, Op, TileRegion};
    use crate::loc::SourceLoc;

    fn memset(tile: u32) -> Stmt {
        Stmt::Inst(Instruction {
            op: Op::Memset {
                dst: TileRegion::rect(TileId(tile), 0, 1, 0, 1),
                value: 0.0,
            },
            loc: SourceLoc::caller(),
        })
    }

    fn lp(var: u32, body: Vec<Stmt>) -> Stmt {
        Stmt::Loop {
            var: LoopVar(var),
            body,
        }
    }

    fn decls(trips: &[usize]) -> Vec<LoopDecl> {
        trips
            .iter()
            .map(|&trip| LoopDecl {
                trip,
                kind: LoopKind::Affine,
                loc: SourceLoc::caller(),
            })
            .collect()
    }

    fn alloc(tile: u32) -> Stmt {
        Stmt::Alloc { tile: TileId(tile) }
    }

    #[test]
    fn a_tile_kept_after_a_one_trip_body_is_allocated_before_it() {
        // for k: t0 = alloc; memset t0     then    for n: memset t0
        let mut body = vec![lp(0, vec![alloc(0), memset(0)]), lp(1, vec![memset(0)])];
        hoist_escaping_allocs(&mut body, &decls(&[1, 1]));
        assert_eq!(
            body,
            vec![alloc(0), lp(0, vec![memset(0)]), lp(1, vec![memset(0)])]
        );
    }

    #[test]
    fn the_allocation_moves_only_as_far_out_as_its_uses_need() {
        // for m: { for k: { for j: t0 = alloc }; for n: memset t0 }
        let mut body = vec![lp(
            0,
            vec![
                lp(1, vec![lp(2, vec![alloc(0), memset(0)])]),
                lp(3, vec![memset(0)]),
            ],
        )];
        hoist_escaping_allocs(&mut body, &decls(&[4, 1, 1, 1]));
        assert_eq!(
            body,
            vec![lp(
                0,
                vec![
                    alloc(0),
                    lp(1, vec![lp(2, vec![memset(0)])]),
                    lp(3, vec![memset(0)]),
                ],
            )]
        );
    }

    #[test]
    fn tiles_of_a_loop_that_runs_more_than_once_stay_for_validation_to_report() {
        let original = vec![lp(0, vec![alloc(0), memset(0)]), memset(0)];
        let mut body = original.clone();
        hoist_escaping_allocs(&mut body, &decls(&[2]));
        assert_eq!(body, original);
    }

    #[test]
    fn tiles_used_only_in_their_block_stay() {
        let original = vec![
            lp(0, vec![alloc(0), lp(1, vec![memset(0)])]),
            alloc(1),
            memset(1),
        ];
        let mut body = original.clone();
        hoist_escaping_allocs(&mut body, &decls(&[1, 3]));
        assert_eq!(body, original);
    }
}
