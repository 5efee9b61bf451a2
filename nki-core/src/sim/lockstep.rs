//! The program instances of a launch that synchronise (`core_barrier` across both cores,
//! `sendrecv`) run in lockstep, as the two cores of a logical NeuronCore do: each instance runs
//! until its next synchronisation, and when every instance is at one the synchronisation
//! happens (a barrier releases them; an exchange moves each core's `src` into the other's
//! `dst`), then they go on. Without synchronisations instances run one after the other, in
//! program-id order (`Runner::block`).
//!
//! What is simulated: instances of a one-axis launch (at most [`LNC_CORES`], each traced on its
//! own, as the NKI frontend traces them), synchronising anywhere in their bodies, loops
//! included: an instance's position is a stack of frames, one per loop it is inside (a
//! synchronisation inside a device loop, whose trip count is only known at run time, is a
//! simulation error). An instance that finishes while
//! another waits at a synchronisation, instances at different synchronisations, and exchanges
//! whose ranks do not pair up are simulation errors naming the instruction and its line: on the
//! device they hang or exchange garbage.

use super::rounding::round_into;
use super::store::TileStore;
use super::{Runner, Scratch};
use crate::error::NkiError;
use crate::ir::{Instruction, LoopKind, Op, Program, Stmt};
use crate::isa::LNC_CORES;

/// Whether `s` is an instruction at which the cores of a logical NeuronCore meet: a
/// `core_barrier` of both cores, or a `sendrecv`.
pub(super) fn is_sync(s: &Stmt) -> bool {
    s.synchronises_cores()
}

/// Whether any statement of `body`, at any depth, synchronises cores.
fn contains_sync(body: &[Stmt]) -> bool {
    body.iter().any(Stmt::synchronises_within)
}

/// Whether `s` is a loop whose body synchronises cores: lockstep enters it one iteration at a
/// time instead of running it whole.
pub(super) fn holds_sync(s: &Stmt) -> bool {
    match s {
        Stmt::Loop { body, .. } | Stmt::DeviceLoop { body, .. } => contains_sync(body),
        Stmt::Inst(_) | Stmt::Alloc { .. } => false,
    }
}

/// The first synchronising instruction of `body`, at any depth.
fn first_sync(body: &[Stmt]) -> Option<&Instruction> {
    body.iter().find_map(|s| match s {
        Stmt::Inst(inst) if inst.op.synchronises_cores() => Some(inst),
        Stmt::Loop { body, .. } | Stmt::DeviceLoop { body, .. } => first_sync(body),
        Stmt::Inst(_) | Stmt::Alloc { .. } => None,
    })
}

/// Whether the program synchronises cores anywhere.
pub(super) fn synchronises(program: &Program) -> bool {
    contains_sync(&program.body)
}

/// Whether `s` is the scope of a launch-grid instance whose body synchronises cores.
pub(super) fn is_grid_instance(program: &Program, s: &Stmt) -> bool {
    match s {
        Stmt::Loop { var, body } => {
            matches!(program.loops[var.0 as usize].kind, LoopKind::Grid { .. })
                && contains_sync(body)
        }
        _ => false,
    }
}

/// A body an instance is running: the instance's own scope, or one iteration of a loop inside
/// it that synchronises.
struct Frame<'b> {
    body: &'b [Stmt],
    block: usize,
    cursor: usize,
    /// `(loop variable, trip count, iteration)` for a loop's body; `None` for the scope.
    iteration: Option<(usize, usize, usize)>,
}

/// One instance in a lockstep run: the bodies it is inside, innermost last.
struct Instance<'b> {
    frames: Vec<Frame<'b>>,
    done: bool,
}

impl<'b> Instance<'b> {
    fn top(&self) -> &Frame<'b> {
        self.frames.last().expect("a running instance has a frame")
    }

    fn top_mut(&mut self) -> &mut Frame<'b> {
        self.frames
            .last_mut()
            .expect("a running instance has a frame")
    }
}

impl<'a> Runner<'_, 'a> {
    /// Runs the launch-grid instances that start at statement `first` of `body` in lockstep;
    /// returns the index of the statement after them.
    pub(super) fn lockstep<'p>(
        &self,
        body: &[Stmt],
        block: usize,
        first: usize,
        store: &mut TileStore<'p>,
        env: &mut [i64],
        scratch: &mut Scratch,
    ) -> Result<usize, NkiError>
    where
        'a: 'p,
    {
        let end = (first..body.len())
            .find(|&k| {
                !matches!(&body[k], Stmt::Loop { var, .. }
                if matches!(self.program.loops[var.0 as usize].kind, LoopKind::Grid { .. }))
            })
            .unwrap_or(body.len());
        let mut instances = Vec::new();
        for s in &body[first..end] {
            let Stmt::Loop { var, body: inner } = s else {
                unreachable!("the run holds grid scopes only")
            };
            let v = var.0 as usize;
            let decl = &self.program.loops[v];
            if decl.trip != 1 {
                return Err(self.unsupported(
                    decl.loc,
                    "a core_barrier or sendrecv in a launch grid traced symbolically is not \
                     simulated: lockstep runs program instances traced one by one"
                        .into(),
                ));
            }
            env[v] = 0;
            instances.push(Instance {
                frames: vec![Frame {
                    body: inner,
                    block: self.loop_block[v],
                    cursor: 0,
                    iteration: None,
                }],
                done: false,
            });
        }
        if instances.len() > LNC_CORES {
            return Err(self.unsupported(
                self.program.loops[first_var(&body[first])].loc,
                format!(
                    "{} program instances synchronise with core_barrier / sendrecv; a logical \
                     NeuronCore has {LNC_CORES} cores",
                    instances.len()
                ),
            ));
        }
        loop {
            for inst in instances.iter_mut().filter(|i| !i.done) {
                self.run_to_sync(inst, store, env, scratch)?;
            }
            if instances.iter().all(|i| i.done) {
                break;
            }
            let at: Vec<Option<&Instruction>> = instances
                .iter()
                .map(|i| match i.done {
                    false => match i.top().body.get(i.top().cursor) {
                        Some(Stmt::Inst(inst)) => Some(inst),
                        _ => None,
                    },
                    true => None,
                })
                .collect();
            self.meet(&at, store)?;
            for inst in &mut instances {
                let top = inst.top_mut();
                self.release_after(top.block, top.cursor..top.cursor + 1, store);
                top.cursor += 1;
            }
        }
        self.release_after(block, first..end, store);
        Ok(end)
    }

    /// Runs `inst` until it waits at a synchronisation (its innermost frame's cursor on it) or
    /// finishes: a loop whose body synchronises is entered one iteration at a time, in program
    /// order (its iterations cannot overlap: each meets the other cores).
    fn run_to_sync<'b, 'p>(
        &self,
        inst: &mut Instance<'b>,
        store: &mut TileStore<'p>,
        env: &mut [i64],
        scratch: &mut Scratch,
    ) -> Result<(), NkiError>
    where
        'a: 'p,
    {
        loop {
            let top = inst.top_mut();
            match self.block_from(top.body, top.block, top.cursor, true, store, env, scratch)? {
                Some(k) => {
                    top.cursor = k;
                    let (body, block) = (top.body, top.block);
                    match &body[k] {
                        Stmt::Inst(_) => return Ok(()),
                        Stmt::Loop { var, body: inner } => {
                            let v = var.0 as usize;
                            let trip = self.program.loops[v].trip;
                            if trip == 0 {
                                self.release_after(block, k..k + 1, store);
                                inst.top_mut().cursor += 1;
                                continue;
                            }
                            env[v] = 0;
                            inst.frames.push(Frame {
                                body: inner,
                                block: self.loop_block[v],
                                cursor: 0,
                                iteration: Some((v, trip, 0)),
                            });
                        }
                        Stmt::DeviceLoop { body: inner, .. } => {
                            let sync = first_sync(inner).expect("the loop holds a synchronisation");
                            return Err(self.sync_error(
                                sync,
                                "it is inside a device loop (a trip count known only at run \
                                 time), which lockstep does not enter"
                                    .into(),
                            ));
                        }
                        Stmt::Alloc { .. } => {
                            unreachable!("block_from stops at instructions and loops")
                        }
                    }
                }
                None => match top.iteration {
                    Some((v, trip, i)) if i + 1 < trip => {
                        top.iteration = Some((v, trip, i + 1));
                        top.cursor = 0;
                        env[v] = (i + 1) as i64;
                    }
                    Some(_) => {
                        inst.frames.pop();
                        let parent = inst.top_mut();
                        self.release_after(parent.block, parent.cursor..parent.cursor + 1, store);
                        parent.cursor += 1;
                    }
                    None => {
                        inst.done = true;
                        return Ok(());
                    }
                },
            }
        }
    }

    /// Every instance is at a synchronisation (`at[rank]`, `None` for one that finished):
    /// checks they meet at the same kind, then performs it.
    fn meet(&self, at: &[Option<&Instruction>], store: &mut TileStore<'_>) -> Result<(), NkiError> {
        let waiting = at
            .iter()
            .flatten()
            .next()
            .copied()
            .expect("an instance waits");
        if let Some(rank) = at.iter().position(Option::is_none) {
            return Err(self.sync_error(
                waiting,
                format!("core {rank} finished without reaching it; the cores would wait forever"),
            ));
        }
        let at: Vec<&Instruction> = at.iter().flatten().copied().collect();
        if let Some(other) = at.iter().find(|i| i.op.name() != waiting.op.name()) {
            return Err(self.sync_error(
                waiting,
                format!(
                    "another core is at {} (line {}) instead",
                    other.op.name(),
                    other.loc.line
                ),
            ));
        }
        if !matches!(waiting.op, Op::SendRecv { .. }) {
            return Ok(());
        }
        // Every core's src is read before any dst is written.
        let mut received = Vec::with_capacity(at.len());
        for (rank, inst) in at.iter().enumerate() {
            let Op::SendRecv {
                dst,
                recv_from_rank,
                ..
            } = &inst.op
            else {
                unreachable!("checked: every core is at a sendrecv")
            };
            let from = *recv_from_rank;
            let Some(Op::SendRecv {
                src, send_to_rank, ..
            }) = at.get(from).map(|i| &i.op)
            else {
                return Err(self.sync_error(
                    inst,
                    format!("core {rank} receives from core {from}, which does not run"),
                ));
            };
            if *send_to_rank != rank {
                return Err(self.sync_error(
                    inst,
                    format!(
                        "core {rank} receives from core {from}, but core {from} sends to core \
                         {send_to_rank}"
                    ),
                ));
            }
            if src.pattern.is_some() || dst.pattern.is_some() {
                return Err(
                    self.sync_error(inst, "a strided sendrecv operand is not simulated".into())
                );
            }
            let rows = (0..src.np)
                .map(|r| store.row(src, r).map(<[f32]>::to_vec))
                .collect::<Result<Vec<_>, _>>()
                .map_err(|e| self.sync_error(inst, format!("{e:?}")))?;
            received.push((dst.clone(), rows));
        }
        for (inst, (dst, rows)) in at.iter().zip(received) {
            let dt = store.dtype(dst.tile);
            for (r, row) in rows.iter().enumerate() {
                let out = store
                    .row_mut(&dst, r)
                    .map_err(|e| self.sync_error(inst, format!("{e:?}")))?;
                round_into(out, dt, |i| row[i]);
            }
        }
        Ok(())
    }

    fn sync_error(&self, inst: &Instruction, message: String) -> NkiError {
        NkiError::Simulation {
            message: format!(
                "{} across the cores of the launch: {message}",
                inst.op.name()
            ),
            instruction: inst.op.name(),
            loc: inst.loc,
        }
    }

    fn unsupported(&self, loc: crate::loc::SourceLoc, message: String) -> NkiError {
        NkiError::Simulation {
            message,
            instruction: "launch grid",
            loc,
        }
    }
}

fn first_var(s: &Stmt) -> usize {
    match s {
        Stmt::Loop { var, .. } => var.0 as usize,
        _ => unreachable!("the run holds grid scopes only"),
    }
}
