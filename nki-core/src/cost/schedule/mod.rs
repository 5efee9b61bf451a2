//! Scheduling a program on the engines of one NeuronCore: the program is walked with its loops
//! unrolled (as NKI specialises them), each compute instruction goes to its engine in program
//! order, each DMA transfer to the ⌈partitions / 8⌉ DMA engines where it can start first (the
//! engines run transfers in the order their producers trigger them), and starts when its
//! engines are free and
//! the instructions it depends on through overlapping regions of tiles (read-after-write,
//! write-after-read, write-after-write; see `regions`) and HBM tensors have finished. A tile allocated inside a loop is a fresh
//! buffer each iteration (the compiler multi-buffers them), so independent iterations overlap.
//! The instances of a launch grid ([`crate::ir::LoopKind::Grid`]) are distributed round robin
//! over the physical cores (`Scheduler::on_core`); the instances of one core run one after the
//! other, each starting when the previous one has finished.

mod durations;
mod regions;

use super::queue::Queue;
use super::table::CostTable;
use super::{Charged, Engine, Slice};
use crate::dtype::DType;
use crate::ir::{Buffer, DgeMode, Op, Program, Stmt, TileId, TileRegion};
use regions::{Rect, Regions, TileKey};
use std::collections::HashMap;

/// The iterations the cost model charges a device loop: a range's trip count when both bounds
/// are immediates, else one (its real count is only known at run time).
pub(crate) fn device_loop_trip(control: &crate::ir::LoopControl) -> usize {
    control.static_trip().unwrap_or(1)
}

/// One HBM access of an output tensor: flat element range `lo..=hi`, when it ends, which slice.
#[derive(Clone, Copy)]
struct Access {
    lo: i64,
    hi: i64,
    end: f64,
    by: Option<usize>,
}

/// Work done, per resource, for the roofline.
#[derive(Clone, Copy, Debug, Default, PartialEq)]
pub(crate) struct Work {
    /// Tensor-engine FLOPs.
    pub flops: f64,
    /// Time the tensor engine needs at peak for those FLOPs, ns.
    pub tensor_min_ns: f64,
    /// Bytes read from HBM.
    pub hbm_read: f64,
    /// Bytes written to HBM.
    pub hbm_write: f64,
    /// Vector-engine time at peak rate without fixed costs, ns.
    pub vector_min_ns: f64,
    /// Scalar-engine time at peak rate without fixed costs, ns.
    pub scalar_min_ns: f64,
    /// GpSimd time at peak rate without fixed costs, ns (its elementwise arithmetic; `memset`
    /// and `iota` are setup, not counted).
    pub gpsimd_min_ns: f64,
}

pub(crate) struct Scheduler<'p> {
    program: &'p Program,
    table: CostTable,
    trips: Vec<usize>,
    values: Vec<i64>,
    instances: Vec<u32>,
    /// The instance of each tile live in the current iteration.
    current: HashMap<TileId, u32>,
    /// What each tile buffer's regions are waiting for.
    tiles: Regions,
    /// Per output tensor: the flat element ranges written and read so far, with their end
    /// times and slices.
    hbm_writes: HashMap<u32, Vec<Access>>,
    hbm_reads: HashMap<u32, Vec<Access>>,
    engine_free: HashMap<Engine, (f64, Option<usize>)>,
    /// Per DMA engine, when it is free (see [`Queue`]).
    queues: Vec<Queue>,
    /// The stationary operand the tensor engine holds: its buffer, rectangle and the slice
    /// that last wrote it when it was loaded (a matmul with the same one skips LoadStationary).
    stationary: Option<(TileKey, Rect, Option<usize>)>,
    /// The shortest transfer the program makes: an idle gap shorter than it is never used.
    min_dma_ns: f64,
    pub(crate) slices: Vec<Slice>,
    pub(crate) work: Work,
    /// The physical core scheduled and how many there are: this scheduler runs the launch
    /// grid's instances `k` with `k % cores == core` and skips the others.
    core: (usize, usize),
    /// Grid instances met so far (in program-id order).
    instances_seen: usize,
    /// When the current grid instance may start (the end of this core's previous one) and the
    /// slice that ended it.
    instance_start: (f64, Option<usize>),
}

impl<'p> Scheduler<'p> {
    pub(crate) fn new(program: &'p Program, table: CostTable) -> Scheduler<'p> {
        Scheduler {
            program,
            table,
            trips: program.trips(),
            values: vec![0; program.loops.len()],
            instances: vec![0; program.tiles.len()],
            current: HashMap::new(),
            tiles: Regions::default(),
            hbm_writes: HashMap::new(),
            hbm_reads: HashMap::new(),
            engine_free: HashMap::new(),
            queues: vec![Queue::default(); table.dma_engines.max(1)],
            stationary: None,
            min_dma_ns: 0.0,
            slices: Vec::new(),
            work: Work::default(),
            core: (0, 1),
            instances_seen: 0,
            instance_start: (0.0, None),
        }
    }

    /// Schedules only the grid instances of physical core `core` of `cores` (round robin in
    /// program-id order).
    pub(crate) fn on_core(mut self, core: usize, cores: usize) -> Self {
        self.core = (core, cores.max(1));
        self
    }

    pub(crate) fn run(&mut self) {
        let program = self.program;
        // The shortest transfer, priced without counting its work.
        let work = self.work;
        let mut min = f64::INFINITY;
        program.visit_instructions(&mut |inst, _| {
            if let (Engine::Dma(_), d) = self.cost(&inst.op) {
                min = min.min(d);
            }
        });
        self.work = work;
        self.min_dma_ns = min;
        self.walk(&program.body);
    }

    fn walk(&mut self, body: &[Stmt]) {
        for s in body {
            match s {
                Stmt::Alloc { tile } => {
                    let n = &mut self.instances[tile.0 as usize];
                    *n += 1;
                    self.current.insert(*tile, *n);
                }
                Stmt::Inst(inst) => self.schedule(&inst.op, inst.loc),
                Stmt::Loop { var, body } => {
                    let trip = self.trips[var.0 as usize];
                    // The innermost grid axis: each iteration is one program instance.
                    let instance = self.program.loops[var.0 as usize]
                        .kind
                        .grid_axis()
                        .is_some_and(|axis| axis + 1 == self.program.grid.len());
                    for i in 0..trip {
                        if instance {
                            let k = self.instances_seen;
                            self.instances_seen += 1;
                            if k % self.core.1 != self.core.0 {
                                continue;
                            }
                            // Instances on one core run one after the other.
                            self.instance_start = self.all_done();
                        }
                        self.values[var.0 as usize] = i as i64;
                        self.walk(body);
                    }
                }
                // A device loop runs as often as its registers say at run time: a range with
                // immediate bounds is charged its trip count, any other loop one iteration
                // (the cost of one pass through its body; docs/cost-model.md).
                Stmt::DeviceLoop { id, body } => {
                    let control = &self.program.device_loops[id.0 as usize].control;
                    for _ in 0..device_loop_trip(control) {
                        self.walk(body);
                    }
                }
            }
        }
    }

    /// Places a transfer that may start at `ready` and keeps `engines` DMA engines busy for
    /// `duration` each: on the engines where it can start first, in the earliest gap at or
    /// after `ready` common to all of them (engines run transfers in the order their producers
    /// trigger them, not in program order, so a store waiting for its data does not hold up a
    /// later load). Returns the engines (a bit mask), the start, and the slice an engine was
    /// busy with just before (if the transfer waited for it).
    fn place_dma(&self, ready: f64, duration: f64, engines: usize) -> (u16, f64, Option<usize>) {
        let k = engines.clamp(1, self.queues.len());
        let mut at = ready;
        let mut waited_for = None;
        // Each round finds the k engines that can start first at or after `at`; when the k-th
        // of them cannot start at `at`, `at` moves to it and the search repeats (each engine's
        // earliest start only grows with `at`, so this ends).
        loop {
            let mut starts: Vec<(f64, usize, Option<usize>)> = self
                .queues
                .iter()
                .enumerate()
                .map(|(e, q)| {
                    let (s, by) = q.earliest(at, duration);
                    (s, e, by)
                })
                .collect();
            starts.sort_by(|a, b| a.0.total_cmp(&b.0).then(a.1.cmp(&b.1)));
            let (kth, _, by) = starts[k - 1];
            if kth <= at {
                let mask = starts[..k].iter().fold(0u16, |m, &(_, e, _)| m | (1 << e));
                return (mask, at, waited_for);
            }
            at = kth;
            waited_for = by;
        }
    }

    fn key(&self, r: &TileRegion) -> TileKey {
        (r.tile, self.current.get(&r.tile).copied().unwrap_or(0))
    }

    fn dtype(&self, r: &TileRegion) -> DType {
        self.program.tiles[r.tile.0 as usize].dtype
    }

    /// The dtype that sets the vector engine's rate for an instruction streaming `regions`
    /// (its full-size inputs and output): the 16-bit rate only when every one of them is 16-bit
    /// ("512 BF16/FP16 input/output; 256 input/output for other data types", the Trainium2
    /// architecture guide), so an fp32 result or operand takes the slower rate.
    fn streamed_dtype(&self, regions: &[&TileRegion]) -> DType {
        regions
            .iter()
            .map(|r| self.dtype(r))
            .max_by_key(|d| d.size_bytes())
            .unwrap_or(DType::F32)
    }

    fn buffer(&self, r: &TileRegion) -> Buffer {
        self.program.tiles[r.tile.0 as usize].buffer
    }

    /// Time a compute instruction adds to its duration for what came before it on its engine:
    /// the static overhead of reading what the engine's previous instruction wrote (the
    /// architecture guide's 100 vector cycles; the perf guide's ScalarE figure), and on the
    /// tensor engine the LoadStationary of a new stationary operand, `⌈M / 4⌉` cycles (fast
    /// LoadStationary), hidden behind the previous matmul when the engine was busy up to this
    /// one (background LoadStationary) and skipped when the previous matmul's stationary is
    /// the same unchanged region.
    fn issue_overhead_ns(
        &mut self,
        op: &Op,
        engine: Engine,
        reads: &[(TileKey, Rect)],
        previous: Option<usize>,
        back_to_back: bool,
    ) -> f64 {
        let t = self.table;
        match op {
            Op::NcMatmul {
                stationary,
                moving,
                perf_mode,
                ..
            } => {
                let key = self.key(stationary);
                let rect = Rect::of(stationary);
                let written_by = self.tiles.last_writer(key, rect);
                let held = (key, rect, written_by);
                if self.stationary == Some(held) {
                    return 0.0;
                }
                self.stationary = Some(held);
                let fp32 = if self.dtype(stationary) == DType::F32 {
                    4.0
                } else {
                    1.0
                };
                // Its columns (`M`): a double-row stationary `[K/2, 2, M]` loads two values per
                // processing element in the time of one (the Trainium2 guide).
                let (_, columns, _) = perf_mode.dims(stationary, moving);
                let load =
                    (columns as f64 / t.load_stationary_speedup).ceil() * fp32 / t.tensor_ghz;
                match previous.filter(|_| back_to_back) {
                    Some(p) => (load - (self.slices[p].end_ns - self.slices[p].start_ns)).max(0.0),
                    None => load,
                }
            }
            Op::NcTranspose { .. } | Op::NcMatmulMx { .. } => {
                self.stationary = None;
                0.0
            }
            _ => {
                let Some(p) = previous else { return 0.0 };
                let dependent = reads
                    .iter()
                    .any(|&(k, rect)| self.tiles.written_by(k, rect, p));
                if !dependent {
                    return 0.0;
                }
                match engine {
                    Engine::Vector => t.vector_dependent_cycles / t.vector_ghz,
                    Engine::Scalar => t.scalar_dependent_cycles / t.scalar_ghz,
                    Engine::GpSimd => t.gpsimd_dependent_cycles / t.gpsimd_ghz,
                    Engine::Tensor | Engine::Dma(_) => 0.0,
                }
            }
        }
    }

    /// The table constants that set an instruction's duration: its base time (`base` ns) and
    /// the overhead added for what came before it on its engine (`overhead` ns).
    fn charged(&self, engine: Engine, base: f64, overhead: f64) -> Charged {
        let t = &self.table;
        let close = |a: f64, b: f64| (a - b).abs() <= 1e-9 * b.abs().max(1.0);
        let main = match engine {
            Engine::Dma(_) => {
                if close(base, t.dma_min_transfer_ns + t.dma_transfer_overhead_ns) {
                    "dma_min_transfer_ns"
                } else {
                    "dma_engine_bytes_per_ns"
                }
            }
            Engine::Tensor => "tensor_ghz",
            Engine::Vector if close(base, t.min_ii_cycles / t.vector_ghz) => "min_ii_cycles",
            Engine::Scalar if close(base, t.min_ii_cycles / t.scalar_ghz) => "min_ii_cycles",
            Engine::GpSimd if close(base, t.min_ii_cycles / t.gpsimd_ghz) => "min_ii_cycles",
            Engine::Vector => "vector_ghz",
            Engine::Scalar => "scalar_ghz",
            Engine::GpSimd => "gpsimd_ghz",
        };
        let extra = match engine {
            Engine::Tensor => "load_stationary_speedup",
            Engine::Vector => "vector_dependent_cycles",
            Engine::Scalar => "scalar_dependent_cycles",
            Engine::GpSimd | Engine::Dma(_) => "gpsimd_dependent_cycles",
        };
        [(main, base), (extra, overhead)]
    }

    fn schedule(&mut self, op: &Op, loc: crate::loc::SourceLoc) {
        let (mut engine, mut duration) = self.cost(op);
        let base = duration;
        let mut overhead = 0.0;
        // A grid instance starts when the core's previous instance has finished, and an
        // instruction after a synchronisation when the synchronisation has.
        let (mut start, mut pred) = self.instance_start;
        // A synchronisation starts when everything before it on this core is done: the other
        // core may read what this one wrote before it (the wait for the other core itself is
        // not modelled).
        let synchronises = op.synchronises_cores();
        if synchronises {
            (start, pred) = self.all_done();
        }
        let mut wait = |t: f64, by: Option<usize>| {
            if t > start {
                start = t;
                pred = by;
            }
        };
        let regions = |list: Vec<&TileRegion>| -> Vec<(TileKey, Rect)> {
            list.into_iter()
                .map(|r| (self.key(r), Rect::of(r)))
                .collect()
        };
        let reads = regions(op.tile_reads());
        let writes = regions(op.tile_writes());
        for &(k, rect) in &reads {
            let (t, by) = self.tiles.read_ready(k, rect);
            wait(t, by);
        }
        for &(k, rect) in &writes {
            let (t, by) = self.tiles.write_ready(k, rect);
            wait(t, by);
        }
        // Outputs in HBM: a read waits for overlapping earlier writes, a write for overlapping
        // earlier reads. Stores to disjoint parts of an output never wait for each other (and
        // overlapping stores are a kernel bug the coverage check does not hide).
        let hbm: Vec<(u32, bool, i64, i64)> = op
            .hbm_accesses()
            .iter()
            .filter(|(a, _)| self.program.hbm[a.tensor.0 as usize].kind.is_writable())
            .map(|(a, w)| {
                let base = a.offset.eval(&self.values);
                let (below, above) = a.extent();
                (a.tensor.0, *w, base + below, base + above)
            })
            .collect();
        for &(id, write, lo, hi) in &hbm {
            let earlier = if write {
                &self.hbm_reads
            } else {
                &self.hbm_writes
            };
            for a in earlier.get(&id).into_iter().flatten() {
                if a.lo <= hi && lo <= a.hi {
                    wait(a.end, a.by);
                }
            }
        }
        // A dtype view's sync copy: on the device the view is the memory it views, so what it
        // writes is ready as soon as what it reads is, and no engine runs it.
        if matches!(
            op,
            Op::DmaCopy {
                reinterpret: true,
                ..
            }
        ) {
            self.record_accesses(reads, writes, hbm, (start, start), pred);
            return;
        }
        // A hardware-DGE instruction generates its descriptors before the transfer starts.
        if let Op::DmaTranspose {
            dge_mode: DgeMode::Hwdge,
            ..
        } = op
        {
            start += self.table.hwdge_ns;
        }
        // `start` is when the inputs are ready; now the engine (in program order) or DMA engines.
        let index = self.slices.len();
        let mut dma_engines = 0u16;
        if let Engine::Dma(k) = engine {
            let (mask, s, waited_for) = self.place_dma(start, duration, k as usize);
            if s > start {
                pred = waited_for;
            }
            start = s;
            dma_engines = mask;
            engine = Engine::Dma(mask.trailing_zeros() as u8);
            for (e, q) in self.queues.iter_mut().enumerate() {
                if mask & (1 << e) != 0 {
                    q.occupy(start, start + duration, index, self.min_dma_ns);
                }
            }
        } else {
            let (free, by) = self
                .engine_free
                .get(&engine)
                .copied()
                .unwrap_or((0.0, None));
            if free > start {
                start = free;
                pred = by;
            }
            overhead = self.issue_overhead_ns(op, engine, &reads, by, free >= start);
            duration += overhead;
        }
        let end = start + duration;
        // What this instruction writes is visible at `done`; what it reads is free again at
        // `end` (a transfer has read its source once the queue has streamed it).
        let done = match engine {
            Engine::Dma(_) => end + self.table.dma_latency_ns,
            _ => end,
        };
        self.slices.push(Slice {
            name: op.name(),
            engine,
            start_ns: start,
            end_ns: end,
            done_ns: done,
            loc,
            pred,
            dma_engines,
            charged: self.charged(engine, base, overhead),
        });
        if !matches!(engine, Engine::Dma(_)) {
            self.engine_free.insert(engine, (end, Some(index)));
        }
        self.record_accesses(reads, writes, hbm, (end, done), Some(index));
        if synchronises {
            self.instance_start = (done, Some(index));
        }
    }

    /// When everything scheduled so far is done, and the slice that finishes last.
    fn all_done(&self) -> (f64, Option<usize>) {
        self.slices
            .iter()
            .enumerate()
            .max_by(|a, b| a.1.done_ns.total_cmp(&b.1.done_ns))
            .map_or((0.0, None), |(i, x)| (x.done_ns, Some(i)))
    }

    /// Records what an instruction read (free again at `end`) and wrote (visible at `done`),
    /// `by` the slice that did it (`None` for one that runs nowhere).
    fn record_accesses(
        &mut self,
        reads: Vec<(TileKey, Rect)>,
        writes: Vec<(TileKey, Rect)>,
        hbm: Vec<(u32, bool, i64, i64)>,
        (end, done): (f64, f64),
        by: Option<usize>,
    ) {
        for (k, rect) in reads {
            self.tiles.record_read(k, rect, end, by);
        }
        for (k, rect) in writes {
            self.tiles.record_write(k, rect, done, by);
        }
        for (id, write, lo, hi) in hbm {
            let list = if write {
                &mut self.hbm_writes
            } else {
                &mut self.hbm_reads
            };
            list.entry(id).or_default().push(Access {
                lo,
                hi,
                end: if write { done } else { end },
                by,
            });
        }
    }
}
