//! How long each instruction occupies its engine, from the per-target table
//! ([`CostTable`]): the documented initiation intervals of the compute engines and the DMA
//! engines' transfer curve (see docs/cost-model.md for every figure's source).

use super::{Scheduler, Work};
use crate::cost::Engine;
use crate::cost::table::CostTable;
use crate::dtype::DType;
use crate::ir::{
    Buffer, DmaOperand, ElementwiseEngine, HbmAccess, MatmulPerfMode, Op, TileRegion,
    TransposeEngine,
};

/// Vector-engine cycles a free-dim reduction adds to `scalar_tensor_tensor`: one MIN_II, as
/// NKI estimates `tensor_scalar_reduce` (`max(MIN_II, N) + MIN_II` cycles).
const REDUCE_EXTRA_CYCLES: f64 = 64.0;

impl Scheduler<'_> {
    /// The engine, duration (ns) and work of one instruction.
    pub(super) fn cost(&mut self, op: &Op) -> (Engine, f64) {
        let t = self.table;
        // A compute instruction's streaming cycles (before the MIN_II floor) are multiplied by
        // this; the roofline's work is not (it is the work at peak).
        let slow = self.stream_slowdown(op);
        let vector = |inputs: f64, r: &TileRegion, dt: DType, work: &mut Work| {
            let lanes = t.vector_lane_rate(dt);
            let per_input = (r.nf as f64 / lanes).ceil();
            work.vector_min_ns +=
                inputs * r.nf as f64 / lanes * (r.np as f64 / 128.0) / t.vector_ghz;
            (inputs * per_input * slow).max(t.min_ii_cycles) / t.vector_ghz
        };
        match op {
            // A dtype view's sync copy runs nowhere (`Scheduler::schedule` places no slice for
            // it): no work, no time, and no DMA to count among the transfers.
            Op::DmaCopy {
                reinterpret: true, ..
            } => (Engine::GpSimd, 0.0),
            Op::DmaCopy { dst, src, .. } => {
                let (access, write) = match (dst, src) {
                    (DmaOperand::Hbm { access }, _) => (access, true),
                    (_, DmaOperand::Hbm { access }) => (access, false),
                    // DMA always has an HBM side (validated); keep the model total anyway.
                    (DmaOperand::Tile { region }, _) => {
                        let row = (region.nf * self.dtype(region).size_bytes()) as f64;
                        return dma(&t, region.np, row);
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
                dma(&t, access.np, row_bytes(access, size))
            }
            // Sequencer instructions: no engine time (an assumption: the docs give none).
            Op::RegisterAlloc { .. } | Op::RegisterMove { .. } => (Engine::GpSimd, 0.0),
            // An assumption (the docs give no latency): the barrier's semaphore update and wait
            // take one MIN_II on GpSimd; the time spent waiting for the other core is not
            // modelled (each core's instances are costed on their own core).
            Op::CoreBarrier { .. } => (Engine::GpSimd, t.min_ii_cycles / t.gpsimd_ghz),
            // The tile crosses to the other core through the DMA engines, as an SBUF-to-SBUF
            // copy of its partitions.
            Op::SendRecv { src, .. } => {
                let row = (src.nf * self.dtype(src).size_bytes()) as f64;
                dma(&t, src.np, row)
            }
            // One 32-bit element through one DMA engine: a transfer, latency-bound.
            Op::RegisterLoad { src: o, .. } | Op::RegisterStore { dst: o, .. } => {
                if let DmaOperand::Hbm { .. } = o {
                    if matches!(op, Op::RegisterLoad { .. }) {
                        self.work.hbm_read += 4.0;
                    } else {
                        self.work.hbm_write += 4.0;
                    }
                }
                dma(&t, 1, 4.0)
            }
            Op::DmaCompute { dst, srcs, .. } => {
                // An assumption (the docs give no rate): the DMA engines stream every source
                // and the destination once, each side charged as dma_copy charges it, over the
                // destination's partitions.
                let mut row = 0.0;
                let mut rows = 1;
                for (o, write) in srcs.iter().map(|s| (s, false)).chain([(dst, true)]) {
                    match o {
                        DmaOperand::Tile { region } => {
                            rows = rows.max(region.np);
                            row += (region.nf * self.dtype(region).size_bytes()) as f64;
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
                            rows = rows.max(access.np);
                            row += row_bytes(access, size);
                        }
                    }
                }
                dma(&t, rows, row)
            }
            Op::DmaTranspose { dst, src, .. } => {
                // The 16 engines write the transposed tile co-operatively at up to 90% of a
                // copy's throughput from HBM, 50% from SBUF (the Trainium2 guide, "DMA
                // Transpose"); the model charges those best cases.
                let size = self.dtype(dst).size_bytes();
                let bytes = (dst.np * dst.nf * size) as f64;
                let efficiency = match src {
                    DmaOperand::Hbm { .. } => {
                        self.work.hbm_read += bytes;
                        t.dma_transpose_efficiency
                    }
                    DmaOperand::Tile { .. } => t.dma_sbuf_transpose_efficiency,
                };
                let engines = t.dma_engines.max(1);
                let share = bytes / efficiency / engines as f64;
                (Engine::Dma(engines as u8), t.dma_engine_ns(share))
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
                let cycles = (2.0 * per_input * slow).max(t.min_ii_cycles);
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
                    (busy * slow).max(t.min_ii_cycles) / t.vector_ghz,
                )
            }
            Op::TensorCopy { dst, src } => {
                // One streamed input.
                let dt = self.streamed_dtype(&[src, dst]);
                (Engine::Vector, vector(1.0, src, dt, &mut self.work))
            }
            Op::Reciprocal { dst, data } => {
                // `max(MIN_II, 8N)` vector cycles, 8x ScalarE's rate (nki.api.shared, "NKI
                // Engine Selection": reciprocal on the vector engine).
                let dt = self.streamed_dtype(&[data, dst]);
                (Engine::Vector, vector(8.0, data, dt, &mut self.work))
            }
            Op::Memset { dst, .. } => {
                if self.buffer(dst) == Buffer::Psum {
                    // GpSimd cannot reach PSUM.
                    let dt = self.dtype(dst);
                    (Engine::Vector, vector(1.0, dst, dt, &mut self.work))
                } else {
                    let cycles = (dst.nf as f64 * slow).max(t.min_ii_cycles);
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
                let cycles = (dst.nf as f64 * slow).max(t.min_ii_cycles);
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
            Op::SetRngSeed { .. } => (Engine::Vector, t.min_ii_cycles / t.vector_ghz),
            Op::RandSetState {
                src_seeds: r,
                engine,
            }
            | Op::RandGetState { dst: r, engine } => {
                let cycles = (r.nf as f64 * slow).max(t.min_ii_cycles);
                match engine {
                    ElementwiseEngine::Vector => (Engine::Vector, cycles / t.vector_ghz),
                    ElementwiseEngine::GpSimd => (Engine::GpSimd, cycles / t.gpsimd_ghz),
                }
            }
            Op::Iota { dst, .. } => {
                // As memset into SBUF (validation keeps iota out of PSUM).
                let cycles = (dst.nf as f64 * slow).max(t.min_ii_cycles);
                (Engine::GpSimd, cycles / t.gpsimd_ghz)
            }
            Op::SequenceBounds { segment_ids, .. } => {
                // An assumption (NKI gives no estimate): two passes over the ids on GpSimd (the
                // starts forward, the ends backward), one element per cycle each.
                let per_input = 2.0 * segment_ids.nf as f64;
                self.work.gpsimd_min_ns +=
                    per_input * (segment_ids.np as f64 / 128.0) / t.gpsimd_ghz;
                let cycles = (per_input * slow).max(t.min_ii_cycles);
                (Engine::GpSimd, cycles / t.gpsimd_ghz)
            }
            Op::NonzeroWithCount { src, .. } => {
                // An assumption (NKI gives no estimate): each GpSimd core streams its one
                // partition, one element per cycle, and writes T + 1 results.
                let per_input = 2.0 * src.nf as f64 + 1.0;
                self.work.gpsimd_min_ns += per_input / t.gpsimd_ghz;
                let cycles = (per_input * slow).max(t.min_ii_cycles);
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
                let cycles = (per_input * slow).max(t.min_ii_cycles);
                (Engine::GpSimd, cycles / t.gpsimd_ghz)
            }
            Op::LocalGather { dst, .. } | Op::NcNGather { dst, .. } => {
                // An assumption (NKI gives no estimate): one element per partition per cycle
                // for each element written, after the fixed overhead, as GpSimd's other
                // one-input instructions.
                let per_input = dst.nf as f64;
                self.work.gpsimd_min_ns += per_input * (dst.np as f64 / 128.0) / t.gpsimd_ghz;
                let cycles = (per_input * slow).max(t.min_ii_cycles);
                (Engine::GpSimd, cycles / t.gpsimd_ghz)
            }
            Op::AffineSelect { on_true, .. } => {
                // One streamed input on GpSimd: one element per partition per cycle (as its
                // tensor_tensor's rule, per input), after the fixed overhead.
                let per_input = on_true.nf as f64;
                self.work.gpsimd_min_ns += per_input * (on_true.np as f64 / 128.0) / t.gpsimd_ghz;
                let cycles = (per_input * slow).max(t.min_ii_cycles);
                (Engine::GpSimd, cycles / t.gpsimd_ghz)
            }
            Op::Activation { data, .. } => {
                self.work.scalar_min_ns += data.nf as f64 * (data.np as f64 / 128.0) / t.scalar_ghz;
                let cycles = (data.nf as f64 * slow).max(t.min_ii_cycles);
                (Engine::Scalar, cycles / t.scalar_ghz)
            }
            Op::Activate2 { data, reduce, .. } => {
                // An assumption (NKI gives no estimate): activation's one pass (the two
                // tensor-scalar stages are in the same pipeline), plus one fixed overhead for
                // the instruction the docs say reads the accumulators out into reduce_res.
                self.work.scalar_min_ns += data.nf as f64 * (data.np as f64 / 128.0) / t.scalar_ghz;
                let readout = if reduce.is_some() {
                    t.min_ii_cycles
                } else {
                    0.0
                };
                let cycles = (data.nf as f64 + readout * slow).max(t.min_ii_cycles);
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
                let cycles = (data.np as f64 * slow).max(64.0) * fp32;
                (Engine::Tensor, cycles / t.tensor_ghz)
            }
            Op::QuantizeMx { src, .. } => {
                // The Trainium3 guide: QuantizeMX quantises four input elements per partition
                // per cycle (the vector engine's 4x mode), after the fixed overhead.
                let per_input = (src.nf as f64 / 4.0).ceil();
                self.work.vector_min_ns +=
                    src.nf as f64 / 4.0 * (src.np as f64 / 128.0) / t.vector_ghz;
                let cycles = (per_input * slow).max(t.min_ii_cycles);
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
                let cycles = (n as f64 * slow).max(64.0);
                (Engine::Tensor, cycles / t.tensor_ghz)
            }
            Op::NcMatmul {
                stationary,
                moving,
                perf_mode,
                ..
            } => {
                // In double-row mode each processing element multiplies two pairs per cycle:
                // the Trainium2 guide's double FP8 instruction over 2·(K/2) takes the time of
                // an ordinary one over K/2, so the time is per output column either way and
                // the peak rate doubles.
                let dt = self.dtype(moving);
                let (k, m, n) = perf_mode.dims(stationary, moving);
                let pairs_per_cycle = match perf_mode {
                    MatmulPerfMode::None => 1.0,
                    MatmulPerfMode::DoubleRow => 2.0,
                };
                let flops = 2.0 * (k * m * n) as f64;
                self.work.flops += flops;
                self.work.tensor_min_ns +=
                    flops / (pairs_per_cycle * t.tensor_peak_flops(dt)) * 1e9;
                let fp32 = if dt == DType::F32 { 4.0 } else { 1.0 };
                let cycles = (n as f64 * slow).max(64.0) * fp32;
                (Engine::Tensor, cycles / t.tensor_ghz)
            }
        }
    }
}

impl Scheduler<'_> {
    /// What a compute instruction's streaming cycles are multiplied by for its SBUF/PSUM access
    /// pattern: `1 / strided_access_bandwidth` when an operand it reads or writes steps more
    /// than `full_rate_stride_bytes` between consecutive elements of its most-minor free dim
    /// (of more than one element), 1 otherwise (see [`CostTable::full_rate_stride_bytes`]).
    fn stream_slowdown(&self, op: &Op) -> f64 {
        let t = self.table;
        let strided = op
            .tile_reads()
            .into_iter()
            .chain(op.tile_writes())
            .any(|r| minor_stride(r) * self.dtype(r).size_bytes() > t.full_rate_stride_bytes);
        if strided {
            1.0 / t.strided_access_bandwidth
        } else {
            1.0
        }
    }
}

/// Elements between consecutive elements of a region's most-minor free dim of more than one
/// element (1 for a contiguous region, 0 when no free dim has more than one).
fn minor_stride(r: &TileRegion) -> usize {
    match &r.pattern {
        None => 1,
        Some(p) => p
            .free
            .iter()
            .rev()
            .find(|d| d.count > 1)
            .map_or(0, |d| d.step),
    }
}

/// Bytes one row of a DMA's HBM side is charged for: a contiguous row its bytes; a strided
/// (transposed) pattern moves every element as its own 16-byte unit, an assumption of this
/// model (the docs only say an access-pattern transpose uses much less DMA bandwidth).
fn row_bytes(access: &HbmAccess, size: usize) -> f64 {
    if access.f_stride == 1 || access.nf == 1 {
        (access.nf * size) as f64
    } else {
        (access.nf * size.max(16)) as f64
    }
}

/// A transfer of `rows` partitions of `row` bytes each: it spans ⌈rows / 8⌉ DMA engines (up to
/// 16), each moving its rows in [`CostTable::dma_engine_ns`]. Returns `Engine::Dma(k)` for `k`
/// engines (which ones is chosen when the transfer is placed) and one engine's time.
fn dma(t: &CostTable, rows: usize, row: f64) -> (Engine, f64) {
    let engines = t.dma_engines_for(rows);
    let per_engine = rows.max(1).div_ceil(engines) as f64 * row;
    (Engine::Dma(engines as u8), t.dma_engine_ns(per_engine))
}
