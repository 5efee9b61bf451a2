//! The CPU simulator: executes a validated [`Program`] on caller-owned buffers.
//!
//! Numerics follow the hardware (fp32 engines, round-to-nearest-even on narrowing writes, fp32
//! PSUM accumulation, NaN-poisoned fresh tiles). Iterations of an `affine_range` loop run in
//! parallel (rayon) when the simulator can prove they are independent: the body writes only
//! tiles it allocates and HBM regions disjoint across iterations; the rows of a large elementwise
//! instruction are split across the same threads. Results are the same bits whatever the
//! thread count. Parallel loops run on the simulator's own thread pool, which is
//! rebuilt in a process forked from one that used it (`sim/pool.rs`).

mod band;
mod bitvec;
pub mod cores;
mod dma;
mod exec;
mod forward;
mod gather;
mod gemm;
mod gpsimd;
mod hbm;
mod indirect;
mod lockstep;
mod matmul;
mod mx;
mod order;
mod parallel;
mod partition;
mod plan;
mod pool;
mod random;
mod register;
mod rounding;
mod row_math;
mod rows;
mod scalar;
mod selection;
mod store;
mod strided;
pub mod threads;
mod transpose;
mod trap;
mod vector;

use crate::dtype::DType;
use crate::error::NkiError;
use crate::ir::{HbmDecl, HbmKind, IndexDomain, Instruction, Program, Stmt, TileId};
use exec::{Ctx, execute};
use hbm::HbmBuffer;
use rows::Scratch;
use std::ops::Range;
use store::TileStore;

pub use band::plan::{BandPolicy, BandRegion};
pub use order::IterationOrder;
pub use parallel::parallel_loops;
pub use plan::{
    ExecPlan, HOST_MACS_PER_ELEMENT, HOST_SPLIT_MIN_WORK, Placement, SPLIT_MIN_WORK,
    SPLIT_MIN_WORK_ENV, set_split_min_work, split_min_work,
};
pub(crate) use random::uses_prng;
pub use register::MAX_DEVICE_ITERATIONS;

/// A read-only input buffer: little-endian elements of `dtype`, row-major `shape`.
#[derive(Clone, Copy, Debug)]
pub struct HostTensor<'a> {
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: &'a [usize],
    /// The bytes.
    pub data: &'a [u8],
}

/// A writable output buffer.
#[derive(Debug)]
pub struct HostTensorMut<'a> {
    /// Element type.
    pub dtype: DType,
    /// Shape.
    pub shape: &'a [usize],
    /// The bytes.
    pub data: &'a mut [u8],
}

/// Simulator switches.
#[derive(Clone, Copy, Debug)]
pub struct SimOptions {
    /// Run provably independent `affine_range` iterations on the rayon pool.
    pub parallel: bool,
    /// How straight-line runs of partition-local instructions are executed band by band (the
    /// bits never depend on it; tests vary it to prove that).
    pub bands: BandPolicy,
    /// The order `affine_range` iterations run in ([`IterationOrder`]; program order by
    /// default).
    pub order: IterationOrder,
    /// Stop at the first instruction that makes a finite tile element NaN or infinite, with a
    /// `SimulationError` naming it and what it read (`sim/trap.rs`). Runs every instruction
    /// whole, on one thread.
    pub trap_nonfinite: bool,
    /// Let an instruction hand its rows straight to the store after it when the plan pairs
    /// them ([`ExecPlan::forward`], `sim/forward.rs`; the bits never depend on it, tests vary
    /// it to prove that). The trap turns it off.
    pub forward_stores: bool,
}

impl Default for SimOptions {
    fn default() -> Self {
        SimOptions {
            parallel: true,
            bands: BandPolicy::default(),
            order: IterationOrder::Program,
            trap_nonfinite: false,
            forward_stores: true,
        }
    }
}

fn check_buffer(
    decl: &crate::ir::HbmDecl,
    dtype: DType,
    shape: &[usize],
    len: usize,
) -> Result<(), NkiError> {
    if decl.dtype != dtype || decl.shape != shape || len != decl.numel() * dtype.size_bytes() {
        return Err(NkiError::Buffers(format!(
            "buffer for {} is {dtype} {shape:?} ({len} bytes), but the program expects {} {:?} ({} bytes)",
            decl.name,
            decl.dtype,
            decl.shape,
            decl.numel() * decl.dtype.size_bytes()
        )));
    }
    Ok(())
}

/// [`simulate`] into freshly allocated output buffers: `inputs` are the input bytes in
/// parameter order (shapes and dtypes are the program's); returns the outputs' bytes in return
/// order.
pub fn simulate_to_vecs(
    program: &Program,
    inputs: &[&[u8]],
    opts: SimOptions,
) -> Result<Vec<Vec<u8>>, NkiError> {
    to_vecs(program, inputs, |host_in, host_out| {
        simulate(program, host_in, host_out, opts)
    })
}

/// Runs `run` on `inputs` (described by `program`'s input declarations) and on fresh zeroed
/// buffers for `program`'s outputs, and returns those buffers.
pub(crate) fn to_vecs(
    program: &Program,
    inputs: &[&[u8]],
    run: impl FnOnce(&[HostTensor<'_>], &mut [HostTensorMut<'_>]) -> Result<(), NkiError>,
) -> Result<Vec<Vec<u8>>, NkiError> {
    let decls: Vec<_> = program.inputs().map(|(_, d)| d).collect();
    if decls.len() != inputs.len() {
        return Err(NkiError::Buffers(format!(
            "kernel {} takes {} inputs, got {}",
            program.name,
            decls.len(),
            inputs.len()
        )));
    }
    let host_in: Vec<HostTensor<'_>> = decls
        .iter()
        .zip(inputs)
        .map(|(d, data)| HostTensor {
            dtype: d.dtype,
            shape: &d.shape,
            data,
        })
        .collect();
    let outs: Vec<_> = program
        .outputs
        .iter()
        .map(|o| {
            program.hbm.get(o.0 as usize).ok_or_else(|| {
                NkiError::Buffers(format!(
                    "kernel {}: output tensor #{} is not declared",
                    program.name, o.0
                ))
            })
        })
        .collect::<Result<_, _>>()?;
    let mut bufs: Vec<Vec<u8>> = outs.iter().map(|d| zeroed(d)).collect::<Result<_, _>>()?;
    let mut host_out: Vec<HostTensorMut<'_>> = outs
        .iter()
        .zip(bufs.iter_mut())
        .map(|(d, data)| HostTensorMut {
            dtype: d.dtype,
            shape: &d.shape,
            data,
        })
        .collect();
    run(&host_in, &mut host_out)?;
    Ok(bufs)
}

/// A zeroed buffer for tensor `d`, or an error when the host cannot allocate it (rather than
/// the process aborting, as `vec!` would).
fn zeroed(d: &HbmDecl) -> Result<Vec<u8>, NkiError> {
    let too_large = || {
        NkiError::Buffers(format!(
            "cannot allocate {} {} of shape {:?} ({})",
            if d.kind.is_scratch() {
                "scratch tensor"
            } else {
                "output"
            },
            d.name,
            d.shape,
            d.dtype
        ))
    };
    let bytes = d
        .shape
        .iter()
        .try_fold(d.dtype.size_bytes(), |n, &dim| n.checked_mul(dim))
        .ok_or_else(too_large)?;
    let mut buf = Vec::new();
    buf.try_reserve_exact(bytes).map_err(|_| too_large())?;
    buf.resize(bytes, 0);
    Ok(buf)
}

/// Every value of an integer input against its declared index domain (the data of an input
/// whose dtype and length `check_buffer` accepted).
fn check_indices(
    op: &str,
    decl: &HbmDecl,
    domain: &IndexDomain,
    data: &[u8],
) -> Result<(), NkiError> {
    let bad = data
        .chunks_exact(4)
        .map(|b| i64::from(i32::from_le_bytes([b[0], b[1], b[2], b[3]])))
        .enumerate()
        .find(|(_, v)| !domain.admits(*v));
    let Some((flat, value)) = bad else {
        return Ok(());
    };
    let mut index = Vec::with_capacity(decl.shape.len());
    let mut rest = flat;
    for &d in decl.shape.iter().rev() {
        index.push(rest % d.max(1));
        rest /= d.max(1);
    }
    index.reverse();
    let position: Vec<String> = index.iter().map(ToString::to_string).collect();
    Err(NkiError::IndexOutOfRange {
        op: op.to_string(),
        param: decl.name.clone(),
        position: format!("[{}]", position.join(", ")),
        value,
        lo: domain.lo,
        hi: domain.hi,
        except: domain.except,
    })
}

/// Executes `program` reading `inputs` (in parameter order) and writing `outputs` (in return
/// order). Buffers must match the program's shapes and dtypes exactly; nothing is copied.
///
/// The program is analysed on every call ([`ExecPlan`]); a kernel compiled once and run many
/// times saves that with [`crate::Compiled::simulate`], which uses the plan made at compile time.
pub fn simulate(
    program: &Program,
    inputs: &[HostTensor<'_>],
    outputs: &mut [HostTensorMut<'_>],
    opts: SimOptions,
) -> Result<(), NkiError> {
    // The trap compares tiles instruction by instruction: no bands, no threads.
    let (plan, parallel) = if opts.trap_nonfinite {
        (Plan::Fresh(BandPolicy::never()), false)
    } else {
        (Plan::Fresh(opts.bands), opts.parallel)
    };
    // An unrolled affine_range is permuted as statements; a traced-once one by the runner.
    let reordered = order::reorder_unrolled(program, opts.order);
    let program = reordered.as_ref().unwrap_or(program);
    let run = Run {
        parallel,
        order: opts.order,
        trap: opts.trap_nonfinite,
        forward: opts.forward_stores && !opts.trap_nonfinite,
    };
    simulate_planned(program, plan, inputs, outputs, run)
}

/// How [`simulate_planned`] runs a program (the [`SimOptions`] a plan does not carry).
#[derive(Clone, Copy, Debug)]
pub(crate) struct Run {
    /// Run provably independent loop iterations on the pool.
    pub(crate) parallel: bool,
    /// The order of affine iterations run one after the other.
    pub(crate) order: IterationOrder,
    /// The non-finite trap (`sim/trap.rs`).
    pub(crate) trap: bool,
    /// Forward stores where the plan pairs them (`sim/forward.rs`).
    pub(crate) forward: bool,
}

/// Where [`simulate_planned`] gets its plan.
pub(crate) enum Plan<'p> {
    /// One made from the program being simulated, earlier (a [`crate::Compiled`]'s).
    Made(&'p ExecPlan),
    /// One to make now, with this band policy (after the buffers are checked).
    Fresh(BandPolicy),
}

/// [`simulate`] with `plan`, which must be made from `program` itself: the plan is what proves
/// the concurrent writes of parallel loops and bands disjoint. Callers outside this module pass
/// a [`crate::Compiled`]'s own program and plan.
pub(crate) fn simulate_planned(
    program: &Program,
    plan: Plan<'_>,
    inputs: &[HostTensor<'_>],
    outputs: &mut [HostTensorMut<'_>],
    run: Run,
) -> Result<(), NkiError> {
    let Run {
        parallel,
        order,
        trap,
        forward,
    } = run;
    let n_inputs = program.inputs().count();
    if inputs.len() != n_inputs || outputs.len() != program.outputs.len() {
        return Err(NkiError::Buffers(format!(
            "kernel {} takes {} inputs and {} outputs, got {} and {}",
            program.name,
            n_inputs,
            program.outputs.len(),
            inputs.len(),
            outputs.len()
        )));
    }
    let mut hbm: Vec<Option<HbmBuffer<'_>>> = vec![None; program.hbm.len()];
    for ((id, decl), t) in program.inputs().zip(inputs) {
        check_buffer(decl, t.dtype, t.shape, t.data.len())?;
        if let Some(domain) = &decl.domain {
            check_indices(&program.name, decl, domain, t.data)?;
        }
        hbm[id.0 as usize] = Some(HbmBuffer::input(t.data, t.dtype));
    }
    // Constants: read-only, from the values the program carries.
    for (id, decl) in program.constants() {
        let data = decl.values.as_deref().unwrap_or(&[]);
        check_buffer(decl, decl.dtype, &decl.shape, data.len())?;
        hbm[id.0 as usize] = Some(HbmBuffer::input(data, decl.dtype));
    }
    for (id, t) in program.outputs.iter().zip(outputs.iter_mut()) {
        let decl = program.hbm.get(id.0 as usize).ok_or_else(|| {
            NkiError::Buffers(format!(
                "kernel {}: output tensor #{} is not declared",
                program.name, id.0
            ))
        })?;
        check_buffer(decl, t.dtype, t.shape, t.data.len())?;
        let slot = &mut hbm[id.0 as usize];
        if slot.is_some() || decl.kind != HbmKind::Output {
            // One buffer per tensor: a tensor listed twice would leave one caller buffer
            // unwritten.
            return Err(NkiError::Buffers(format!(
                "kernel {}: tensor {} is listed twice, or is not an output",
                program.name, decl.name
            )));
        }
        *slot = Some(HbmBuffer::output(t.data, t.dtype));
    }
    // Scratch (`private_hbm`, and `shared_hbm` tensors the kernel does not return): zeroed
    // storage of its own for this call.
    let mut scratch: Vec<(usize, Vec<u8>)> = program
        .hbm
        .iter()
        .enumerate()
        .filter(|(_, d)| d.kind.is_scratch())
        .map(|(i, d)| Ok((i, zeroed(d)?)))
        .collect::<Result<_, NkiError>>()?;
    for (i, bytes) in &mut scratch {
        hbm[*i] = Some(HbmBuffer::output(bytes, program.hbm[*i].dtype));
    }
    let hbm: Vec<HbmBuffer<'_>> = hbm
        .into_iter()
        .enumerate()
        .map(|(i, b)| {
            b.ok_or_else(|| {
                NkiError::Buffers(format!(
                    "no buffer for {} ({:?})",
                    program.hbm[i].name, program.hbm[i].kind
                ))
            })
        })
        .collect::<Result<_, _>>()?;
    debug_assert!(
        program
            .hbm
            .iter()
            .zip(&hbm)
            .all(|(d, b)| d.kind.is_writable() == b.writable)
    );
    let fresh;
    let plan = match plan {
        Plan::Made(plan) => plan,
        Plan::Fresh(policy) => {
            fresh = ExecPlan::with_bands(program, policy);
            &fresh
        }
    };
    debug_assert!(plan.fits(program), "a plan made for another program");
    // The pool runs parallel loops, and splits the rows of large instructions elsewhere.
    // The pool, or the host's threads when it lent some (`sim/threads.rs`).
    let on_host = parallel && threads::host().is_some();
    let pool = if parallel && !on_host {
        pool::current()
    } else {
        None
    };
    let split = pool.is_some() || on_host;
    let parallel = split.then_some(plan.parallel.as_slice());
    // Setting the generators up costs microseconds: only for a program that uses them.
    let prng = std::sync::Mutex::new(if plan.uses_prng {
        random::PrngState::default()
    } else {
        random::PrngState::unused()
    });
    let registers = std::sync::Mutex::new(register::RegisterFile::new(program.registers.len()));
    let runner = Runner {
        program,
        hbm: &hbm,
        split,
        instances_together: split
            && plan.instances_together
            && (!on_host || plan.instances_balanced),
        parallel,
        poison: &plan.poison,
        release: &plan.release,
        forward: forward.then_some(plan.forward.as_slice()),
        loop_block: &plan.loop_block,
        device_block: &plan.device_block,
        bands: &plan.bands,
        band_local: &plan.band_local,
        band_partitions: plan.band_partitions,
        prng: &prng,
        registers: &registers,
        order,
        lockstep: lockstep::synchronises(program),
        trap,
    };
    let mut store = TileStore::new(program);
    let mut env = vec![0i64; program.loops.len()];
    let mut run = move || {
        runner.block(
            &program.body,
            0,
            &mut store,
            &mut env,
            &mut Scratch::default(),
        )
    };
    match pool {
        Some(pool) => pool.install(run),
        None => run(),
    }
}

struct Runner<'r, 'a> {
    program: &'r Program,
    hbm: &'r [HbmBuffer<'a>],
    split: bool,
    /// Run sibling launch-grid instances at the same time ([`ExecPlan::instances_together`]).
    instances_together: bool,
    /// Which loops run their iterations on the pool (`None`: none, the run is on this thread).
    parallel: Option<&'r [bool]>,
    poison: &'r [bool],
    release: &'r [Vec<Vec<TileId>>],
    /// Per block, per statement: the plan's store-forwarding pairs ([`forward`]); `None` when
    /// stores run as themselves.
    forward: Option<&'r [Vec<bool>]>,
    loop_block: &'r [usize],
    device_block: &'r [usize],
    bands: &'r [Vec<BandRegion>],
    band_local: &'r [bool],
    band_partitions: usize,
    /// The engines' random-number generator states, from the documented default at the start
    /// of every simulation (`sim/random.rs`).
    prng: &'r std::sync::Mutex<random::PrngState>,
    /// The registers, unwritten at the start of every simulation (`sim/register.rs`).
    registers: &'r register::Registers,
    /// The order of the iterations of affine loops run one after the other.
    order: IterationOrder,
    /// Whether the program synchronises cores (`core_barrier`, `sendrecv`): its launch-grid
    /// instances then run in lockstep.
    lockstep: bool,
    /// The non-finite trap: every instruction's written tiles are compared before and after.
    trap: bool,
}

impl<'a> Runner<'_, 'a> {
    /// Gives back the storage of the tiles of `block` whose last use is one of `statements`
    /// (the plan's release points), once those statements have run.
    fn release_after(&self, block: usize, statements: Range<usize>, store: &mut TileStore<'_>) {
        for &tile in self.release[block][statements].iter().flatten() {
            store.release(tile);
        }
    }

    /// Whether `s` is a launch-grid loop (a program instance, or an axis of them).
    fn is_grid_loop(&self, s: &Stmt) -> bool {
        matches!(s, Stmt::Loop { var, .. }
            if self.program.loops[var.0 as usize].kind.grid_axis().is_some())
    }

    /// Runs sibling launch-grid loops `run` at the same time, each on a thread of the pool
    /// with its own tiles (a core's SBUF and PSUM), sharing HBM: the plan proved that no
    /// instance reaches what another writes. Errors are reported in program-id order, the
    /// first as a run in that order would meet it.
    fn instances_at_once(
        &self,
        run: &[Stmt],
        store: &TileStore<'_>,
        env: &[i64],
    ) -> Result<(), NkiError> {
        let results: Vec<Result<(), NkiError>> = threads::map(
            run.len(),
            || (),
            |_, k| {
                let Stmt::Loop { var, body } = &run[k] else {
                    unreachable!("a run of grid loops");
                };
                let v = var.0 as usize;
                let (trip, inner) = (self.program.loops[v].trip, self.loop_block[v]);
                let mut child = store.child();
                let mut env = env.to_vec();
                let mut scratch = Scratch::default();
                for k in 0..trip {
                    env[v] = k as i64;
                    self.block(body, inner, &mut child, &mut env, &mut scratch)?;
                }
                Ok(())
            },
        );
        results.into_iter().collect()
    }

    /// `t<id>`, with the tile's name when it has one (for messages).
    fn tile_name(&self, tile: TileId) -> String {
        match self.program.tiles.get(tile.0 as usize) {
            Some(decl) if !decl.name.is_empty() && decl.name != format!("t{}", tile.0) => {
                format!("t{} ({})", tile.0, decl.name)
            }
            _ => format!("t{}", tile.0),
        }
    }

    /// Runs a device loop: its body once per iteration, in order, the iterations decided by
    /// the registers as they run (a counted loop reads its bounds once, when it starts, and
    /// writes its index register before each iteration; a `while` tests its condition before
    /// each one).
    fn device_loop<'p>(
        &self,
        id: crate::ir::DeviceLoopId,
        body: &[Stmt],
        store: &mut TileStore<'p>,
        env: &mut [i64],
        scratch: &mut Scratch,
    ) -> Result<(), NkiError>
    where
        'a: 'p,
    {
        use crate::ir::LoopControl;
        let decl = &self.program.device_loops[id.0 as usize];
        let inner = self.device_block[id.0 as usize];
        let err = |message: String| NkiError::Simulation {
            message,
            instruction: "device loop",
            loc: decl.loc,
        };
        let too_many = || {
            err(format!(
                "the loop ran {} iterations without ending",
                register::MAX_DEVICE_ITERATIONS
            ))
        };
        let mut runs = 0u64;
        match &decl.control {
            LoopControl::Range {
                start,
                stop,
                step,
                index,
            } => {
                let start = register::bound(self.registers, start, &err)?;
                let stop = register::bound(self.registers, stop, &err)?;
                let mut i = start;
                while i < stop {
                    runs += 1;
                    if runs > register::MAX_DEVICE_ITERATIONS {
                        return Err(too_many());
                    }
                    register::write(self.registers, *index, Some(i as i32));
                    self.block(body, inner, store, env, scratch)?;
                    i += i64::from((*step).max(1));
                }
            }
            LoopControl::While { cond } => {
                let unwritten = || {
                    err(format!(
                        "condition register r{} is read before anything wrote it",
                        cond.0
                    ))
                };
                while register::read(self.registers, *cond, unwritten)? != 0 {
                    runs += 1;
                    if runs > register::MAX_DEVICE_ITERATIONS {
                        return Err(too_many());
                    }
                    self.block(body, inner, store, env, scratch)?;
                }
            }
        }
        Ok(())
    }

    fn block<'p>(
        &self,
        body: &[Stmt],
        block: usize,
        store: &mut TileStore<'p>,
        env: &mut [i64],
        scratch: &mut Scratch,
    ) -> Result<(), NkiError>
    where
        'a: 'p,
    {
        self.block_from(body, block, 0, false, store, env, scratch)
            .map(|_| ())
    }

    /// Runs `body` (block `block` of the plan) from statement `start`: to its end (`None`), or,
    /// with `stop_at_sync`, up to the first multi-core synchronisation at this level (its
    /// index: the statement is not run). Sibling launch-grid instances of a program that
    /// synchronises run in lockstep (`lockstep.rs`).
    #[allow(clippy::too_many_arguments)]
    fn block_from<'p>(
        &self,
        body: &[Stmt],
        block: usize,
        start: usize,
        stop_at_sync: bool,
        store: &mut TileStore<'p>,
        env: &mut [i64],
        scratch: &mut Scratch,
    ) -> Result<Option<usize>, NkiError>
    where
        'a: 'p,
    {
        let mut regions = self.bands[block]
            .iter()
            .skip_while(|r| r.start < start)
            .peekable();
        let mut i = start;
        while let Some(s) = body.get(i) {
            if stop_at_sync && (lockstep::is_sync(s) || lockstep::holds_sync(s)) {
                return Ok(Some(i));
            }
            if self.lockstep && lockstep::is_grid_instance(self.program, s) {
                i = self.lockstep(body, block, i, store, env, scratch)?;
                continue;
            }
            if self.instances_together && self.is_grid_loop(s) {
                // The run of sibling instances from here, up to a banded run's start.
                let run = body[i..]
                    .iter()
                    .enumerate()
                    .take_while(|&(k, s)| {
                        self.is_grid_loop(s)
                            && (k == 0 || regions.peek().is_none_or(|r| r.start != i + k))
                    })
                    .count();
                if run > 1 {
                    self.instances_at_once(&body[i..i + run], store, env)?;
                    self.release_after(block, i..i + run, store);
                    i += run;
                    continue;
                }
            }
            if let Some(region) = regions.next_if(|r| r.start == i) {
                let frame = band::Frame {
                    program: self.program,
                    hbm: self.hbm,
                    env,
                    poison: self.poison,
                    release: &self.release[block],
                    forward: self.forward.map(|f| f[block].as_slice()),
                    local: self.band_local,
                    threads: if self.split { threads::count() } else { 1 },
                    band_partitions: self.band_partitions,
                };
                band::run_region(&frame, body, region, store)?;
                self.release_after(block, region.start..region.end, store);
                i = region.end;
                continue;
            }
            let mut next = i + 1;
            match s {
                Stmt::Alloc { tile } => store.allocate(
                    *tile,
                    self.program.tiles[tile.0 as usize].partitions,
                    // The trap tells never-written elements by their poison, so under it
                    // every fresh tile is poisoned: a reused buffer may hold the NaN an
                    // earlier run computed at the very element the trap is looking for.
                    self.poison[tile.0 as usize] || self.trap,
                ),
                Stmt::Inst(inst) => {
                    // Not when a banded run starts at the paired statement: it runs there.
                    let store_after = (self.forward.is_some_and(|f| f[block][i])
                        && regions.peek().is_none_or(|r| r.start != i + 1))
                    .then(|| &body[i + 1]);
                    if self.instruction(inst, store_after, store, env, scratch)? {
                        next = i + 2;
                    }
                }
                Stmt::Loop { var, body } => {
                    let v = var.0 as usize;
                    let (trip, inner) = (self.program.loops[v].trip, self.loop_block[v]);
                    if self.parallel.is_some_and(|p| p[v]) {
                        let parent: &TileStore<'_> = store;
                        let results: Vec<Result<(), NkiError>> = threads::map(
                            trip,
                            || (parent.child(), env.to_vec(), Scratch::default()),
                            |(child, env, scratch), i| {
                                env[v] = i as i64;
                                self.block(body, inner, child, env, scratch)
                            },
                        );
                        results.into_iter().collect::<Result<(), _>>()?;
                    } else if self.order != IterationOrder::Program
                        && self.program.loops[v].kind == crate::ir::LoopKind::Affine
                    {
                        // The salt: this loop and the values of the loops around it.
                        env[v] = 0;
                        let salt = env
                            .iter()
                            .fold(v as u64, |h, &x| order::splitmix(h ^ x as u64));
                        for i in self.order.permutation(trip, salt) {
                            env[v] = i as i64;
                            self.block(body, inner, store, env, scratch)?;
                        }
                    } else {
                        for i in 0..trip {
                            env[v] = i as i64;
                            self.block(body, inner, store, env, scratch)?;
                        }
                    }
                }
                Stmt::DeviceLoop { id, body } => {
                    self.device_loop(*id, body, store, env, scratch)?;
                }
            }
            self.release_after(block, i..next, store);
            i = next;
        }
        Ok(None)
    }

    /// Runs one instruction; `store_after` is the statement after it when the plan paired
    /// them ([`forward`]): the instruction's rows then go straight to that store, when its
    /// checks pass here, or a transpose goes straight into its copy's destination. Returns
    /// whether the statement after it ran too.
    fn instruction<'p>(
        &self,
        inst: &Instruction,
        store_after: Option<&Stmt>,
        store: &mut TileStore<'p>,
        env: &[i64],
        scratch: &mut Scratch,
    ) -> Result<bool, NkiError>
    where
        'a: 'p,
    {
        let ctx = Ctx {
            hbm: self.hbm,
            split: self.split,
            env,
            inst,
            prng: Some(self.prng),
            registers: Some(self.registers),
            forward: None,
        };
        if let Some(transposed) = store_after.and_then(|next| forward::transpose_pair(inst, next)) {
            execute(
                &Ctx {
                    inst: &transposed,
                    ..ctx
                },
                store,
                scratch,
            )?;
            return Ok(true);
        }
        if let Some(Stmt::Inst(dma)) = store_after
            && let Some(ran) = forward::execute_forwarded(&ctx, dma, store, scratch)?
        {
            return Ok(ran);
        }
        let before = self.trap.then(|| trap::before(inst, &mut *store));
        execute(&ctx, store, scratch)?;
        if let Some(before) = before {
            trap::after(inst, store, before, |t| self.tile_name(t))?;
        }
        Ok(false)
    }
}
