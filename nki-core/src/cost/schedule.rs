//! Scheduling a program on the engines of one NeuronCore: the program is walked with its loops
//! unrolled (as NKI specialises them), each compute instruction goes to its engine in program
//! order, each DMA transfer to the queue where it can start first (queues run transfers in the
//! order their producers trigger them), and starts when its engine is free and
//! the instructions it depends on through tiles (read-after-write, write-after-read,
//! write-after-write) and HBM tensors have finished. A tile allocated inside a loop is a fresh
//! buffer each iteration (the compiler multi-buffers them), so independent iterations overlap.
//! The instances of a launch grid ([`crate::ir::LoopKind::Grid`]) are distributed round robin
//! over the physical cores (`Scheduler::on_core`); the instances of one core run one after the
//! other, each starting when the previous one has finished.

use super::queue::Queue;
use super::table::CostTable;
use super::{Engine, Slice};
use crate::dtype::DType;
use crate::ir::{
    Buffer, DmaOperand, ElementwiseEngine, HbmAccess, Op, Program, Stmt, TileId, TileRegion,
    TransposeEngine,
};
use std::collections::HashMap;

/// Vector-engine cycles a free-dim reduction adds to `scalar_tensor_tensor`: one MIN_II, as
/// NKI estimates `tensor_scalar_reduce` (`max(MIN_II, N) + MIN_II` cycles).
const REDUCE_EXTRA_CYCLES: f64 = 64.0;

/// The iterations the cost model charges a device loop: a range's trip count when both bounds
/// are immediates, else one (its real count is only known at run time).
pub(crate) fn device_loop_trip(control: &crate::ir::LoopControl) -> usize {
    control.static_trip().unwrap_or(1)
}

/// A tile buffer instance: the tile and which allocation of it (one per loop iteration).
type TileKey = (TileId, u32);

/// What the scheduler has seen of one buffer: when its last write ends, when its last read ends,
/// and which slices those were.
#[derive(Clone, Copy, Default)]
struct BufferTimes {
    write_end: f64,
    write_by: Option<usize>,
    read_end: f64,
    read_by: Option<usize>,
}

/// One HBM access of an output tensor: flat element range `lo..=hi`, when it ends, which slice.
#[derive(Clone, Copy)]
struct Access {
    lo: i64,
    hi: i64,
    end: f64,
    by: usize,
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
    tiles: HashMap<TileKey, BufferTimes>,
    /// Per output tensor: the flat element ranges written and read so far, with their end
    /// times and slices.
    hbm_writes: HashMap<u32, Vec<Access>>,
    hbm_reads: HashMap<u32, Vec<Access>>,
    engine_free: HashMap<Engine, (f64, Option<usize>)>,
    /// Per DMA queue, when it is free (see [`Queue`]).
    queues: Vec<Queue>,
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
            tiles: HashMap::new(),
            hbm_writes: HashMap::new(),
            hbm_reads: HashMap::new(),
            engine_free: HashMap::new(),
            queues: vec![Queue::default(); table.dma_queues],
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
                            self.instance_start = self
                                .slices
                                .iter()
                                .enumerate()
                                .max_by(|a, b| a.1.done_ns.total_cmp(&b.1.done_ns))
                                .map_or((0.0, None), |(i, x)| (x.done_ns, Some(i)));
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

    /// Places a transfer that may start at `ready` and takes `duration`: on the queue where it
    /// can start first, in the earliest gap at or after `ready` (queues run transfers in the
    /// order their producers trigger them, not in program order, so a store waiting for its
    /// data does not hold up a later load). Returns the queue, the start, and the slice the
    /// queue was busy with just before (if the transfer waited for it).
    fn place_dma(&self, ready: f64, duration: f64) -> (usize, f64, Option<usize>) {
        let mut best = (0, f64::INFINITY, None);
        for (q, queue) in self.queues.iter().enumerate() {
            let (start, waited_for) = queue.earliest(ready, duration);
            if start < best.1 {
                best = (q, start, waited_for);
            }
        }
        best
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

    /// The engine, duration (ns) and work of one instruction.
    fn cost(&mut self, op: &Op) -> (Engine, f64) {
        let t = self.table;
        let vector = |inputs: f64, r: &TileRegion, dt: DType, work: &mut Work| {
            let lanes = t.vector_lane_rate(dt);
            let per_input = (r.nf as f64 / lanes).ceil();
            work.vector_min_ns +=
                inputs * r.nf as f64 / lanes * (r.np as f64 / 128.0) / t.vector_ghz;
            (t.engine_fixed_cycles + inputs * per_input) / t.vector_ghz
        };
        match op {
            Op::DmaCopy { dst, src } => {
                // The queue is chosen when the transfer is placed (see `place_dma`).
                let queue = 0;
                let (access, write) = match (dst, src) {
                    (DmaOperand::Hbm { access }, _) => (access, true),
                    (_, DmaOperand::Hbm { access }) => (access, false),
                    // DMA always has an HBM side (validated); keep the model total anyway.
                    (DmaOperand::Tile { region }, _) => {
                        let bytes =
                            (region.np * region.nf * self.dtype(region).size_bytes()) as f64;
                        return (Engine::Dma(queue as u8), bytes / t.dma_queue_bytes_per_ns);
                    }
                };
                let size = self.program.hbm[access.tensor.0 as usize]
                    .dtype
                    .size_bytes();
                let bytes = (access.np * access.nf * size) as f64;
                if write {
                    self.work.hbm_write += bytes;
                } else {
                    self.work.hbm_read += bytes;
                }
                (
                    Engine::Dma(queue as u8),
                    charged_bytes(access, size, &t) / t.dma_queue_bytes_per_ns,
                )
            }
            // Sequencer instructions: no engine time (an assumption: the docs give none).
            Op::RegisterAlloc { .. } | Op::RegisterMove { .. } => (Engine::GpSimd, 0.0),
            // An assumption (the docs give no latency): the barrier's semaphore update and wait
            // take one fixed instruction overhead on GpSimd; the time spent waiting for the other
            // core is not modelled (each core's instances are costed on their own core).
            Op::CoreBarrier { .. } => (Engine::GpSimd, t.engine_fixed_cycles / t.vector_ghz),
            // The tile crosses to the other core through a DMA queue, as an SBUF-to-SBUF copy.
            Op::SendRecv { src, .. } => {
                let bytes = (src.np * src.nf * self.dtype(src).size_bytes()) as f64;
                (Engine::Dma(0), bytes / t.dma_queue_bytes_per_ns)
            }
            // One 32-bit element through a DMA queue, charged as a 16-byte unit.
            Op::RegisterLoad { src: o, .. } | Op::RegisterStore { dst: o, .. } => {
                if let DmaOperand::Hbm { .. } = o {
                    if matches!(op, Op::RegisterLoad { .. }) {
                        self.work.hbm_read += 4.0;
                    } else {
                        self.work.hbm_write += 4.0;
                    }
                }
                (Engine::Dma(0), 16.0 / t.dma_queue_bytes_per_ns)
            }
            Op::DmaCompute { dst, srcs, .. } => {
                // An assumption (the docs give no rate): the DMA engine streams every source
                // and the destination once, each element at least a 16-byte unit when a side
                // is strided, as dma_copy is charged.
                let mut bytes = 0.0;
                for (o, write) in srcs.iter().map(|s| (s, false)).chain([(dst, true)]) {
                    let (n, size) = match o {
                        DmaOperand::Tile { region } => {
                            (region.np * region.nf, self.dtype(region).size_bytes())
                        }
                        DmaOperand::Hbm { access } => {
                            let size = self.program.hbm[access.tensor.0 as usize]
                                .dtype
                                .size_bytes();
                            let moved = (access.np * access.nf * size) as f64;
                            if write {
                                self.work.hbm_write += moved;
                            } else {
                                self.work.hbm_read += moved;
                            }
                            bytes += charged_bytes(access, size, &t);
                            continue;
                        }
                    };
                    bytes += (n * size) as f64;
                }
                (Engine::Dma(0), bytes / t.dma_queue_bytes_per_ns)
            }
            Op::DmaTranspose { dst, src, .. } => {
                // An assumption (NKI only says a DMA transpose uses much less of the DMA
                // bandwidth than a load): every element moves as its own 16-byte unit, as a
                // strided dma_copy does in this model.
                let elements = (dst.np * dst.nf) as f64;
                let size = self.dtype(dst).size_bytes();
                if let DmaOperand::Hbm { .. } = src {
                    self.work.hbm_read += elements * size as f64;
                }
                let bytes = elements * size.max(16) as f64;
                (Engine::Dma(0), bytes / t.dma_queue_bytes_per_ns)
            }
            Op::TensorTensor {
                dst,
                a,
                b,
                engine: ElementwiseEngine::Vector,
                ..
            } => {
                let dt = self.streamed_dtype(&[a, b, dst]);
                (Engine::Vector, vector(2.0, a, dt, &mut self.work))
            }
            Op::TensorTensor {
                a,
                engine: ElementwiseEngine::GpSimd,
                ..
            } => {
                // Eight 512-bit cores: 128 fp32 lanes, one element per partition per cycle for
                // each input (the vector engine's two-input rule), whatever the dtype.
                let per_input = a.nf as f64;
                self.work.gpsimd_min_ns += 2.0 * per_input * (a.np as f64 / 128.0) / t.gpsimd_ghz;
                let cycles = t.engine_fixed_cycles + 2.0 * per_input;
                (Engine::GpSimd, cycles / t.gpsimd_ghz)
            }
            Op::ScalarTensorTensor {
                dst,
                data,
                operand1,
                reduce,
                ..
            } => {
                // Two streamed inputs, as tensor_tensor: operand0's broadcast costs nothing, and
                // the (P, 1) reduce_res does not set the rate.
                let dt = self.streamed_dtype(&[data, operand1, dst]);
                let ns = vector(2.0, data, dt, &mut self.work);
                let reduce_ns = if reduce.is_some() {
                    REDUCE_EXTRA_CYCLES / t.vector_ghz
                } else {
                    0.0
                };
                (Engine::Vector, ns + reduce_ns)
            }
            Op::TensorScalar { dst, data, .. }
            | Op::RangeSelect {
                dst, on_true: data, ..
            } => {
                let dt = self.streamed_dtype(&[data, dst]);
                (Engine::Vector, vector(1.0, data, dt, &mut self.work))
            }
            Op::TensorCopyPredicated {
                dst,
                src,
                predicate,
                ..
            } => {
                // The predicate and, when it is a tile, src stream in, as tensor_tensor's inputs.
                let (inputs, dt) = match src {
                    Some(s) => (2.0, self.streamed_dtype(&[s, predicate, dst])),
                    None => (1.0, self.streamed_dtype(&[predicate, dst])),
                };
                (
                    Engine::Vector,
                    vector(inputs, predicate, dt, &mut self.work),
                )
            }
            Op::NcStreamShuffle { dst, src, .. } => {
                // An assumption (NKI gives no estimate): one streamed input, as tensor_copy.
                let dt = self.streamed_dtype(&[src, dst]);
                (Engine::Vector, vector(1.0, src, dt, &mut self.work))
            }
            Op::TensorTensorScan {
                dst, data0, data1, ..
            } => {
                // Two streamed inputs, as tensor_tensor (initial broadcasts as tensor_scalar's
                // operand does).
                let dt = self.streamed_dtype(&[data0, data1, dst]);
                (Engine::Vector, vector(2.0, data0, dt, &mut self.work))
            }
            Op::SelectReduce {
                dst,
                predicate,
                on_true,
                reduce_res,
                ..
            } => {
                // An assumption (NKI gives no estimate): two streamed inputs (predicate and
                // on_true), as tensor_copy_predicated, plus one MIN_II for the row maximum, as
                // for the other fused reductions.
                let dt = self.streamed_dtype(&[predicate, on_true, dst]);
                let ns = vector(2.0, on_true, dt, &mut self.work);
                let reduce_ns = if reduce_res.is_some() {
                    REDUCE_EXTRA_CYCLES / t.vector_ghz
                } else {
                    0.0
                };
                (Engine::Vector, ns + reduce_ns)
            }
            Op::TensorScalarCumulative { dst, src, .. } => {
                // An assumption (NKI gives no estimate): one streamed input, as tensor_scalar
                // (the running reduction at the streaming rate).
                let dt = self.streamed_dtype(&[src, dst]);
                (Engine::Vector, vector(1.0, src, dt, &mut self.work))
            }
            Op::TensorScalarReduce { dst, data, .. } => {
                // tensor_scalar's pass plus one MIN_II: NKI's max(MIN_II, N) + MIN_II.
                let dt = self.streamed_dtype(&[data, dst]);
                let ns = vector(1.0, data, dt, &mut self.work);
                (Engine::Vector, ns + REDUCE_EXTRA_CYCLES / t.vector_ghz)
            }
            Op::Exponential {
                dst,
                src,
                reduce_res,
                ..
            } => {
                // One streamed input (max_value broadcasts as tensor_scalar's operand does),
                // plus one MIN_II for the row sum, as for the other fused reductions.
                let dt = self.streamed_dtype(&[src, dst]);
                let ns = vector(1.0, src, dt, &mut self.work);
                let reduce_ns = if reduce_res.is_some() {
                    REDUCE_EXTRA_CYCLES / t.vector_ghz
                } else {
                    0.0
                };
                (Engine::Vector, ns + reduce_ns)
            }
            // One pass over the searched elements, as a one-input vector instruction (NKI gives
            // no estimate for them); their (P, 8) operands do not set the rate.
            Op::Max8 { src: data, .. }
            | Op::NcFindIndex8 { data, .. }
            | Op::NcMatchReplace8 { data, .. } => {
                let dt = self.dtype(data);
                (Engine::Vector, vector(1.0, data, dt, &mut self.work))
            }
            Op::TensorReduce { data, .. } => {
                let dt = self.dtype(data);
                (Engine::Vector, vector(1.0, data, dt, &mut self.work))
            }
            Op::BnStats { data, .. } => {
                // One pass over its (at most 512) elements, as a one-input vector instruction.
                let dt = self.dtype(data);
                (Engine::Vector, vector(1.0, data, dt, &mut self.work))
            }
            Op::BnAggr { data, .. } => {
                // NKI's estimate: max(64, 13 · N / 3) vector cycles for N elements per partition.
                let busy = 13.0 * (data.nf as f64 / 3.0);
                self.work.vector_min_ns += busy * (data.np as f64 / 128.0) / t.vector_ghz;
                (
                    Engine::Vector,
                    busy.max(t.engine_fixed_cycles) / t.vector_ghz,
                )
            }
            Op::TensorCopy { dst, src } | Op::Reciprocal { dst, data: src } => {
                // One streamed input (reciprocal is one ALU pass, as tensor_scalar).
                let dt = self.streamed_dtype(&[src, dst]);
                (Engine::Vector, vector(1.0, src, dt, &mut self.work))
            }
            Op::Memset { dst, .. } => {
                if self.buffer(dst) == Buffer::Psum {
                    // GpSimd cannot reach PSUM.
                    let dt = self.dtype(dst);
                    (Engine::Vector, vector(1.0, dst, dt, &mut self.work))
                } else {
                    let cycles = t.engine_fixed_cycles + dst.nf as f64;
                    (Engine::GpSimd, cycles / t.gpsimd_ghz)
                }
            }
            // Assumptions (NKI gives no estimate): random values cost one pass writing dst, at
            // the vector rate or, on GpSimd, as memset into SBUF; dropout streams data once;
            // seeding is the fixed overhead, a state load or store that plus one cycle per word.
            Op::Rng {
                dst,
                engine: ElementwiseEngine::GpSimd,
            } => {
                let cycles = t.engine_fixed_cycles + dst.nf as f64;
                (Engine::GpSimd, cycles / t.gpsimd_ghz)
            }
            Op::Rng { dst, .. } | Op::Rand2 { dst, .. } => {
                let dt = self.dtype(dst);
                (Engine::Vector, vector(1.0, dst, dt, &mut self.work))
            }
            Op::Dropout { dst, data, .. } => {
                let dt = self.streamed_dtype(&[data, dst]);
                (Engine::Vector, vector(1.0, data, dt, &mut self.work))
            }
            Op::SetRngSeed { .. } => (Engine::Vector, t.engine_fixed_cycles / t.vector_ghz),
            Op::RandSetState {
                src_seeds: r,
                engine,
            }
            | Op::RandGetState { dst: r, engine } => {
                let cycles = t.engine_fixed_cycles + r.nf as f64;
                match engine {
                    ElementwiseEngine::Vector => (Engine::Vector, cycles / t.vector_ghz),
                    ElementwiseEngine::GpSimd => (Engine::GpSimd, cycles / t.gpsimd_ghz),
                }
            }
            Op::Iota { dst, .. } => {
                // As memset into SBUF (validation keeps iota out of PSUM).
                let cycles = t.engine_fixed_cycles + dst.nf as f64;
                (Engine::GpSimd, cycles / t.gpsimd_ghz)
            }
            Op::SequenceBounds { segment_ids, .. } => {
                // An assumption (NKI gives no estimate): two passes over the ids on GpSimd (the
                // starts forward, the ends backward), one element per cycle each.
                let per_input = 2.0 * segment_ids.nf as f64;
                self.work.gpsimd_min_ns +=
                    per_input * (segment_ids.np as f64 / 128.0) / t.gpsimd_ghz;
                let cycles = t.engine_fixed_cycles + per_input;
                (Engine::GpSimd, cycles / t.gpsimd_ghz)
            }
            Op::NonzeroWithCount { src, .. } => {
                // An assumption (NKI gives no estimate): each GpSimd core streams its one
                // partition, one element per cycle, and writes T + 1 results.
                let per_input = 2.0 * src.nf as f64 + 1.0;
                self.work.gpsimd_min_ns += per_input / t.gpsimd_ghz;
                let cycles = t.engine_fixed_cycles + per_input;
                (Engine::GpSimd, cycles / t.gpsimd_ghz)
            }
            Op::Topk { val_dst, n, .. } => {
                // NKI's estimate: 4·n + K GpSimd cycles (the cores, one snake each, in parallel).
                let cycles = 4.0 * *n as f64 + val_dst.nf as f64;
                self.work.gpsimd_min_ns += cycles / t.gpsimd_ghz;
                (Engine::GpSimd, cycles / t.gpsimd_ghz)
            }
            Op::TensorPartitionReduce { data, .. } => {
                // An assumption (NKI gives no estimate): one streamed input on GpSimd, as
                // affine_select's, the partitions combined at no extra cost.
                let per_input = data.nf as f64;
                self.work.gpsimd_min_ns += per_input * (data.np as f64 / 128.0) / t.gpsimd_ghz;
                let cycles = t.engine_fixed_cycles + per_input;
                (Engine::GpSimd, cycles / t.gpsimd_ghz)
            }
            Op::LocalGather { dst, .. } | Op::NcNGather { dst, .. } => {
                // An assumption (NKI gives no estimate): one element per partition per cycle
                // for each element written, after the fixed overhead, as GpSimd's other
                // one-input instructions.
                let per_input = dst.nf as f64;
                self.work.gpsimd_min_ns += per_input * (dst.np as f64 / 128.0) / t.gpsimd_ghz;
                let cycles = t.engine_fixed_cycles + per_input;
                (Engine::GpSimd, cycles / t.gpsimd_ghz)
            }
            Op::AffineSelect { on_true, .. } => {
                // One streamed input on GpSimd: one element per partition per cycle (as its
                // tensor_tensor's rule, per input), after the fixed overhead.
                let per_input = on_true.nf as f64;
                self.work.gpsimd_min_ns += per_input * (on_true.np as f64 / 128.0) / t.gpsimd_ghz;
                let cycles = t.engine_fixed_cycles + per_input;
                (Engine::GpSimd, cycles / t.gpsimd_ghz)
            }
            Op::Activation { data, .. } => {
                self.work.scalar_min_ns += data.nf as f64 * (data.np as f64 / 128.0) / t.scalar_ghz;
                let cycles = t.engine_fixed_cycles + data.nf as f64;
                (Engine::Scalar, cycles / t.scalar_ghz)
            }
            Op::Activate2 { data, reduce, .. } => {
                // An assumption (NKI gives no estimate): activation's one pass (the two
                // tensor-scalar stages are in the same pipeline), plus one fixed overhead for
                // the instruction the docs say reads the accumulators out into reduce_res.
                self.work.scalar_min_ns += data.nf as f64 * (data.np as f64 / 128.0) / t.scalar_ghz;
                let readout = if reduce.is_some() {
                    t.engine_fixed_cycles
                } else {
                    0.0
                };
                let cycles = t.engine_fixed_cycles + data.nf as f64 + readout;
                (Engine::Scalar, cycles / t.scalar_ghz)
            }
            Op::NcTranspose {
                data,
                engine: TransposeEngine::Vector,
                ..
            } => {
                // An assumption (the docs give no rate): one vector pass over the at most 32 × 32
                // elements.
                let dt = self.dtype(data);
                (Engine::Vector, vector(1.0, data, dt, &mut self.work))
            }
            Op::NcTranspose { data, .. } => {
                // An identity matmul: the `[P, P]` identity is the moving operand.
                let fp32 = if self.dtype(data) == DType::F32 {
                    4.0
                } else {
                    1.0
                };
                let cycles = (data.np as f64).max(64.0) * fp32;
                (Engine::Tensor, cycles / t.tensor_ghz)
            }
            Op::QuantizeMx { src, .. } => {
                // The Trainium3 guide: QuantizeMX quantises four input elements per partition
                // per cycle (the vector engine's 4x mode), after the fixed overhead.
                let per_input = (src.nf as f64 / 4.0).ceil();
                self.work.vector_min_ns +=
                    src.nf as f64 / 4.0 * (src.np as f64 / 128.0) / t.vector_ghz;
                let cycles = t.engine_fixed_cycles + per_input;
                (Engine::Vector, cycles / t.vector_ghz)
            }
            Op::NcMatmulMx {
                stationary, moving, ..
            } => {
                // The Trainium3 guide: each processing element does four MX multiply-adds per
                // cycle (4x a bf16 matmul's throughput), so the moving tile streams as a bf16
                // one of the same packed shape does while contracting 4K values.
                let (k, m, n) = (stationary.np, stationary.nf, moving.nf);
                let flops = 2.0 * (4 * k * m * n) as f64;
                self.work.flops += flops;
                self.work.tensor_min_ns += flops / (4.0 * t.tensor_peak_flops(DType::BF16)) * 1e9;
                let cycles = (n as f64).max(64.0);
                (Engine::Tensor, cycles / t.tensor_ghz)
            }
            Op::NcMatmul {
                stationary, moving, ..
            } => {
                let dt = self.dtype(moving);
                let (k, m, n) = (stationary.np, stationary.nf, moving.nf);
                let flops = 2.0 * (k * m * n) as f64;
                self.work.flops += flops;
                self.work.tensor_min_ns += flops / t.tensor_peak_flops(dt) * 1e9;
                let fp32 = if dt == DType::F32 { 4.0 } else { 1.0 };
                let cycles = (n as f64).max(64.0) * fp32;
                (Engine::Tensor, cycles / t.tensor_ghz)
            }
        }
    }

    fn schedule(&mut self, op: &Op, loc: crate::loc::SourceLoc) {
        let (mut engine, duration) = self.cost(op);
        // A grid instance starts when the core's previous instance has finished.
        let (mut start, mut pred) = self.instance_start;
        let mut wait = |t: f64, by: Option<usize>| {
            if t > start {
                start = t;
                pred = by;
            }
        };
        let reads: Vec<TileKey> = op.tile_reads().iter().map(|r| self.key(r)).collect();
        let writes: Vec<TileKey> = op.tile_writes().iter().map(|r| self.key(r)).collect();
        for k in &reads {
            let b = self.tiles.get(k).copied().unwrap_or_default();
            wait(b.write_end, b.write_by);
        }
        for k in &writes {
            let b = self.tiles.get(k).copied().unwrap_or_default();
            wait(b.write_end, b.write_by);
            wait(b.read_end, b.read_by);
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
                    wait(a.end, Some(a.by));
                }
            }
        }
        // `start` is when the inputs are ready; now the engine (in program order) or a queue.
        let index = self.slices.len();
        if let Engine::Dma(_) = engine {
            let (q, s, waited_for) = self.place_dma(start, duration);
            if s > start {
                pred = waited_for;
            }
            start = s;
            engine = Engine::Dma(q as u8);
            self.queues[q].occupy(start, start + duration, index, self.min_dma_ns);
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
        });
        if !matches!(engine, Engine::Dma(_)) {
            self.engine_free.insert(engine, (end, Some(index)));
        }
        for k in reads {
            let b = self.tiles.entry(k).or_default();
            if end > b.read_end {
                b.read_end = end;
                b.read_by = Some(index);
            }
        }
        for k in writes {
            let b = self.tiles.entry(k).or_default();
            b.write_end = done;
            b.write_by = Some(index);
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
                by: index,
            });
        }
    }
}

/// Bytes a DMA is charged for: contiguous rows at least `dma_min_row_bytes` each (small rows
/// are overhead-bound); a strided (transposed) pattern moves every element as its own 16-byte
/// unit, an assumption of this model.
fn charged_bytes(access: &HbmAccess, size: usize, t: &CostTable) -> f64 {
    if access.f_stride == 1 || access.nf == 1 {
        (access.np * (access.nf * size).max(t.dma_min_row_bytes)) as f64
    } else {
        (access.np * access.nf * size.max(16)) as f64
    }
}
