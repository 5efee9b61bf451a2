//! `affine-range-dependence`: iterations of an `affine_range` loop must be independent.
//!
//! The compiler may reorder and pipeline the iterations of an `affine_range` (NKI's matrix
//! multiplication tutorial: it is the iterator for loops without a loop-carried dependency,
//! associative reductions not counting as one; the migration guide: a tile written in every
//! iteration of a loop that declares it outside carries a dependency). A simulator running them
//! in order hides a dependence, so here one is an error: one iteration reads an element (of a
//! tile allocated outside the iteration, or of an HBM tensor) that another writes, or two write
//! it. Allowed, as the docs allow: an associative reduction into a tile — `nc_matmul` (and
//! `nc_matmul_mx`) accumulating into PSUM (one iteration's non-accumulating `nc_matmul` may
//! start the accumulation: the tutorial's first call overwrites, the next ones accumulate), or `tensor_tensor(acc, acc, x, op)` with `op` one of
//! add, multiply, maximum, minimum and the bitwise / logical and, or, xor — as long as the loop
//! touches the accumulator only to accumulate into it with one reduction. `sequential_range`
//! (and Python `range`, `static_range`) loops are never checked.
//!
//! A tile every iteration uses as scratch — each iteration reads only elements it wrote itself,
//! by an earlier instruction (nki-library's rotating buffers, `bufs[i % n]`) — carries no value
//! from one iteration to another: two iterations writing it is a warning, not an error. The NKI
//! 0.7 API docs define `affine_range` as an alias of `range` (fully unrolled, in order), so such
//! reuse is right there; a compiler that overlapped the iterations would need a tile per
//! iteration. A read of an element the iteration did not write first still sees another
//! iteration's value: that stays an error.
//!
//! The test is exact and exhaustive over the iterations: each access's elements are
//! enumerated as runs of consecutive elements ([`super::footprint`]) for every iteration, every
//! iteration of the loops inside the body, and — when the accesses to one tensor move
//! differently with an enclosing loop — every iteration of those enclosing loops (when they all
//! move the same way, the enclosing loops shift every access alike and are fixed at 0, which
//! decides the same). A loop traced symbolically (Rust kernels) has its tile regions fixed, so
//! two iterations stand for all of them. Past [`BUDGET`] (or [`MAX_ENCLOSING`] assignments of
//! the enclosing loops), and for an access with a runtime offset (`scalar_offset=`,
//! `vector_offset=`, an indirect DMA) to a tensor the loop writes, the rule cannot decide:
//! that is a [`ValidationWarning`], not an error.

use std::collections::{BTreeMap, HashSet};

use super::footprint::{
    Budget, Reduction, Touch, Use, covered, each_assignment, first_conflict, hbm_runs, insert_run,
    tile_runs,
};
use super::violation;
use crate::affine::LoopVar;
use crate::error::{NkiError, ValidationWarning};
use crate::ir::{
    BinOp, HbmAccess, HbmId, Instruction, LoopKind, Op, OperandUse, Program, Stmt, TileId,
    TileRegion, affine_runs,
};
use crate::loc::SourceLoc;

/// The rule's name.
pub(super) const RULE: &str = "affine-range-dependence";

/// The exhaustive search's bounds, per tensor or tile and loop.
pub(super) const BUDGET: Budget = Budget {
    touches: 1 << 21,
    comparisons: 1 << 24,
};

/// Most assignments of enclosing loops tried when accesses move differently with them.
pub(super) const MAX_ENCLOSING: usize = 64;

/// A tile or an HBM tensor.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Resource {
    Tile(TileId),
    Hbm(HbmId),
}

/// Where an access lands.
#[derive(Clone, Copy, Debug)]
enum Footprint<'p> {
    Tile(&'p TileRegion),
    Hbm(&'p HbmAccess),
}

/// One operand of one instruction in a loop's body.
struct Access<'p> {
    footprint: Footprint<'p>,
    kind: Use,
    inst: &'p Instruction,
    /// The iteration of an unrolled loop, `None` when the loop's variable gives it.
    iteration: Option<u32>,
    /// The loops inside the iteration around the instruction.
    inner: Vec<LoopVar>,
}

/// An `affine_range` loop and what its body touches outside itself.
struct Group<'p> {
    loc: SourceLoc,
    /// The variable of a loop traced once; `None` for an unrolled one.
    var: Option<LoopVar>,
    trip: usize,
    outer: Vec<LoopVar>,
    accesses: BTreeMap<Resource, Vec<Access<'p>>>,
}

/// Checks every `affine_range` of `program`: the first dependence is an error; what could not
/// be decided comes back as warnings.
pub(super) fn check(program: &Program) -> Result<Vec<ValidationWarning>, NkiError> {
    let mut groups = Vec::new();
    find_groups(program, &program.body, &mut Vec::new(), &mut groups);
    let mut warnings = Vec::new();
    for g in &groups {
        for (resource, accesses) in &g.accesses {
            check_resource(program, g, *resource, accesses, &mut warnings)?;
        }
    }
    Ok(warnings)
}

fn find_groups<'p>(
    program: &'p Program,
    block: &'p [Stmt],
    outer: &mut Vec<LoopVar>,
    out: &mut Vec<Group<'p>>,
) {
    for run in affine_runs(program, block) {
        let Stmt::Loop { var: first, .. } = &block[run.start] else {
            continue;
        };
        let mut g = Group {
            loc: program.loops[first.0 as usize].loc,
            var: None,
            trip: run.iterations.len(),
            outer: outer.clone(),
            accesses: BTreeMap::new(),
        };
        for (k, &idx) in run.iterations.iter().enumerate() {
            if let Stmt::Loop { var, body } = &block[idx] {
                let mut inner = vec![*var];
                collect(
                    body,
                    Some(k as u32),
                    &mut inner,
                    &mut HashSet::new(),
                    &mut g,
                );
            }
        }
        out.push(g);
    }
    for s in block {
        match s {
            Stmt::Loop { var, body } => {
                let decl = &program.loops[var.0 as usize];
                if decl.kind == LoopKind::Affine && decl.trip > 1 {
                    let mut g = Group {
                        loc: decl.loc,
                        var: Some(*var),
                        trip: decl.trip,
                        outer: outer.clone(),
                        accesses: BTreeMap::new(),
                    };
                    collect(body, None, &mut Vec::new(), &mut HashSet::new(), &mut g);
                    out.push(g);
                }
                outer.push(*var);
                find_groups(program, body, outer, out);
                outer.pop();
            }
            Stmt::DeviceLoop { body, .. } => find_groups(program, body, outer, out),
            Stmt::Alloc { .. } | Stmt::Inst(_) => {}
        }
    }
}

/// Records the accesses of `body` to tiles allocated outside it and to HBM tensors.
fn collect<'p>(
    body: &'p [Stmt],
    iteration: Option<u32>,
    inner: &mut Vec<LoopVar>,
    allocated: &mut HashSet<TileId>,
    g: &mut Group<'p>,
) {
    for s in body {
        match s {
            Stmt::Alloc { tile } => {
                allocated.insert(*tile);
            }
            Stmt::Inst(inst) => accesses_of(inst, iteration, inner, allocated, g),
            Stmt::Loop { var, body } => {
                inner.push(*var);
                collect(body, iteration, inner, allocated, g);
                inner.pop();
            }
            Stmt::DeviceLoop { body, .. } => {
                collect(body, iteration, inner, allocated, g);
            }
        }
    }
}

/// The accumulator an instruction folds into, if it is an associative reduction.
fn accumulation(op: &Op) -> Option<(&TileRegion, Reduction)> {
    match op {
        Op::NcMatmul {
            dst,
            accumulate: true,
            ..
        }
        | Op::NcMatmulMx {
            dst,
            accumulate: true,
            ..
        } => Some((dst, Reduction::Matmul)),
        Op::NcMatmul { dst, .. } | Op::NcMatmulMx { dst, .. } => {
            Some((dst, Reduction::MatmulFirst))
        }
        Op::TensorTensor { dst, a, b, op, .. } if associative(*op) && (a == dst) != (b == dst) => {
            Some((dst, Reduction::Op(*op)))
        }
        _ => None,
    }
}

fn associative(op: BinOp) -> bool {
    matches!(
        op,
        BinOp::Add
            | BinOp::Multiply
            | BinOp::Maximum
            | BinOp::Minimum
            | BinOp::BitwiseAnd
            | BinOp::BitwiseOr
            | BinOp::BitwiseXor
            | BinOp::LogicalAnd
            | BinOp::LogicalOr
            | BinOp::LogicalXor
    )
}

fn accesses_of<'p>(
    inst: &'p Instruction,
    iteration: Option<u32>,
    inner: &[LoopVar],
    allocated: &HashSet<TileId>,
    g: &mut Group<'p>,
) {
    let acc = accumulation(&inst.op);
    let mut push = |resource: Resource, footprint: Footprint<'p>, kind: Use| {
        g.accesses.entry(resource).or_default().push(Access {
            footprint,
            kind,
            inst,
            iteration,
            inner: inner.to_vec(),
        });
    };
    inst.op.visit_operands(&mut |u| match u {
        OperandUse::Tile(r, _) if allocated.contains(&r.tile) => {}
        OperandUse::Tile(r, access) => {
            let kind = match acc {
                Some((dst, red)) if dst == r => match access {
                    crate::ir::Access::Write => Use::Accumulate(red),
                    // The accumulator's own read is part of the accumulation.
                    crate::ir::Access::Read => return,
                },
                _ => plain(access),
            };
            push(Resource::Tile(r.tile), Footprint::Tile(r), kind);
        }
        OperandUse::Hbm(a, access) => {
            push(Resource::Hbm(a.tensor), Footprint::Hbm(a), plain(access));
        }
        OperandUse::Register(..) => {}
    });
}

fn plain(access: crate::ir::Access) -> Use {
    match access {
        crate::ir::Access::Read => Use::Read,
        crate::ir::Access::Write => Use::Write,
    }
}

fn check_resource(
    program: &Program,
    g: &Group<'_>,
    resource: Resource,
    accesses: &[Access<'_>],
    warnings: &mut Vec<ValidationWarning>,
) -> Result<(), NkiError> {
    if accesses.iter().all(|a| a.kind == Use::Read) {
        return Ok(());
    }
    // One reduction, and nothing else, on an accumulator: the order does not matter.
    if let Some(first) = accesses.first()
        && matches!(first.kind, Use::Accumulate(r) if r != Reduction::MatmulFirst)
        && accesses.iter().all(|a| a.kind == first.kind)
    {
        return Ok(());
    }
    let name = resource_name(program, resource);
    if let Some(a) = accesses.iter().find(|a| match a.footprint {
        Footprint::Hbm(h) => h.dynamic.is_some(),
        Footprint::Tile(_) => false,
    }) {
        warnings.push(undecided(
            g,
            a.inst,
            format!(
                "{} {name} at a runtime offset, which another iteration's access may reach",
                a.kind.verb()
            ),
        ));
        return Ok(());
    }
    // Enclosing loops that move the accesses differently must be enumerated.
    let moving: Vec<LoopVar> = g
        .outer
        .iter()
        .copied()
        .filter(|v| {
            let mut ks = accesses.iter().map(|a| match a.footprint {
                Footprint::Hbm(h) => h.offset.coefficient(*v),
                Footprint::Tile(_) => 0,
            });
            let first = ks.next().unwrap_or(0);
            ks.any(|k| k != first)
        })
        .collect();
    let trips = program.trips();
    let mut values = vec![0i64; program.loops.len()];
    let mut outcome: Result<Option<(Touch, Touch)>, String> = Ok(None);
    // Whether some iteration reads elements it wrote itself first (the tile is its scratch).
    let mut scratch = false;
    let free = match resource {
        Resource::Tile(t) => program.tiles[t.0 as usize].free,
        Resource::Hbm(_) => 0,
    };
    let symbolic_iterations = match (g.var, resource) {
        // Tile regions do not move with the loop: two iterations stand for all.
        (Some(_), Resource::Tile(_)) => g.trip.min(2),
        _ => g.trip,
    };
    let enumerated = each_assignment(&moving, &trips, &mut values, MAX_ENCLOSING, &mut |vals| {
        if !matches!(outcome, Ok(None)) {
            return;
        }
        let mut touches = Vec::new();
        let mut vals = vals.to_vec();
        let mut runs = Vec::new();
        for (i, a) in accesses.iter().enumerate() {
            let iterations: Vec<u32> = match a.iteration {
                Some(k) => vec![k],
                None => (0..symbolic_iterations as u32).collect(),
            };
            for k in iterations {
                if let Some(v) = g.var {
                    vals[v.0 as usize] = i64::from(k);
                }
                // Only the inner loops that move the access are enumerated.
                let moves: Vec<LoopVar> = match a.footprint {
                    Footprint::Hbm(h) => a
                        .inner
                        .iter()
                        .copied()
                        .filter(|v| h.offset.coefficient(*v) != 0)
                        .collect(),
                    Footprint::Tile(_) => Vec::new(),
                };
                let ok = each_assignment(&moves, &trips, &mut vals, BUDGET.touches, &mut |x| {
                    runs.clear();
                    match a.footprint {
                        Footprint::Tile(r) => tile_runs(r, free, &mut runs),
                        Footprint::Hbm(h) => hbm_runs(h, h.offset.eval(x), &mut runs),
                    }
                    touches.extend(runs.iter().map(|&(lo, hi)| Touch {
                        lo,
                        hi,
                        iteration: k,
                        access: i as u32,
                        kind: a.kind,
                    }));
                });
                if !ok || touches.len() > BUDGET.touches {
                    outcome = Err(format!(
                        "its accesses to {name} are more than {} runs of elements to compare",
                        BUDGET.touches
                    ));
                    return;
                }
            }
        }
        if let Resource::Tile(_) = resource {
            scratch |= drop_private_reads(accesses, &mut touches);
        }
        outcome = first_conflict(touches, BUDGET).map_err(|()| {
            format!(
                "comparing its accesses to {name} takes more than {} steps",
                BUDGET.comparisons
            )
        });
    });
    if !enumerated {
        outcome = Err(format!(
            "its accesses to {name} move differently with enclosing loops of more than \
             {MAX_ENCLOSING} iterations in all"
        ));
    }
    match outcome {
        Ok(None) => Ok(()),
        Ok(Some((a, b))) if scratch && a.kind == Use::Write && b.kind == Use::Write => {
            warnings.push(reused_scratch(program, g, resource, accesses, a, b));
            Ok(())
        }
        Ok(Some((a, b))) => Err(dependence(program, g, resource, accesses, a, b)),
        Err(why) => {
            let inst = accesses.first().map(|a| a.inst);
            if let Some(inst) = inst {
                warnings.push(undecided(g, inst, why));
            }
            Ok(())
        }
    }
}

/// Drops the reads of a tile that an iteration makes of elements it wrote itself, by an earlier
/// instruction of the same iteration: no other iteration's value can reach them, whatever the
/// order. Returns whether any was dropped. (Tile footprints do not move with the loops inside an
/// iteration, and a frontend iteration is unrolled, so "earlier in the body" is "earlier".)
fn drop_private_reads(accesses: &[Access<'_>], touches: &mut Vec<Touch>) -> bool {
    touches.sort_by_key(|t| (t.iteration, t.access, t.lo));
    let before = touches.len();
    let mut written: BTreeMap<i64, i64> = BTreeMap::new();
    let mut iteration = None;
    let mut pending: Vec<(i64, i64)> = Vec::new();
    let mut pending_inst: Option<*const Instruction> = None;
    touches.retain(|t| {
        let inst: *const Instruction = accesses[t.access as usize].inst;
        if iteration != Some(t.iteration) {
            iteration = Some(t.iteration);
            written.clear();
            pending.clear();
        }
        // An instruction's writes land after its own reads.
        if pending_inst != Some(inst) {
            for (lo, hi) in pending.drain(..) {
                insert_run(&mut written, lo, hi);
            }
            pending_inst = Some(inst);
        }
        match t.kind {
            Use::Write => {
                pending.push((t.lo, t.hi));
                true
            }
            Use::Read => !covered(&written, t.lo, t.hi),
            Use::Accumulate(_) => true,
        }
    });
    touches.len() != before
}

/// Two iterations write one element of a tile each of them uses as scratch (it reads only what
/// it wrote itself): a warning, not an error.
fn reused_scratch(
    program: &Program,
    g: &Group<'_>,
    resource: Resource,
    accesses: &[Access<'_>],
    a: Touch,
    b: Touch,
) -> ValidationWarning {
    let (first, second) = if a.iteration <= b.iteration {
        (a, b)
    } else {
        (b, a)
    };
    let inst = accesses[second.access as usize].inst;
    let at = element(program, resource, first.lo.max(second.lo));
    ValidationWarning {
        rule: RULE,
        message: format!(
            "affine_range at {}: iterations {} and {} both use {at} as scratch (each reads only \
             what it wrote there itself; {} at {} writes it): right when the iterations run one \
             after another, as NKI 0.7's affine_range (an alias of range) runs them; a compiler \
             that overlaps them needs a tile per iteration",
            g.loc,
            first.iteration,
            second.iteration,
            inst.op.name(),
            inst.loc,
        ),
        loc: inst.loc,
    }
}

fn undecided(g: &Group<'_>, inst: &Instruction, why: String) -> ValidationWarning {
    ValidationWarning {
        rule: RULE,
        message: format!(
            "could not decide whether the iterations of the affine_range at {} are independent: \
             {} at {} {why}",
            g.loc,
            inst.op.name(),
            inst.loc
        ),
        loc: inst.loc,
    }
}

fn resource_name(program: &Program, resource: Resource) -> String {
    match resource {
        Resource::Tile(t) => format!("tile {}", program.tiles[t.0 as usize].name),
        Resource::Hbm(h) => format!("tensor {}", program.hbm[h.0 as usize].name),
    }
}

/// The element `flat` of a resource, as indices.
fn element(program: &Program, resource: Resource, flat: i64) -> String {
    let shape: Vec<usize> = match resource {
        Resource::Tile(t) => {
            let d = &program.tiles[t.0 as usize];
            vec![d.partitions, d.free]
        }
        Resource::Hbm(h) => program.hbm[h.0 as usize].shape.clone(),
    };
    let mut rest = flat;
    let mut idx = vec![0i64; shape.len()];
    for (i, &n) in shape.iter().enumerate().rev() {
        let n = (n as i64).max(1);
        idx[i] = if i == 0 { rest } else { rest.rem_euclid(n) };
        rest = rest.div_euclid(n);
    }
    let idx: Vec<String> = idx.iter().map(i64::to_string).collect();
    format!("{}[{}]", resource_name(program, resource), idx.join(", "))
}

fn dependence(
    program: &Program,
    g: &Group<'_>,
    resource: Resource,
    accesses: &[Access<'_>],
    a: Touch,
    b: Touch,
) -> NkiError {
    let (first, second) = if a.iteration <= b.iteration {
        (a, b)
    } else {
        (b, a)
    };
    let (fa, sa) = (
        &accesses[first.access as usize],
        &accesses[second.access as usize],
    );
    let at = element(program, resource, first.lo.max(second.lo));
    let why = match (first.kind, second.kind) {
        (Use::Accumulate(_), _) | (_, Use::Accumulate(_)) => {
            "an accumulator may only be accumulated into by the loop (with one reduction)"
        }
        (Use::Read, _) | (_, Use::Read) => "one iteration reads what another writes",
        _ => "two iterations write the same element",
    };
    violation(
        RULE,
        "independent iterations (or one associative reduction into a tile)",
        format!(
            "iterations {} and {} share {at}",
            first.iteration, second.iteration
        ),
        format!("{} / {}", fa.inst.op.name(), sa.inst.op.name()),
        format!(
            "affine_range at {}: iteration {} {} {at} ({} at {}) and iteration {} {} it ({} at \
             {}): {why}; the compiler may reorder and overlap affine_range iterations. Use \
             sequential_range for a loop-carried dependence, or give each iteration its own \
             tile or region",
            g.loc,
            first.iteration,
            first.kind.verb(),
            fa.inst.op.name(),
            fa.inst.loc,
            second.iteration,
            second.kind.verb(),
            sa.inst.op.name(),
            sa.inst.loc,
        ),
        fa.inst.loc,
    )
}
