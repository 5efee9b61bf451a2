//! The program instances of a launch that synchronise (`core_barrier` across both cores,
//! `sendrecv`) run in lockstep, as the two cores of a logical NeuronCore do: each instance runs
//! until its next synchronisation, and when every instance is at one the synchronisation
//! happens (a barrier releases them; an exchange moves each core's `src` into the other's
//! `dst`), then they go on. Without synchronisations instances run one after the other, in
//! program-id order (`Runner::block`).
//!
//! What is simulated: instances of a one-axis launch (at most [`LNC_CORES`], each traced on its
//! own, as the NKI frontend traces them), synchronising at the top level of their bodies (a
//! synchronisation inside a loop is a simulation error). An instance that finishes while
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
    body.iter().any(|s| match s {
        Stmt::Inst(inst) => inst.op.synchronises_cores(),
        Stmt::Loop { body, .. } | Stmt::DeviceLoop { body, .. } => contains_sync(body),
        Stmt::Alloc { .. } => false,
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

/// One instance in a lockstep run: its scope's body, plan block and how far it has run.
struct Instance<'b> {
    body: &'b [Stmt],
    block: usize,
    cursor: usize,
    done: bool,
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
            if decl.trip != 1
                || inner.iter().any(|s| {
                    !matches!(s, Stmt::Inst(_) | Stmt::Alloc { .. })
                        && contains_sync(std::slice::from_ref(s))
                })
            {
                return Err(self.unsupported(
                    decl.loc,
                    "a core_barrier or sendrecv inside a loop, or in a launch grid traced \
                     symbolically, is not simulated: lockstep runs synchronisations at the top \
                     level of each program instance"
                        .into(),
                ));
            }
            env[v] = 0;
            instances.push(Instance {
                body: inner,
                block: self.loop_block[v],
                cursor: 0,
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
                match self.block_from(
                    inst.body,
                    inst.block,
                    inst.cursor,
                    true,
                    store,
                    env,
                    scratch,
                )? {
                    Some(k) => inst.cursor = k,
                    None => inst.done = true,
                }
            }
            if instances.iter().all(|i| i.done) {
                break;
            }
            let at: Vec<Option<&Instruction>> = instances
                .iter()
                .map(|i| match (i.done, &i.body.get(i.cursor)) {
                    (false, Some(Stmt::Inst(inst))) => Some(inst),
                    _ => None,
                })
                .collect();
            self.meet(&at, store)?;
            for inst in &mut instances {
                for &tile in &self.release[inst.block][inst.cursor] {
                    store.release(tile);
                }
                inst.cursor += 1;
            }
        }
        for k in first..end {
            for &tile in &self.release[block][k] {
                store.release(tile);
            }
        }
        Ok(end)
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
