//! `core-race`: the program instances of a launch grid run at the same time (the two cores of a
//! logical NeuronCore under LNC=2, or NeuronCores of an SPMD launch), sharing HBM. Between two
//! synchronisations (`core_barrier` across the cores, `sendrecv`) nothing orders one
//! instance's accesses against another's, so two instances writing one element of a shared
//! HBM tensor, or one reading an element another writes, is a race: what the device computes
//! depends on timing, while the simulator, running instances in program-id order, shows one
//! outcome. Such a pair is a validation error naming both instructions and lines.
//!
//! Each instance's body is cut into epochs at its synchronisations (the lockstep run requires
//! every instance to meet the same ones, `sim/lockstep.rs`); a loop whose body synchronises is
//! walked one iteration at a time, its variable pinned to that iteration in the accesses of
//! each epoch it spans. The accesses of epoch `e`
//! of every instance are compared with those of epoch `e` of every other, element by element
//! ([`super::footprint`], every iteration of the loops inside). Not checked: an instance's
//! private scratch (`nl.private_hbm`, its own), kernel inputs (read only), accesses at a
//! runtime offset and inside device loops (a [`ValidationWarning`] when a tensor another
//! instance writes is reached so), and the whole-tensor copy of an argument into the output
//! standing for it (how the NKI frontend makes a written argument copy-on-write; the device
//! writes the argument in place). When every instance makes the same accesses between two
//! synchronisations (a kernel that ignores `nl.program_id`, launched on both cores), the
//! instances write the same values: that is a warning that the work is done twice, not a race.
//! So is one tensor that every instance only stores to, the same stores from the same lines (a
//! kernel that splits some work but replicates these stores on every core), warned as stores
//! that race but write what the other core writes when the cores compute the same values, and
//! so are such stores each instance then reads back (every element written by one instruction,
//! read only after the reading instance's own store of it).

use std::collections::BTreeMap;

use super::footprint::{
    Budget, Touch, Use, covered, each_assignment, first_conflict, hbm_runs, insert_run,
};
use super::violation;
use crate::affine::LoopVar;
use crate::error::{NkiError, ValidationWarning};
use crate::ir::{HbmAccess, HbmId, HbmKind, Instruction, LoopKind, Op, Program, Stmt};
use crate::loc::SourceLoc;

/// The rule's name.
pub(super) const RULE: &str = "core-race";

/// The search's bounds per tensor and epoch.
const BUDGET: Budget = Budget {
    touches: 1 << 21,
    comparisons: 1 << 24,
};

/// One HBM access of one instance in one epoch.
#[derive(Clone)]
struct Access<'p> {
    access: &'p HbmAccess,
    write: bool,
    inst: &'p Instruction,
    /// The loops inside the instance around the instruction.
    loops: Vec<LoopVar>,
    /// Inside a device loop (its trip count exists only at run time).
    device: bool,
    /// The loops around it that synchronise, each at the iteration this epoch is in.
    pins: Vec<(LoopVar, i64)>,
}

impl Access<'_> {
    /// Calls `f` with every assignment of the loops around the access (its pinned loops at
    /// their iterations); `false` past `limit`.
    fn each_assignment(
        &self,
        trips: &[usize],
        values: &mut [i64],
        limit: usize,
        f: &mut dyn FnMut(&[i64]),
    ) -> bool {
        for &(v, k) in &self.pins {
            values[v.0 as usize] = k;
        }
        let fits = each_assignment(&self.loops, trips, values, limit, f);
        for &(v, _) in &self.pins {
            values[v.0 as usize] = 0;
        }
        fits
    }
}

/// Cuts `body` into epochs at its synchronisations, entering the loops that synchronise one
/// iteration at a time, and files each shared-HBM access under its epoch.
fn epochs_of<'p>(
    program: &'p Program,
    body: &'p [Stmt],
    instance: u32,
    (epoch, pins): (&mut usize, &mut Vec<(LoopVar, i64)>),
    epochs: &mut Vec<BTreeMap<HbmId, Vec<(u32, Access<'p>)>>>,
) {
    for s in body {
        if s.synchronises_cores() {
            *epoch += 1;
            continue;
        }
        if let Stmt::Loop { var, body: inner } = s
            && inner.iter().any(Stmt::synchronises_within)
        {
            for k in 0..program.loops[var.0 as usize].trip {
                pins.push((*var, k as i64));
                epochs_of(program, inner, instance, (&mut *epoch, &mut *pins), epochs);
                pins.pop();
            }
            continue;
        }
        if epochs.len() <= *epoch {
            epochs.resize_with(*epoch + 1, BTreeMap::new);
        }
        let mut found = Vec::new();
        collect_accesses(program, s, &mut Vec::new(), false, &mut found);
        for mut a in found {
            a.pins = pins.clone();
            epochs[*epoch]
                .entry(a.access.tensor)
                .or_default()
                .push((instance, a));
        }
    }
}

/// Checks the program's launch-grid instances for races on shared HBM (see the module doc).
pub(super) fn check(program: &Program) -> Result<Vec<ValidationWarning>, NkiError> {
    let mut instances = Vec::new();
    collect_instances(program, &program.body, &mut instances);
    if instances.len() < 2 {
        return Ok(Vec::new());
    }
    // epoch -> tensor -> (instance, access)
    let mut epochs: Vec<BTreeMap<HbmId, Vec<(u32, Access<'_>)>>> = Vec::new();
    for (i, body) in instances.iter().enumerate() {
        let mut pins = Vec::new();
        epochs_of(program, body, i as u32, (&mut 0, &mut pins), &mut epochs);
    }
    let mut warnings = Vec::new();
    for tensors in &epochs {
        if same_work(tensors, instances.len()) {
            // Every instance makes the same accesses: a kernel that ignores nl.program_id.
            if let Some((_, a)) = tensors.values().flatten().find(|(_, a)| a.write) {
                warnings.push(ValidationWarning {
                    rule: RULE,
                    message: format!(
                        "every program instance of the launch makes the same HBM accesses (the \
                         kernel ignores nl.program_id): the {} instances compute the same work \
                         and write the same elements, which costs {}x the time of one",
                        instances.len(),
                        instances.len()
                    ),
                    loc: a.inst.loc,
                });
            }
            continue;
        }
        for (&tensor, accesses) in tensors {
            check_tensor(program, tensor, accesses, instances.len(), &mut warnings)?;
        }
    }
    Ok(warnings)
}

/// Whether the launch's program instances may run at the same time on the simulator's threads
/// with the outcome of running them in program-id order: there are at least two, none
/// synchronises or uses the engines' random-number generators or registers (state the
/// simulator keeps once for the launch, not per core), the race check above finds nothing to
/// report or warn about (no element of a shared tensor one instance writes is reached by
/// another), no instance holds the argument copy the check skips, and no private scratch
/// tensor is reached by two instances. Used by the simulator's plan (`sim/plan.rs`).
pub(crate) fn instances_independent(program: &Program) -> bool {
    let mut instances = Vec::new();
    collect_instances(program, &program.body, &mut instances);
    if instances.len() < 2 || program.body.iter().any(Stmt::synchronises_within) {
        return false;
    }
    let mut owner: BTreeMap<HbmId, usize> = BTreeMap::new();
    for (i, body) in instances.iter().enumerate() {
        let mut own = true;
        visit_instance(body, &mut |inst| {
            own &= !is_argument_copy(program, &inst.op)
                && !crate::sim::uses_prng(&inst.op)
                && !inst.op.uses_registers();
            for (access, _) in inst.op.hbm_accesses() {
                if program.hbm[access.tensor.0 as usize].kind == HbmKind::PrivateScratch {
                    own &= *owner.entry(access.tensor).or_insert(i) == i;
                }
            }
        });
        if !own {
            return false;
        }
    }
    matches!(check(program), Ok(warnings) if warnings.is_empty())
}

/// Calls `f` on every instruction of an instance's body, at any depth.
fn visit_instance<'p>(body: &'p [Stmt], f: &mut dyn FnMut(&'p Instruction)) {
    for s in body {
        match s {
            Stmt::Inst(inst) => f(inst),
            Stmt::Loop { body, .. } | Stmt::DeviceLoop { body, .. } => visit_instance(body, f),
            Stmt::Alloc { .. } => {}
        }
    }
}

/// Whether every one of `instances` makes the same shared-HBM accesses in this epoch, from the
/// same lines in the same order (the same work done on each core).
fn same_work(tensors: &BTreeMap<HbmId, Vec<(u32, Access<'_>)>>, instances: usize) -> bool {
    type Key<'a> = (SourceLoc, &'a HbmAccess, bool);
    let mut per_instance: Vec<Vec<Key<'_>>> = vec![Vec::new(); instances];
    for accesses in tensors.values() {
        for (i, a) in accesses {
            per_instance[*i as usize].push((a.inst.loc, a.access, a.write));
        }
    }
    per_instance.windows(2).all(|w| w[0] == w[1]) && !per_instance[0].is_empty()
}

/// Whether every one of `instances` makes the same accesses to one tensor in this epoch, all of
/// them writes, from the same lines in the same order: a store the kernel replicates on every
/// core (nki-library's kernels do this when a launch on two cores does not split some work).
/// The stores race, but each core stores what the other does when they compute the same values,
/// so it is a warning rather than an error; a read among them (a read-modify-write) is a race.
fn replicated_stores(accesses: &[(u32, Access<'_>)], instances: usize) -> bool {
    if accesses.iter().any(|(_, a)| !a.write) {
        return false;
    }
    same_sequence(accesses, instances)
}

/// Whether every one of `instances` makes the same accesses to one tensor in this epoch, from the
/// same lines in the same order.
fn same_sequence(accesses: &[(u32, Access<'_>)], instances: usize) -> bool {
    let mut per_instance: Vec<Vec<(SourceLoc, &HbmAccess, bool)>> = vec![Vec::new(); instances];
    for (i, a) in accesses {
        per_instance[*i as usize].push((a.inst.loc, a.access, a.write));
    }
    per_instance.windows(2).all(|w| w[0] == w[1]) && !per_instance[0].is_empty()
}

/// [`replicated_stores`] that each instance then reads back: every instance makes the same
/// stores to one tensor in this epoch (same lines, same order), each element written by one
/// instruction only (so every core writes it the same value when the cores compute the same
/// values), and each instance reads only elements it stored itself, after storing them.
/// Whenever the other core's store lands, the read sees the value its own store wrote: a
/// warning, like the stores alone. A read-modify-write (an element written by two
/// instructions, or read before the instance's own store) stays a race.
fn replicated_stores_read_back(
    program: &Program,
    accesses: &[(u32, Access<'_>)],
    instances: usize,
) -> bool {
    let stores: Vec<(u32, Access<'_>)> = accesses
        .iter()
        .filter(|(_, a)| a.write)
        .map(|(i, a)| (*i, a.clone()))
        .collect();
    if !same_sequence(&stores, instances)
        || accesses
            .iter()
            .any(|(_, a)| a.device || a.access.dynamic.is_some())
    {
        return false;
    }
    let trips: Vec<usize> = program.loops.iter().map(|l| l.trip).collect();
    let mut values = vec![0i64; program.loops.len()];
    let mut runs = Vec::new();
    let mut writes: Vec<(i64, i64, usize)> = Vec::new();
    for instance in 0..instances as u32 {
        let mut written: BTreeMap<i64, i64> = BTreeMap::new();
        let mut touched = 0usize;
        for (k, (_, a)) in accesses.iter().filter(|(i, _)| *i == instance).enumerate() {
            let mut mine = Vec::new();
            let fits = a.each_assignment(&trips, &mut values, BUDGET.touches, &mut |x| {
                runs.clear();
                hbm_runs(a.access, a.access.offset.eval(x), &mut runs);
                mine.extend(runs.iter().copied());
            });
            touched += mine.len();
            if !fits || touched > BUDGET.touches {
                return false;
            }
            if !a.write {
                if !mine.iter().all(|&(lo, hi)| covered(&written, lo, hi)) {
                    return false;
                }
                continue;
            }
            if instance == 0 {
                writes.extend(mine.iter().map(|&(lo, hi)| (lo, hi, k)));
            }
            for (lo, hi) in mine {
                insert_run(&mut written, lo, hi);
            }
        }
    }
    // No element written by two instructions: a sweep over the runs by first element, the
    // furthest-reaching run so far standing for every earlier one (any overlap of two runs of
    // different instructions is found when the later-starting one is reached).
    writes.sort_unstable();
    let mut reach: Option<(i64, usize)> = None;
    for &(lo, hi, k) in &writes {
        match reach {
            Some((end, owner)) if lo <= end && owner != k => return false,
            Some((end, _)) if hi <= end => {}
            _ => reach = Some((hi, k)),
        }
    }
    true
}

/// The bodies of the innermost grid scopes (one per instance), in program-id order.
fn collect_instances<'p>(program: &Program, body: &'p [Stmt], out: &mut Vec<&'p [Stmt]>) {
    for s in body {
        if let Stmt::Loop { var, body } = s
            && matches!(program.loops[var.0 as usize].kind, LoopKind::Grid { .. })
        {
            let before = out.len();
            collect_instances(program, body, out);
            if out.len() == before {
                out.push(body);
            }
        }
    }
}

/// The shared-HBM accesses of `s`, with the loops around each.
fn collect_accesses<'p>(
    program: &Program,
    s: &'p Stmt,
    loops: &mut Vec<LoopVar>,
    device: bool,
    out: &mut Vec<Access<'p>>,
) {
    match s {
        Stmt::Inst(inst) => {
            if is_argument_copy(program, &inst.op) {
                return;
            }
            for (access, write) in inst.op.hbm_accesses() {
                let kind = program.hbm[access.tensor.0 as usize].kind;
                if matches!(kind, HbmKind::Input | HbmKind::PrivateScratch) {
                    continue;
                }
                out.push(Access {
                    access,
                    write,
                    inst,
                    loops: loops.clone(),
                    device,
                    pins: Vec::new(),
                });
            }
        }
        Stmt::Loop { var, body } => {
            loops.push(*var);
            for s in body {
                collect_accesses(program, s, loops, device, out);
            }
            loops.pop();
        }
        Stmt::DeviceLoop { body, .. } => {
            for s in body {
                collect_accesses(program, s, loops, true, out);
            }
        }
        Stmt::Alloc { .. } => {}
    }
}

/// A `dma_copy` of a whole input into a whole output of its shape: the copy the NKI frontend
/// gives an argument some instance writes (the device writes the argument in place).
fn is_argument_copy(program: &Program, op: &Op) -> bool {
    let Op::DmaCopy { .. } = op else {
        return false;
    };
    let accesses = op.hbm_accesses();
    let [(a, a_write), (b, b_write)] = accesses.as_slice() else {
        return false;
    };
    let (src, dst) = match (a_write, b_write) {
        (false, true) => (a, b),
        (true, false) => (b, a),
        _ => return false,
    };
    let (sd, dd) = (
        &program.hbm[src.tensor.0 as usize],
        &program.hbm[dst.tensor.0 as usize],
    );
    sd.kind == HbmKind::Input
        && dd.kind == HbmKind::Output
        && sd.shape == dd.shape
        && src.np * src.nf == sd.numel()
        && dst.np * dst.nf == dd.numel()
}

/// The first race on one tensor in one epoch, if any.
fn check_tensor(
    program: &Program,
    tensor: HbmId,
    accesses: &[(u32, Access<'_>)],
    instances: usize,
    warnings: &mut Vec<ValidationWarning>,
) -> Result<(), NkiError> {
    let writers: Vec<u32> = accesses
        .iter()
        .filter(|(_, a)| a.write)
        .map(|(i, _)| *i)
        .collect();
    if writers.is_empty() || accesses.iter().all(|(i, _)| writers.iter().all(|w| w == i)) {
        // Nothing written, or only one instance touches what it writes.
        return Ok(());
    }
    let name = &program.hbm[tensor.0 as usize].name;
    if replicated_stores_read_back(program, accesses, instances)
        && let Some((_, a)) = accesses.iter().find(|(_, a)| !a.write)
    {
        warnings.push(ValidationWarning {
            rule: RULE,
            message: format!(
                "every program instance stores the same elements of {name} from the same \
                 instructions, then reads back what it stored ({} at {} first): the stores race, \
                 which is harmless only because (and when) the instances compute the same \
                 values, the work of those stores done on every core",
                a.inst.op.name(),
                a.inst.loc
            ),
            loc: a.inst.loc,
        });
        return Ok(());
    }
    if replicated_stores(accesses, instances) {
        let a = &accesses[0].1;
        warnings.push(ValidationWarning {
            rule: RULE,
            message: format!(
                "every program instance stores the same elements of {name} from the same \
                 instructions ({} at {} first), none reading it: the stores race, which is \
                 harmless only because (and when) the instances compute the same values, the \
                 work of those stores done on every core",
                a.inst.op.name(),
                a.inst.loc
            ),
            loc: a.inst.loc,
        });
        return Ok(());
    }
    if let Some((_, a)) = accesses
        .iter()
        .find(|(_, a)| a.access.dynamic.is_some() || a.device)
    {
        warnings.push(ValidationWarning {
            rule: RULE,
            message: format!(
                "{} at {} {} {name} at a runtime offset or in a device loop, and another \
                 program instance writes {name} between the same synchronisations: whether \
                 they race is not decided",
                a.inst.op.name(),
                a.inst.loc,
                if a.write { "writes" } else { "reads" },
            ),
            loc: a.inst.loc,
        });
        return Ok(());
    }
    let trips: Vec<usize> = program.loops.iter().map(|l| l.trip).collect();
    let mut values = vec![0i64; program.loops.len()];
    let mut touches = Vec::new();
    let mut runs = Vec::new();
    for (k, (instance, a)) in accesses.iter().enumerate() {
        let kind = if a.write { Use::Write } else { Use::Read };
        let fits = a.each_assignment(&trips, &mut values, BUDGET.touches, &mut |x| {
            runs.clear();
            hbm_runs(a.access, a.access.offset.eval(x), &mut runs);
            touches.extend(runs.iter().map(|&(lo, hi)| Touch {
                lo,
                hi,
                iteration: *instance,
                access: k as u32,
                kind,
            }));
        });
        if !fits || touches.len() > BUDGET.touches {
            warnings.push(undecided(a.inst, name));
            return Ok(());
        }
    }
    match first_conflict(touches, BUDGET) {
        Err(()) => {
            warnings.push(undecided(accesses[0].1.inst, name));
            Ok(())
        }
        Ok(None) => Ok(()),
        Ok(Some((x, y))) => Err(race(program, tensor, accesses, x, y)),
    }
}

fn undecided(inst: &Instruction, name: &str) -> ValidationWarning {
    ValidationWarning {
        rule: RULE,
        message: format!(
            "the program instances reach {name} in more places than the race check enumerates: \
             whether they race is not decided"
        ),
        loc: inst.loc,
    }
}

fn race(
    program: &Program,
    tensor: HbmId,
    accesses: &[(u32, Access<'_>)],
    x: Touch,
    y: Touch,
) -> NkiError {
    let (first, second) = if x.iteration <= y.iteration {
        (x, y)
    } else {
        (y, x)
    };
    let (fa, sa) = (
        &accesses[first.access as usize].1,
        &accesses[second.access as usize].1,
    );
    let decl = &program.hbm[tensor.0 as usize];
    let element = first.lo.max(second.lo);
    let verb = |w: bool| if w { "writes" } else { "reads" };
    let why = if fa.write && sa.write {
        "two instances write the same element"
    } else {
        "one instance reads what another writes"
    };
    violation(
        RULE,
        "no element of a shared tensor written by one program instance and touched by another \
         between two synchronisations",
        format!(
            "instances {} and {} share element {element} of {}",
            first.iteration, second.iteration, decl.name
        ),
        format!("{} / {}", fa.inst.op.name(), sa.inst.op.name()),
        format!(
            "program instance {} {} element {element} of {} ({} at {}) and instance {} {} it \
             ({} at {}) with no core_barrier between: {why}, and the instances run at the same \
             time on the device. Give each instance its own region (split by \
             nl.program_id), or put a nisa.core_barrier between the accesses",
            first.iteration,
            verb(fa.write),
            decl.name,
            fa.inst.op.name(),
            fa.inst.loc,
            second.iteration,
            verb(sa.write),
            sa.inst.op.name(),
            sa.inst.loc
        ),
        sa.inst.loc,
    )
}
