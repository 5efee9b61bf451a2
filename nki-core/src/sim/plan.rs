//! The execution plan of a program: facts the simulator derives once per compiled program
//! rather than on every run — which loops may run in parallel, which tile allocations need
//! their NaN poison written, after which statement each tile's storage can be released, which
//! instructions hand their rows straight to the store after them ([`crate::sim::forward`]), and
//! which runs of statements execute band by band ([`crate::sim::band`]).

use crate::ir::{Op, OperandUse, Program, Stmt, TileId, TileRegion};
use crate::sim::band::plan::{BandPolicy, BandRegion, band_regions};
use crate::sim::forward::forward_points;
use crate::sim::gemm::fused_multiply_add;
use crate::sim::parallel::parallel_loops;
use std::sync::atomic::{AtomicU64, Ordering};

/// Per-program facts for the simulator, derived from one program and only ever used with it:
/// [`crate::compile()`] makes one per compiled kernel and [`crate::Compiled::simulate`] runs with
/// it; [`crate::sim::simulate`] makes one per call. Its facts prove which writes may run
/// concurrently, so it can only be made from a program (its fields are read through accessors,
/// for tests and tools):
///
/// ```compile_fail,E0451
/// let plan = nki_core::sim::ExecPlan { parallel: vec![true], ..todo!() };
/// ```
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ExecPlan {
    /// For each loop variable: may its iterations run in parallel?
    pub(crate) parallel: Vec<bool>,
    /// For each tile: must a fresh allocation be filled with NaN? `false` when no instruction
    /// can read an element of it before one writes it (the writes may come in pieces, as
    /// column chunks), so the poison could never be observed.
    pub(crate) poison: Vec<bool>,
    /// Per block (the program body is block 0, then each loop body in program order), per
    /// statement: the tiles allocated in that block whose last use is that statement (or a
    /// statement nested in it). Their storage goes back to the pool there, so a long unrolled
    /// program reuses a few buffers instead of touching fresh memory for every tile.
    pub(crate) release: Vec<Vec<Vec<TileId>>>,
    /// Per block, per statement: does the instruction there hand its rows straight to the
    /// store after it ([`crate::sim::forward`])?
    pub(crate) forward: Vec<Vec<bool>>,
    /// For each loop variable: the block of its body.
    pub(crate) loop_block: Vec<usize>,
    /// For each device loop: the block of its body.
    pub(crate) device_block: Vec<usize>,
    /// Per block, the runs of statements executed band by band, in statement order.
    pub(crate) bands: Vec<Vec<BandRegion>>,
    /// For each tile: does a banded run allocate it (its storage is one band's share)?
    pub(crate) band_local: Vec<bool>,
    /// Partitions per band.
    pub(crate) band_partitions: usize,
    /// The size of a run: tile elements the instructions read and write and a matmul's
    /// multiply-adds, each instruction counted once per iteration of the loops around it (see
    /// [`work`]).
    pub(crate) work: u64,
    /// [`work`] with each multiply-add counted as [`HOST_MACS_PER_ELEMENT`]th of an element: the
    /// size compared with [`HOST_SPLIT_MIN_WORK`].
    pub(crate) host_work: u64,
    /// Whether some instruction uses the engines' random-number generators (a run without one
    /// does not set their states up).
    pub(crate) uses_prng: bool,
    /// Whether the launch-grid instances may run at the same time, each on a thread of the
    /// pool (`validate::instances_independent`: no instance reaches what another writes, and
    /// nothing orders them). Decided only for a program large enough to be split
    /// ([`split_min_work`]); a smaller one runs on the calling thread anyway.
    pub(crate) instances_together: bool,
    /// Whether the instances' [`work`] is nearly even ([`instances_balanced`]). A host's
    /// parallel-for runs a parallel part nested in another on the calling thread (ATen's does),
    /// so on a host's threads uneven instances run one after the other instead, each splitting
    /// its own rows: together, the largest would run alone on one thread.
    pub(crate) instances_balanced: bool,
}

impl ExecPlan {
    /// Analyses `program`, banding runs as [`BandPolicy::default`] says.
    pub fn new(program: &Program) -> ExecPlan {
        ExecPlan::with_bands(program, BandPolicy::default())
    }

    /// Analyses `program`, banding runs as `policy` says (bands of at least one partition).
    pub fn with_bands(program: &Program, policy: BandPolicy) -> ExecPlan {
        let policy = BandPolicy {
            partitions: policy.partitions.max(1),
            ..policy
        };
        let (release, loop_block, device_block) = release_points(program);
        let parallel = parallel_loops(program);
        let (bands, band_local) =
            band_regions(program, &release, &parallel, fused_multiply_add(), policy);
        let Work {
            total: work,
            host: host_work,
            instances: instance_work,
        } = work(program);
        let instances_together = program.program_count() > 1
            && work >= split_min_work()
            && crate::validate::instances_independent(program);
        ExecPlan {
            parallel,
            poison: poison_needed(program),
            forward: forward_points(program, &release),
            release,
            loop_block,
            device_block,
            bands,
            band_local,
            band_partitions: policy.partitions,
            work,
            host_work,
            uses_prng: uses_prng(program),
            instances_together,
            instances_balanced: instances_balanced(&instance_work),
        }
    }

    /// The size of a run (see [`work`]).
    pub fn work(&self) -> u64 {
        self.work
    }

    /// The size compared with the threshold on a host's threads: [`Self::work`] with each
    /// multiply-add counted as [`HOST_MACS_PER_ELEMENT`]th of an element.
    pub fn host_work(&self) -> u64 {
        self.host_work
    }

    /// Whether the launch-grid instances run at the same time on the pool (see the field).
    pub fn instances_together(&self) -> bool {
        self.instances_together
    }

    /// Whether the launch-grid instances share the work nearly evenly, so that they also run
    /// together on a host's threads (see the field).
    pub fn instances_balanced(&self) -> bool {
        self.instances_balanced
    }

    /// Whether a run is large enough that handing it to the simulator's threads pays (see
    /// [`SPLIT_MIN_WORK`]); a smaller one runs on the calling thread.
    pub fn worth_splitting(&self) -> bool {
        self.split_size() >= split_min_work()
    }

    /// The size compared with [`split_min_work`]: [`Self::work`], or on a host's threads the
    /// same with multiply-adds weighed as [`HOST_MACS_PER_ELEMENT`]th of an element.
    fn split_size(&self) -> u64 {
        if crate::sim::threads::host_threads_set() {
            self.host_work
        } else {
            self.work
        }
    }

    /// Whether a run goes to the simulator's threads now: it is [worth
    /// splitting](Self::worth_splitting) and a core is free for a second thread
    /// ([`crate::sim::cores::a_core_is_free`]). With the threshold at 0 every run goes, busy
    /// or not (for tests of the parallel paths).
    pub fn hand_to_pool(&self) -> bool {
        self.placement() == Placement::Split
    }

    /// Where a run goes now: [`Placement::Split`] as [`Self::hand_to_pool`] says; a run worth
    /// splitting while no core is free runs [`Placement::Alone`] when a host lent its threads
    /// and one of them is running now (spin-waiting: it would take the run's core); anything
    /// else on the calling thread. A host's thread that sleeps is left asleep: waking it for a
    /// run would start a new spin-wait after the run.
    pub fn placement(&self) -> Placement {
        let min = split_min_work();
        placement_given(
            (self.split_size(), min),
            || min == 0 || crate::sim::cores::a_core_is_free(),
            || crate::sim::threads::host_threads_set() && crate::sim::cores::a_worker_is_running(),
        )
    }

    /// For each loop variable: may its iterations run in parallel?
    pub fn parallel(&self) -> &[bool] {
        &self.parallel
    }

    /// For each tile: must a fresh allocation be filled with NaN?
    pub fn poison(&self) -> &[bool] {
        &self.poison
    }

    /// Per block, per statement: the tiles released after it (see the field docs).
    pub fn release(&self) -> &[Vec<Vec<TileId>>] {
        &self.release
    }

    /// Per block, per statement: does the instruction there hand its rows to the store after
    /// it (see the field docs)?
    pub fn forward(&self) -> &[Vec<bool>] {
        &self.forward
    }

    /// For each loop variable: the block of its body.
    pub fn loop_block(&self) -> &[usize] {
        &self.loop_block
    }

    /// Per block, the runs executed band by band.
    pub fn bands(&self) -> &[Vec<BandRegion>] {
        &self.bands
    }

    /// For each tile: does a banded run allocate it?
    pub fn band_local(&self) -> &[bool] {
        &self.band_local
    }

    /// Partitions per band.
    pub fn band_partitions(&self) -> usize {
        self.band_partitions
    }

    /// Whether this plan was made for a program of this shape.
    pub(crate) fn fits(&self, program: &Program) -> bool {
        self.parallel.len() == program.loops.len()
            && self.poison.len() == program.tiles.len()
            && self.loop_block.len() == program.loops.len()
            && self.device_block.len() == program.device_loops.len()
            && self.band_local.len() == program.tiles.len()
    }
}

/// A rectangle of a tile, half-open: partitions `p.0..p.1`, free elements `f.0..f.1`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Rect {
    p: (usize, usize),
    f: (usize, usize),
}

impl Rect {
    /// The rectangle a region lies in (all of it for a rectangle; a strided region's bounding
    /// box, which it may not fill).
    fn of(r: &TileRegion) -> Rect {
        Rect {
            p: r.partition_span(),
            f: r.free_span(),
        }
    }

    fn contains(&self, o: &Rect) -> bool {
        self.p.0 <= o.p.0 && o.p.1 <= self.p.1 && self.f.0 <= o.f.0 && o.f.1 <= self.f.1
    }
}

/// The parts of a fresh tile written so far, as rectangles merged where they share a side.
#[derive(Default)]
struct Written(Vec<Rect>);

/// More rectangles than this and [`Written::covers`] answers `false` (the tile is poisoned).
const MAX_RECTS: usize = 32;

impl Written {
    fn add(&mut self, mut r: Rect) {
        if r.p.0 >= r.p.1 || r.f.0 >= r.f.1 {
            return;
        }
        // Absorb every rectangle that extends `r` along one side into one rectangle.
        while let Some(i) = self.0.iter().position(|a| {
            (a.p == r.p && a.f.0 <= r.f.1 && r.f.0 <= a.f.1)
                || (a.f == r.f && a.p.0 <= r.p.1 && r.p.0 <= a.p.1)
                || r.contains(a)
        }) {
            let a = self.0.swap_remove(i);
            r = Rect {
                p: (a.p.0.min(r.p.0), a.p.1.max(r.p.1)),
                f: (a.f.0.min(r.f.0), a.f.1.max(r.f.1)),
            };
        }
        if !self.0.iter().any(|a| a.contains(&r)) {
            self.0.push(r);
        }
    }

    /// Whether every element of `r` has been written.
    fn covers(&self, r: &Rect) -> bool {
        if r.p.0 >= r.p.1 || r.f.0 >= r.f.1 || self.0.iter().any(|a| a.contains(r)) {
            return true;
        }
        if self.0.len() > MAX_RECTS {
            return false;
        }
        // Cut `r` along every rectangle edge inside it; each cell must lie in some rectangle.
        let cuts = |lo: usize, hi: usize, edges: &mut dyn Iterator<Item = usize>| {
            let mut v: Vec<usize> = edges.filter(|&e| lo < e && e < hi).collect();
            v.extend([lo, hi]);
            v.sort_unstable();
            v.dedup();
            v
        };
        let ps = cuts(
            r.p.0,
            r.p.1,
            &mut self.0.iter().flat_map(|a| [a.p.0, a.p.1]),
        );
        let fs = cuts(
            r.f.0,
            r.f.1,
            &mut self.0.iter().flat_map(|a| [a.f.0, a.f.1]),
        );
        ps.windows(2).all(|p| {
            fs.windows(2).all(|f| {
                let cell = Rect {
                    p: (p[0], p[1]),
                    f: (f[0], f[1]),
                };
                self.0.iter().any(|a| a.contains(&cell))
            })
        })
    }
}

/// What the analysis knows of a tile's poison.
enum Poison {
    /// No read has reached an element not yet written; these are written.
    Undecided(Written),
    /// Decided: `true` when a read may see an unwritten element.
    Known(bool),
}

impl Poison {
    fn fresh() -> Poison {
        Poison::Undecided(Written::default())
    }

    /// An instruction reads `r`.
    fn read(&mut self, r: Rect) {
        if let Poison::Undecided(w) = self
            && !w.covers(&r)
        {
            *self = Poison::Known(true);
        }
    }

    /// An instruction writes `r` of a tile that is `whole`.
    fn write(&mut self, r: Rect, whole: Rect) {
        if let Poison::Undecided(w) = self {
            w.add(r);
            if w.covers(&whole) {
                *self = Poison::Known(false);
            }
        }
    }

    /// Whether the tile needs its NaN fill.
    fn needed(&self) -> bool {
        matches!(self, Poison::Known(true))
    }
}

/// For each tile: may an instruction read an element of it that nothing wrote since its
/// allocation? Instructions are visited in program order (a loop body once; a loop of zero trips
/// writes nothing). Reads are checked against the rectangles written so far; once writes cover
/// the whole tile, or at the end, no read can see the poison.
fn poison_needed(program: &Program) -> Vec<bool> {
    fn walk(program: &Program, body: &[Stmt], runs: bool, state: &mut [Poison]) {
        for s in body {
            match s {
                // A tile is allocated once in program order (each handle comes from one call).
                Stmt::Alloc { .. } => {}
                Stmt::Inst(inst) => {
                    for r in inst.op.tile_reads() {
                        state[r.tile.0 as usize].read(Rect::of(r));
                    }
                    // A loop that never runs writes nothing (its reads still count, above); a
                    // strided write is not counted as covering its bounding box.
                    for w in inst
                        .op
                        .tile_writes()
                        .into_iter()
                        .filter(|w| runs && w.is_rect())
                    {
                        let decl = &program.tiles[w.tile.0 as usize];
                        let whole = Rect {
                            p: (0, decl.partitions),
                            f: (0, decl.free),
                        };
                        state[w.tile.0 as usize].write(Rect::of(w), whole);
                    }
                }
                Stmt::Loop { var, body } => {
                    let trips = program.loops[var.0 as usize].trip > 0;
                    walk(program, body, runs && trips, state);
                }
                // It may run no iteration: its writes cannot cover what is read after it.
                Stmt::DeviceLoop { body, .. } => walk(program, body, false, state),
            }
        }
    }
    let mut state: Vec<Poison> = (0..program.tiles.len()).map(|_| Poison::fresh()).collect();
    walk(program, &program.body, true, &mut state);
    state.iter().map(Poison::needed).collect()
}

/// [`ExecPlan::release`], [`ExecPlan::loop_block`] and the device loops' blocks.
type ReleasePoints = (Vec<Vec<Vec<TileId>>>, Vec<usize>, Vec<usize>);

/// [`ExecPlan::release`], [`ExecPlan::loop_block`] and [`ExecPlan::device_block`].
fn release_points(program: &Program) -> ReleasePoints {
    struct Walk {
        /// Per tile: the block that allocates it and the last statement there that uses it.
        owner: Vec<Option<(usize, usize)>>,
        release: Vec<Vec<Vec<TileId>>>,
        loop_block: Vec<usize>,
        device_block: Vec<usize>,
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
                    Stmt::DeviceLoop { id, body } => {
                        self.device_block[id.0 as usize] = self.release.len();
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
        device_block: vec![0; program.device_loops.len()],
    };
    walk.block(&program.body);
    for (t, owner) in walk.owner.iter().enumerate() {
        if let Some((block, last)) = *owner {
            walk.release[block][last].push(TileId(t as u32));
        }
    }
    (walk.release, walk.loop_block, walk.device_block)
}

/// The smallest [`ExecPlan::work`] a run hands to the simulator's own pool by default. Below
/// it, the cost of handing the run over (waking a pool thread, waiting for it; tens of
/// microseconds when other processes hold the cores) exceeds what a second thread saves, so
/// the run stays on the calling thread. Measured with `scripts/bench_overhead.py --split`
/// (docs/bench.md, "Per-call overhead").
pub const SPLIT_MIN_WORK: u64 = 1 << 25;

/// [`ExecPlan::placement`] for a run of `size` against the split threshold `min`, asking
/// whether a core is free for a second thread only for a run worth splitting, and whether a
/// host's thread is spinning only for one [`ALONE_WORK_FACTOR`] times larger when none is.
fn placement_given(
    (size, min): (u64, u64),
    core_free: impl FnOnce() -> bool,
    host_spinning: impl FnOnce() -> bool,
) -> Placement {
    if size < min {
        Placement::Calling
    } else if core_free() {
        Placement::Split
    } else if size >= min.saturating_mul(ALONE_WORK_FACTOR) && host_spinning() {
        Placement::Alone
    } else {
        Placement::Calling
    }
}

/// How many times the split threshold a run must be to run [`Placement::Alone`]. Putting the
/// host's threads to sleep has a price at the end of the run: the calling thread waits for
/// them to wake and return, and with the other cores busy that can take a scheduler slice.
/// At the split threshold itself, llama-tiny's forward with one busy process went from 2.7–4.7
/// ms to 6.2–9.3 ms a step; llama-512's runs (its linears and attention, 4–10 M of host work)
/// run about twice as fast (docs/bench.md).
pub const ALONE_WORK_FACTOR: u64 = 8;

/// Where a run goes ([`ExecPlan::placement`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Placement {
    /// On the calling thread: too small to pay for threads (or no host's threads to quiet).
    Calling,
    /// Split across the simulator's threads: a core is free for them.
    Split,
    /// On one of the host's threads while the host's others sleep ([`crate::sim::threads`]'s
    /// `alone`): large enough to split, but no core is free. ATen's OpenMP threads spin for
    /// milliseconds after each parallel region; on a machine whose other cores are busy, one of
    /// them spinning on the core the run needs halves the run's share of it.
    Alone,
}

/// The smallest [`ExecPlan::work`] split across a host's threads by default
/// ([`crate::sim::threads::set_host_threads`]: ATen's intra-op pool for the torch ops). Those
/// threads are awake between ATen's parallel regions, so a split costs no wake-up, and runs of
/// a few hundred microseconds gain (docs/bench.md, "The host's threads").
pub const HOST_SPLIT_MIN_WORK: u64 = 1 << 19;

/// The environment variable that overrides [`SPLIT_MIN_WORK`] and [`HOST_SPLIT_MIN_WORK`] (read
/// once per process; `0` hands every run to the threads, as before the threshold).
pub const SPLIT_MIN_WORK_ENV: &str = "TORCH_NKI_SPLIT_MIN_WORK";

/// The override plus one (0: none), or `u64::MAX` until first read.
static SPLIT_MIN: AtomicU64 = AtomicU64::new(u64::MAX);

/// The smallest run split across threads: `$TORCH_NKI_SPLIT_MIN_WORK` when that is an integer,
/// or what [`set_split_min_work`] set, or else [`HOST_SPLIT_MIN_WORK`] while a host lends its
/// threads and [`SPLIT_MIN_WORK`] otherwise.
pub fn split_min_work() -> u64 {
    let mut stored = SPLIT_MIN.load(Ordering::Relaxed);
    if stored == u64::MAX {
        let from_env = std::env::var(SPLIT_MIN_WORK_ENV)
            .ok()
            .and_then(|v| v.trim().parse::<u64>().ok())
            .map_or(0, |min| min.min(u64::MAX - 2) + 1);
        // A concurrent `set_split_min_work` wins.
        let _ =
            SPLIT_MIN.compare_exchange(u64::MAX, from_env, Ordering::Relaxed, Ordering::Relaxed);
        stored = SPLIT_MIN.load(Ordering::Relaxed);
    }
    match stored {
        0 if crate::sim::threads::host_threads_set() => HOST_SPLIT_MIN_WORK,
        0 => SPLIT_MIN_WORK,
        min => min - 1,
    }
}

/// Sets the smallest run split across threads for this process (`0`: every run with a
/// parallel plan; `u64::MAX - 1`: none), for measuring the threshold.
pub fn set_split_min_work(min: u64) {
    SPLIT_MIN.store(min.min(u64::MAX - 2) + 1, Ordering::Relaxed);
}

/// How many multiply-adds count as one element in [`ExecPlan::host_work`]. The simulator's GEMM
/// runs about eight times as many multiply-adds per nanosecond as an elementwise instruction
/// moves elements (fp32 matmul 20×150 · 150×4700: 14.1 M in about 300 µs; `add` at 130×4100:
/// 1.6 M elements read and written in about 280 µs, docs/bench.md "The host's threads"), so a
/// llama-tiny MLP linear (128 × 64 · 64 × 160: 1.3 M multiply-adds, about 40 µs) stays under
/// [`HOST_SPLIT_MIN_WORK`].
pub const HOST_MACS_PER_ELEMENT: u64 = 8;

/// The sizes of a run ([`work`]).
struct Work {
    /// Elements and multiply-adds alike ([`ExecPlan::work`]).
    total: u64,
    /// Multiply-adds weighed as [`HOST_MACS_PER_ELEMENT`]th of an element.
    host: u64,
    /// `total` per launch-grid instance (each grid loop, in program order).
    instances: Vec<u64>,
}

/// Tile elements the program's instructions read and write, plus a matmul's multiply-adds, each
/// instruction counted once per iteration of the loops around it (a device loop's body once:
/// its trips are known only when it runs) and at least once: a proxy for the time a run takes.
/// Also the same with multiply-adds weighed less, and the sum per launch-grid instance.
fn work(program: &Program) -> Work {
    let trips = program.trips();
    let (mut total, mut host) = (0u64, 0u64);
    let mut instances: Vec<(crate::affine::LoopVar, u64)> = Vec::new();
    program.visit_instructions(&mut |inst, loops| {
        let times = loops.iter().fold(1u64, |n, v| {
            n.saturating_mul(trips.get(v.0 as usize).copied().unwrap_or(1) as u64)
        });
        let (elements, macs) = instruction_work(inst);
        let work = times.saturating_mul(elements.saturating_add(macs).max(1));
        total = total.saturating_add(work);
        let weighed = elements.saturating_add(macs / HOST_MACS_PER_ELEMENT).max(1);
        host = host.saturating_add(times.saturating_mul(weighed));
        let grid = loops
            .iter()
            .find(|v| program.loops[v.0 as usize].kind.grid_axis().is_some());
        if let Some(&grid) = grid {
            match instances.iter_mut().find(|(v, _)| *v == grid) {
                Some((_, sum)) => *sum = sum.saturating_add(work),
                None => instances.push((grid, work)),
            }
        }
    });
    Work {
        total,
        host,
        instances: instances.into_iter().map(|(_, w)| w).collect(),
    }
}

/// One execution of `inst`: its tile elements, and a matmul's K·M·N multiply-adds.
fn instruction_work(inst: &crate::ir::Instruction) -> (u64, u64) {
    let mut elements = 0u64;
    inst.op.visit_operands(&mut |u| {
        if let OperandUse::Tile(r, _) = u {
            elements = elements.saturating_add((r.np as u64).saturating_mul(r.nf as u64));
        }
    });
    let dims = match inst.op {
        Op::NcMatmul {
            ref stationary,
            ref moving,
            perf_mode,
            ..
        } => Some(perf_mode.dims(stationary, moving)),
        Op::NcMatmulMx {
            ref stationary,
            ref moving,
            ..
        } => Some((stationary.np, stationary.nf, moving.nf)),
        _ => None,
    };
    let macs = dims.map_or(0, |(k, m, n)| {
        [k, m, n]
            .iter()
            .fold(1u64, |n, &d| n.saturating_mul(d as u64))
    });
    (elements, macs)
}

/// Whether the launch-grid instances share the work nearly evenly: the largest at most twice the
/// smallest (one instance, or none: yes).
fn instances_balanced(instances: &[u64]) -> bool {
    match (instances.iter().min(), instances.iter().max()) {
        (Some(&least), Some(&most)) => instances.len() < 2 || most <= least.saturating_mul(2),
        _ => true,
    }
}

/// Whether some instruction of the program uses the random-number generators.
fn uses_prng(program: &Program) -> bool {
    let mut uses = false;
    program.visit_instructions(&mut |inst, _| uses |= super::random::uses_prng(&inst.op));
    uses
}

#[cfg(test)]
mod tests {
    use super::{
        ALONE_WORK_FACTOR, MAX_RECTS, Placement, Poison, Rect, Written, instances_balanced,
        placement_given,
    };

    #[test]
    fn a_large_run_is_split_while_a_core_is_free_and_runs_alone_only_past_a_spinning_host() {
        let never = || -> bool { panic!("not asked") };
        let min = 100;
        let alone = min * ALONE_WORK_FACTOR;
        assert_eq!(placement_given((99, min), never, never), Placement::Calling);
        assert_eq!(
            placement_given((100, min), || true, never),
            Placement::Split
        );
        assert_eq!(
            placement_given((alone, min), || false, || true),
            Placement::Alone
        );
        assert_eq!(
            placement_given((alone, min), || false, || false),
            Placement::Calling
        );
        // Worth splitting, but too small to pay for putting the host's threads to sleep.
        assert_eq!(
            placement_given((alone - 1, min), || false, never),
            Placement::Calling
        );
    }

    #[test]
    fn instances_are_balanced_when_the_largest_is_at_most_twice_the_smallest() {
        assert!(instances_balanced(&[]));
        assert!(instances_balanced(&[7]));
        assert!(instances_balanced(&[100, 200]));
        assert!(instances_balanced(&[100, 100, 150]));
        assert!(!instances_balanced(&[100, 201]));
        assert!(!instances_balanced(&[2048 * 128, 2048 * 2]));
        assert!(!instances_balanced(&[0, 5]));
    }

    fn rect(p: (usize, usize), f: (usize, usize)) -> Rect {
        Rect { p, f }
    }

    #[test]
    fn column_chunks_merge_into_one_rectangle() {
        let mut w = Written::default();
        for c in (0..64).rev() {
            w.add(rect((0, 128), (c * 8, c * 8 + 8)));
        }
        assert_eq!(w.0, vec![rect((0, 128), (0, 512))]);
        assert!(w.covers(&rect((0, 128), (0, 512))));
        assert!(!w.covers(&rect((0, 128), (0, 513))));
    }

    #[test]
    fn quadrants_cover_the_tile_and_a_gap_does_not() {
        let mut w = Written::default();
        w.add(rect((0, 64), (0, 100)));
        w.add(rect((64, 128), (50, 200)));
        w.add(rect((0, 64), (100, 200)));
        assert!(
            !w.covers(&rect((0, 128), (0, 200))),
            "rows 64.. cols ..50 unwritten"
        );
        assert!(w.covers(&rect((60, 70), (60, 70))));
        w.add(rect((64, 128), (0, 50)));
        assert!(w.covers(&rect((0, 128), (0, 200))));
    }

    #[test]
    fn too_many_pieces_count_as_uncovered() {
        let mut w = Written::default();
        // A checkerboard of single elements never merges.
        for p in 0..9 {
            for f in 0..9 {
                if (p + f) % 2 == 0 {
                    w.add(rect((p, p + 1), (f, f + 1)));
                }
            }
        }
        assert!(w.0.len() > MAX_RECTS);
        assert!(!w.covers(&rect((0, 2), (0, 1))));
        assert!(w.covers(&rect((0, 1), (0, 1))), "a piece itself is covered");
        assert!(w.covers(&rect((3, 3), (0, 9))), "an empty read is covered");
    }

    /// Against element-by-element bookkeeping on random sequences of reads and writes of a
    /// `[6, 10]` tile: the analysis asks for the fill whenever a read reaches an unwritten
    /// element, and only then while its rectangles stay within [`MAX_RECTS`].
    #[test]
    fn the_analysis_agrees_with_brute_force() {
        let (np, nf) = (6, 10);
        let whole = rect((0, np), (0, nf));
        let mut state = 0x9e37_79b9_u32;
        let mut next = |n: usize| {
            state ^= state << 13;
            state ^= state >> 17;
            state ^= state << 5;
            state as usize % n
        };
        let (mut exact, mut capped) = (0, 0);
        for _ in 0..20_000 {
            let mut poison = Poison::fresh();
            let mut written = [[false; 10]; 6];
            let mut seen_unwritten = false;
            let mut pieces = 0;
            for _ in 0..1 + next(12) {
                let (p0, f0) = (next(np), next(nf));
                let r = rect((p0, p0 + 1 + next(np - p0)), (f0, f0 + 1 + next(nf - f0)));
                let cells = (r.p.0..r.p.1).flat_map(|p| (r.f.0..r.f.1).map(move |f| (p, f)));
                if next(3) == 0 {
                    poison.read(r);
                    seen_unwritten |= cells.clone().any(|(p, f)| !written[p][f]);
                } else {
                    poison.write(r, whole);
                    cells.for_each(|(p, f)| written[p][f] = true);
                }
                if let Poison::Undecided(w) = &poison {
                    pieces = pieces.max(w.0.len());
                }
            }
            if seen_unwritten {
                assert!(poison.needed(), "a read saw poison the analysis missed");
            }
            if pieces <= MAX_RECTS {
                assert_eq!(poison.needed(), seen_unwritten);
                exact += 1;
            } else {
                capped += 1;
            }
        }
        assert!(exact > 19_000, "{exact} exact, {capped} capped");
    }
}
