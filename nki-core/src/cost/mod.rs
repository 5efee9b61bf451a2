//! The cost model: what a traced program would take on a NeuronCore, estimated from the
//! documented engine heuristics (see [`table`]), with engines overlapping as on the device.
//!
//! [`estimate`] schedules every instruction (see the `schedule` module) and reports the
//! estimated time, per-engine busy time, HBM bytes and FLOPs, the bound resource and the
//! roofline fraction (the bound resource's time at peak over the estimated time), the HBM
//! roofline fraction (each tensor moved once, at peak bandwidth, over the estimated time), the critical
//! path, and a Chrome/Perfetto trace ([`CostReport::chrome_trace`]). Every figure is an
//! **estimate**: nothing here has been timed on hardware. What the model charges, and the
//! documented source of each constant ([`CostTable`]), is in docs/cost-model.md: DMA transfers
//! over ⌈partitions / 8⌉ of the 16 DMA engines on the documented throughput curve, the compute
//! engines' `MIN_II` and dependent-instruction overheads, and the tensor engine's
//! LoadStationary / MultiplyMoving pair.

mod queue;
mod schedule;
pub mod table;
mod trace;

pub use table::CostTable;

use crate::ir::Program;
use crate::loc::SourceLoc;
use crate::target::Target;
use serde::Serialize;
use std::fmt;

/// An engine or DMA queue of a NeuronCore: one track of the timeline.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// The tensor engine (`nc_matmul`).
    Tensor,
    /// The vector engine (`tensor_tensor`, `tensor_scalar`, `scalar_tensor_tensor`,
    /// `tensor_reduce`, `tensor_copy`, `range_select`).
    Vector,
    /// The scalar engine (`activation`).
    Scalar,
    /// GpSimd (`memset` on SBUF, `iota`, `tensor_tensor` placed there).
    GpSimd,
    /// DMA engine `n` (0..16; each has 16 queues, which share its bandwidth).
    Dma(u8),
}

impl fmt::Display for Engine {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Engine::Tensor => f.write_str("tensor"),
            Engine::Vector => f.write_str("vector"),
            Engine::Scalar => f.write_str("scalar"),
            Engine::GpSimd => f.write_str("gpsimd"),
            Engine::Dma(q) => write!(f, "dma{q}"),
        }
    }
}

/// One instruction on the timeline.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Slice {
    /// The `nki.isa` instruction name.
    pub name: &'static str,
    /// Where it ran.
    pub engine: Engine,
    /// Start, ns from the kernel's start.
    pub start_ns: f64,
    /// End of the engine's (or DMA queue's) busy time, ns.
    pub end_ns: f64,
    /// When the result is visible to dependent instructions, ns: `end_ns` for compute, and
    /// for a DMA transfer `end_ns` plus the queue's completion latency (the queue streams the
    /// next transfer meanwhile).
    pub done_ns: f64,
    /// The kernel source line that issued it.
    pub loc: SourceLoc,
    /// The slice that determined its start (engine order or a dependency), for the critical path.
    #[serde(skip)]
    pub pred: Option<usize>,
    /// For a DMA transfer, the DMA engines it keeps busy (bit `n` for engine `n`; `engine` is
    /// the first of them); 0 for a compute instruction.
    #[serde(skip_serializing_if = "is_zero")]
    pub dma_engines: u16,
    /// Which [`CostTable`] constants set its duration, and how much of it each did, ns.
    #[serde(skip)]
    pub charged: Charged,
}

/// The [`CostTable`] constants that set a slice's duration: its base time (the constant that
/// bound it: a rate, or a minimum such as `min_ii_cycles`) and the overhead added for what came
/// before it on its engine, each with its share in ns.
pub type Charged = [(&'static str, f64); 2];

fn is_zero(mask: &u16) -> bool {
    *mask == 0
}

impl Slice {
    /// The engines and DMA engines this instruction keeps busy.
    pub fn tracks(&self) -> Vec<Engine> {
        if self.dma_engines == 0 {
            return vec![self.engine];
        }
        (0..16u8)
            .filter(|e| self.dma_engines & (1 << e) != 0)
            .map(Engine::Dma)
            .collect()
    }
}

/// A resource the roofline compares against.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Resource {
    /// HBM traffic over the DMA queues.
    Dma,
    /// Tensor-engine FLOPs.
    Tensor,
    /// Vector-engine element throughput.
    Vector,
    /// Scalar-engine element throughput.
    Scalar,
    /// GpSimd element throughput (elementwise instructions placed there).
    #[serde(rename = "gpsimd")]
    GpSimd,
}

impl fmt::Display for Resource {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Resource::Dma => "DMA (HBM bandwidth)",
            Resource::Tensor => "tensor engine",
            Resource::Vector => "vector engine",
            Resource::Scalar => "scalar engine",
            Resource::GpSimd => "gpsimd engine",
        })
    }
}

/// Busy time of one engine or queue.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct EngineUse {
    /// The engine.
    pub engine: Engine,
    /// Sum of its instructions' durations, ns.
    pub busy_ns: f64,
    /// How many instructions it ran.
    pub instructions: usize,
}

/// The estimate for one program on one target.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CostReport {
    /// The kernel.
    pub kernel: String,
    /// The target.
    pub target: Target,
    /// Estimated device time, ns.
    pub total_ns: f64,
    /// Per engine and DMA queue (queues with no work are left out), in track order.
    pub engines: Vec<EngineUse>,
    /// Bytes read from HBM, by every core of the launch.
    pub hbm_read_bytes: f64,
    /// Bytes written to HBM, by every core of the launch.
    pub hbm_write_bytes: f64,
    /// The HBM traffic no kernel for this op can avoid: every tensor the program touches read
    /// (inputs) or written (outputs) once, bytes.
    pub hbm_compulsory_bytes: f64,
    /// That traffic at the peak HBM bandwidth of the cores the launch runs on (each physical
    /// core's share, times the cores a launch grid spreads over) over the estimated time: the
    /// op's HBM roofline
    /// fraction (a kernel that reads its inputs twice stays below 50% however well its
    /// transfers overlap, where `roofline_fraction` would count the repeated reads as work).
    pub hbm_roofline_fraction: f64,
    /// Tensor-engine FLOPs, of every core of the launch.
    pub flops: f64,
    /// Each resource's time if it ran at peak with nothing else in the way, ns: the launch's
    /// work of that resource shared evenly by the cores it runs on.
    pub min_ns: Vec<(Resource, f64)>,
    /// The resource with the largest such time.
    pub bound: Resource,
    /// The bound resource's time at peak over the estimated time (1.0 = at the roofline).
    pub roofline_fraction: f64,
    /// The chain of instructions that ends last, first to last, each waiting on the previous.
    pub critical_path: Vec<Slice>,
    /// Every instruction, in program (issue) order.
    pub slices: Vec<Slice>,
    /// With a launch grid spread over more than one physical core ([`estimate_on_cores`]):
    /// each core's estimated time, ns (the estimate is the largest); empty otherwise.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub core_ns: Vec<f64>,
}

/// Estimates `program` on its target.
pub fn estimate(program: &Program) -> CostReport {
    estimate_with(program, CostTable::for_target(program.target))
}

/// Estimates `program` with an explicit table (calibration experiments), on the target's
/// default number of physical cores per logical core ([`Target::default_lnc`]).
pub fn estimate_with(program: &Program, table: CostTable) -> CostReport {
    estimate_on_cores(program, table, program.target.default_lnc())
}

/// Estimates `program` on a logical core of `cores` physical cores (1 for LNC=1).
///
/// The instances of a launch grid are distributed round robin over the cores in program-id
/// order (instance `k` on core `k % cores`), each core running its instances one after the
/// other on its own engines and DMA queues; the estimate is the slowest core's, and the report
/// (engines, slices, critical path) is that core's schedule, with every core's time in
/// [`CostReport::core_ns`]; HBM bytes and FLOPs are every core's summed, and the peak-rate times
/// are the launch's work shared evenly by its cores. A program
/// without a grid is one instance on core 0. Each physical core has its share of the chip's HBM
/// bandwidth (its queues at the per-core rate), so a launch over two cores has twice one core's.
pub fn estimate_on_cores(program: &Program, table: CostTable, cores: usize) -> CostReport {
    let cores = cores.clamp(1, program.program_count().max(1));
    let mut runs: Vec<(f64, schedule::Scheduler<'_>)> = (0..cores)
        .map(|core| {
            let mut s = schedule::Scheduler::new(program, table).on_core(core, cores);
            s.run();
            let total = s.slices.iter().map(|x| x.done_ns).fold(0.0, f64::max);
            (total, s)
        })
        .collect();
    let core_ns: Vec<f64> = if cores > 1 {
        runs.iter().map(|(t, _)| *t).collect()
    } else {
        Vec::new()
    };
    let slowest = runs
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.0.total_cmp(&b.1.0))
        .map_or(0, |(i, _)| i);
    // HBM traffic and FLOPs are the launch's, every core's summed.
    let launch_sum = |f: fn(&schedule::Work) -> f64| runs.iter().map(|(_, s)| f(&s.work)).sum();
    let (hbm_read, hbm_write, flops): (f64, f64, f64) = (
        launch_sum(|w| w.hbm_read),
        launch_sum(|w| w.hbm_write),
        launch_sum(|w| w.flops),
    );
    // The roofline of the launch on its cores: each resource's work at peak, shared by them.
    let per_core = |f: fn(&schedule::Work) -> f64| launch_sum(f) / cores as f64;
    let (tensor_min, vector_min, scalar_min, gpsimd_min) = (
        per_core(|w| w.tensor_min_ns),
        per_core(|w| w.vector_min_ns),
        per_core(|w| w.scalar_min_ns),
        per_core(|w| w.gpsimd_min_ns),
    );
    let (total_ns, s) = runs.swap_remove(slowest);
    let slices = s.slices;
    let mut engines: Vec<EngineUse> = Vec::new();
    for x in &slices {
        for track in x.tracks() {
            match engines.iter_mut().find(|e| e.engine == track) {
                Some(e) => {
                    e.busy_ns += x.end_ns - x.start_ns;
                    e.instructions += 1;
                }
                None => engines.push(EngineUse {
                    engine: track,
                    busy_ns: x.end_ns - x.start_ns,
                    instructions: 1,
                }),
            }
        }
    }
    engines.sort_by_key(|e| e.engine);
    let bytes = (hbm_read + hbm_write) / cores as f64;
    let min_ns = vec![
        (Resource::Dma, bytes / table.dma_peak_bytes_per_s() * 1e9),
        (Resource::Tensor, tensor_min),
        (Resource::Vector, vector_min),
        (Resource::Scalar, scalar_min),
        (Resource::GpSimd, gpsimd_min),
    ];
    let (bound, bound_ns) = min_ns
        .iter()
        .copied()
        .fold((Resource::Dma, -1.0), |a, b| if b.1 > a.1 { b } else { a });
    let fraction = |ns: f64| if total_ns > 0.0 { ns / total_ns } else { 0.0 };
    let roofline_fraction = fraction(bound_ns);
    let hbm_compulsory_bytes = compulsory_bytes(program);
    // The cores of a logical NeuronCore each bring their share of the chip's HBM bandwidth.
    let hbm_peak = table.dma_peak_bytes_per_s() * cores as f64;
    let hbm_roofline_fraction = fraction(hbm_compulsory_bytes / hbm_peak * 1e9);
    let mut critical_path = Vec::new();
    let mut cur = slices
        .iter()
        .enumerate()
        .max_by(|a, b| a.1.done_ns.total_cmp(&b.1.done_ns))
        .map(|(i, _)| i);
    while let Some(i) = cur {
        critical_path.push(slices[i].clone());
        cur = slices[i].pred;
    }
    critical_path.reverse();
    CostReport {
        kernel: program.name.clone(),
        target: program.target,
        total_ns,
        engines,
        hbm_read_bytes: hbm_read,
        hbm_write_bytes: hbm_write,
        hbm_compulsory_bytes,
        hbm_roofline_fraction,
        flops,
        min_ns,
        bound,
        roofline_fraction,
        critical_path,
        slices,
        core_ns,
    }
}

/// Bytes of every HBM tensor the program reads or writes, each counted once.
fn compulsory_bytes(program: &Program) -> f64 {
    let mut touched = vec![false; program.hbm.len()];
    program.visit_instructions(&mut |inst, _| {
        for (access, _) in inst.op.hbm_accesses() {
            touched[access.tensor.0 as usize] = true;
        }
    });
    program
        .hbm
        .iter()
        .zip(touched)
        .filter(|(_, t)| *t)
        .map(|(d, _)| (d.numel() * d.dtype.size_bytes()) as f64)
        .sum()
}

impl CostReport {
    /// Busy time of `engine` over the estimated time.
    pub fn utilisation(&self, engine: Engine) -> f64 {
        let busy = self
            .engines
            .iter()
            .find(|e| e.engine == engine)
            .map_or(0.0, |e| e.busy_ns);
        if self.total_ns > 0.0 {
            busy / self.total_ns
        } else {
            0.0
        }
    }

    /// The timeline as Chrome trace event JSON (opens in Perfetto and `chrome://tracing`):
    /// one track per engine and DMA queue, one complete event per instruction, named by the
    /// instruction and carrying its kernel source line.
    pub fn chrome_trace(&self) -> String {
        trace::chrome_trace(self)
    }
}

fn time_text(ns: f64) -> String {
    if ns >= 1e6 {
        format!("{:.3} ms", ns / 1e6)
    } else if ns >= 1e3 {
        format!("{:.2} µs", ns / 1e3)
    } else {
        format!("{ns:.0} ns")
    }
}

impl CostReport {
    /// The estimated time along the critical path, ns, by the [`CostTable`] constant that set
    /// it (largest first): each slice's duration charged to the constants that set it, and the
    /// wait for a DMA transfer's data after the engines finished it to `dma_latency_ns`. The
    /// constants that dominate a kernel's estimate, for calibration.
    pub fn critical_path_by_constant(&self) -> Vec<(&'static str, f64)> {
        let mut by: Vec<(&'static str, f64)> = Vec::new();
        let mut add = |name: &'static str, ns: f64| {
            if ns <= 0.0 {
                return;
            }
            match by.iter_mut().find(|(n, _)| *n == name) {
                Some((_, t)) => *t += ns,
                None => by.push((name, ns)),
            }
        };
        let mut previous: Option<&Slice> = None;
        for s in &self.critical_path {
            if let Some(p) = previous
                && p.dma_engines != 0
            {
                add(
                    "dma_latency_ns",
                    (s.start_ns.min(p.done_ns) - p.end_ns).max(0.0),
                );
            }
            for (name, ns) in s.charged {
                add(name, ns);
            }
            previous = Some(s);
        }
        // The estimate ends when the last transfer's data lands.
        if let Some(p) = previous.filter(|p| p.dma_engines != 0) {
            add("dma_latency_ns", p.done_ns - p.end_ns);
        }
        by.sort_by(|a, b| b.1.total_cmp(&a.1));
        by
    }

    /// The tensor engine's time at peak for the program's matmuls over the estimated time: the
    /// grade of matmul-like kernels whatever their bound resource (flash attention spends
    /// vector and scalar time on the softmax around its matmuls).
    pub fn tensor_peak_fraction(&self) -> f64 {
        let tensor = self
            .min_ns
            .iter()
            .find(|(r, _)| *r == Resource::Tensor)
            .map_or(0.0, |(_, ns)| *ns);
        if self.total_ns > 0.0 {
            tensor / self.total_ns
        } else {
            0.0
        }
    }
}

impl fmt::Display for CostReport {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        writeln!(
            f,
            "{} on {} (estimate, not a measurement): {}",
            self.kernel,
            self.target.name(),
            time_text(self.total_ns)
        )?;
        if !self.core_ns.is_empty() {
            let cores: Vec<String> = self.core_ns.iter().map(|&t| time_text(t)).collect();
            writeln!(
                f,
                "  launch grid over {} physical cores (instances round robin): {}; HBM traffic \
                 and FLOPs below are the launch's, the rest the slowest core's",
                self.core_ns.len(),
                cores.join(", ")
            )?;
        }
        writeln!(
            f,
            "  bound: {}, roofline fraction {:.0}%",
            self.bound,
            self.roofline_fraction * 100.0
        )?;
        if self.flops > 0.0 {
            writeln!(
                f,
                "  tensor engine at {:.0}% of its peak for these operands",
                100.0 * self.tensor_peak_fraction()
            )?;
        }
        writeln!(
            f,
            "  HBM read {:.0} KiB, write {:.0} KiB; {:.3} GFLOP",
            self.hbm_read_bytes / 1024.0,
            self.hbm_write_bytes / 1024.0,
            self.flops / 1e9
        )?;
        writeln!(
            f,
            "  HBM roofline (each tensor moved once, {:.0} KiB): {:.0}%",
            self.hbm_compulsory_bytes / 1024.0,
            100.0 * self.hbm_roofline_fraction
        )?;
        let dma_busy: f64 = self
            .engines
            .iter()
            .filter(|e| matches!(e.engine, Engine::Dma(_)))
            .map(|e| e.busy_ns)
            .sum();
        let queues = self
            .engines
            .iter()
            .filter(|e| matches!(e.engine, Engine::Dma(_)))
            .count();
        for e in self
            .engines
            .iter()
            .filter(|e| !matches!(e.engine, Engine::Dma(_)))
        {
            writeln!(
                f,
                "  {:<7} busy {:>10}  {:>5.1}%  {} instructions",
                e.engine.to_string(),
                time_text(e.busy_ns),
                100.0 * self.utilisation(e.engine),
                e.instructions
            )?;
        }
        if queues > 0 {
            writeln!(
                f,
                "  dma     busy {:>10}  {:>5.1}%  over {queues} DMA engines (mean per engine)",
                time_text(dma_busy / queues as f64),
                100.0 * dma_busy / queues as f64 / self.total_ns.max(1e-9)
            )?;
        }
        Ok(())
    }
}
