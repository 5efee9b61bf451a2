//! Unrolled instruction streams: a program with every loop expanded into its iterations, and
//! the comparison of two programs' streams.
//!
//! NKI unrolls `affine_range` / `sequential_range` when it specialises a kernel, and the NKI
//! frontend traces that way (one scope per iteration, loop indices as plain integers). Unrolling
//! a Rust-traced program the same way makes the two directly comparable: each iteration becomes
//! a one-trip loop (so tiles allocated in it still die at its end), loop indices become
//! constants, and every execution of an allocation gets its own tile. A device loop stays a
//! loop (its trip count is only known at run time), its body unrolled inside it, one device loop
//! per copy of the statement.

use super::{Program, Stmt, TileId, TileRegion};
use crate::affine::{AffineExpr, LoopVar};
use crate::ir::LoopDecl;

/// `program` with every loop unrolled (see the module doc). Simulating it gives the same
/// results; validation sees the same live tiles at every point.
pub fn unroll(program: &Program) -> Program {
    let mut u = Unroller {
        program,
        tiles: Vec::new(),
        loops: Vec::new(),
        device_loops: Vec::new(),
        tile_map: vec![TileId(u32::MAX); program.tiles.len()],
        values: vec![0; program.loops.len()],
    };
    let body = u.block(&program.body);
    Program {
        name: program.name.clone(),
        target: program.target,
        hbm: program.hbm.clone(),
        outputs: program.outputs.clone(),
        tiles: u.tiles,
        loops: u.loops,
        registers: program.registers.clone(),
        device_loops: u.device_loops,
        grid: program.grid.clone(),
        body,
    }
}

struct Unroller<'p> {
    program: &'p Program,
    tiles: Vec<super::TileDecl>,
    loops: Vec<LoopDecl>,
    device_loops: Vec<super::DeviceLoopDecl>,
    /// The unrolled tile each original tile currently stands for.
    tile_map: Vec<TileId>,
    /// The current value of each original loop variable.
    values: Vec<i64>,
}

impl Unroller<'_> {
    fn block(&mut self, body: &[Stmt]) -> Vec<Stmt> {
        let mut out = Vec::with_capacity(body.len());
        for s in body {
            match s {
                Stmt::Alloc { tile } => {
                    let id = TileId(self.tiles.len() as u32);
                    self.tiles.push(self.program.tiles[tile.0 as usize].clone());
                    self.tile_map[tile.0 as usize] = id;
                    out.push(Stmt::Alloc { tile: id });
                }
                Stmt::Inst(inst) => {
                    let (map, values) = (&self.tile_map, &self.values);
                    let op = inst.op.map_operands(
                        &mut |r: &TileRegion| TileRegion {
                            tile: map[r.tile.0 as usize],
                            ..r.clone()
                        },
                        &mut |e: &AffineExpr| AffineExpr::constant(e.eval(values)),
                    );
                    out.push(Stmt::Inst(super::Instruction { op, loc: inst.loc }));
                }
                Stmt::Loop { var, body } => {
                    let decl = &self.program.loops[var.0 as usize];
                    for k in 0..decl.trip {
                        self.values[var.0 as usize] = k as i64;
                        let new_var = LoopVar(self.loops.len() as u32);
                        self.loops.push(LoopDecl {
                            trip: 1,
                            kind: decl.kind,
                            loc: decl.loc,
                        });
                        let body = self.block(body);
                        out.push(Stmt::Loop { var: new_var, body });
                    }
                }
                Stmt::DeviceLoop { id, body } => {
                    let new_id = super::DeviceLoopId(self.device_loops.len() as u32);
                    self.device_loops
                        .push(self.program.device_loops[id.0 as usize].clone());
                    let body = self.block(body);
                    out.push(Stmt::DeviceLoop { id: new_id, body });
                }
            }
        }
        out
    }
}

/// Where the unrolled instruction streams of `a` and `b` first differ, or `None` when they are
/// the same: the same tensors (kind, shape, dtype), tiles (shape, dtype, buffer), loop
/// structure and instructions with the same operands. Source locations and names are not
/// compared (they say where each program came from); the message gives both locations.
pub fn stream_difference(a: &Program, b: &Program) -> Option<String> {
    let (a, b) = (unroll(a), unroll(b));
    if a.hbm.len() != b.hbm.len() || a.outputs != b.outputs {
        return Some(format!(
            "tensors differ: {} vs {} tensors, outputs {:?} vs {:?}",
            a.hbm.len(),
            b.hbm.len(),
            a.outputs,
            b.outputs
        ));
    }
    for (i, (x, y)) in a.hbm.iter().zip(&b.hbm).enumerate() {
        if (x.kind, &x.shape, x.dtype) != (y.kind, &y.shape, y.dtype) {
            return Some(format!(
                "tensor #{i}: {:?} {:?} {} vs {:?} {:?} {}",
                x.kind, x.shape, x.dtype, y.kind, y.shape, y.dtype
            ));
        }
    }
    let mut stmt = 0usize;
    compare_blocks(&a, &b, &a.body, &b.body, &mut stmt)
}

fn compare_blocks(
    pa: &Program,
    pb: &Program,
    a: &[Stmt],
    b: &[Stmt],
    n: &mut usize,
) -> Option<String> {
    for i in 0..a.len().max(b.len()) {
        *n += 1;
        let (Some(x), Some(y)) = (a.get(i), b.get(i)) else {
            let (longer, which) = if a.len() > b.len() {
                (&a[i], "first")
            } else {
                (&b[i], "second")
            };
            return Some(format!(
                "statement {n}: only the {which} program goes on, with {}",
                describe(longer)
            ));
        };
        let same = match (x, y) {
            (Stmt::Alloc { tile: t }, Stmt::Alloc { tile: u }) => {
                let (d, e) = (&pa.tiles[t.0 as usize], &pb.tiles[u.0 as usize]);
                t == u
                    && (d.partitions, d.free, d.dtype, d.buffer)
                        == (e.partitions, e.free, e.dtype, e.buffer)
            }
            (Stmt::Inst(p), Stmt::Inst(q)) => p.op == q.op,
            (Stmt::Loop { var: v, body: bx }, Stmt::Loop { var: w, body: by }) => {
                let (d, e) = (&pa.loops[v.0 as usize], &pb.loops[w.0 as usize]);
                if v != w || (d.trip, d.kind) != (e.trip, e.kind) {
                    false
                } else {
                    if let Some(diff) = compare_blocks(pa, pb, bx, by, n) {
                        return Some(diff);
                    }
                    true
                }
            }
            (Stmt::DeviceLoop { id: i, body: bx }, Stmt::DeviceLoop { id: j, body: by }) => {
                let (d, e) = (
                    &pa.device_loops[i.0 as usize],
                    &pb.device_loops[j.0 as usize],
                );
                if i != j || d.control != e.control {
                    false
                } else {
                    if let Some(diff) = compare_blocks(pa, pb, bx, by, n) {
                        return Some(diff);
                    }
                    true
                }
            }
            _ => false,
        };
        if !same {
            return Some(format!(
                "statement {n} differs:\n  {}\n  {}",
                describe_in(pa, x),
                describe_in(pb, y)
            ));
        }
    }
    None
}

fn describe(s: &Stmt) -> String {
    match s {
        Stmt::Alloc { tile } => format!("alloc t{}", tile.0),
        Stmt::Inst(i) => format!("{} at {}", i.op.name(), i.loc),
        Stmt::Loop { .. } => "a loop iteration".into(),
        Stmt::DeviceLoop { .. } => "a device loop".into(),
    }
}

fn describe_in(p: &Program, s: &Stmt) -> String {
    match s {
        Stmt::Alloc { tile } => {
            let t = &p.tiles[tile.0 as usize];
            format!(
                "alloc t{} [{}, {}] {} in {} at {}",
                tile.0,
                t.partitions,
                t.free,
                t.dtype,
                t.buffer.name(),
                t.loc
            )
        }
        Stmt::Inst(i) => format!("{} at {}: {:?}", i.op.name(), i.loc, i.op),
        Stmt::Loop { var, .. } => {
            let l = &p.loops[var.0 as usize];
            format!("loop {:?} of {} at {}", l.kind, l.trip, l.loc)
        }
        Stmt::DeviceLoop { id, .. } => {
            let l = &p.device_loops[id.0 as usize];
            format!("device loop {:?} at {}", l.control, l.loc)
        }
    }
}
