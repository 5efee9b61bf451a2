//! The per-generation numbers the cost model uses, one table per target, each with its source.
//! Everything here is an estimate input, not a measurement of this project.

use crate::dtype::DType;
use crate::target::Target;

/// Engine clocks, rates and DMA figures of one NeuronCore generation.
#[derive(Clone, Copy, Debug, PartialEq)]
pub struct CostTable {
    /// Tensor engine clock, GHz (nki-facts: NC-v2 2.8, NC-v3/v4 2.4).
    pub tensor_ghz: f64,
    /// Vector engine clock, GHz (nki-facts: 1.12 / 0.96 / 1.2).
    pub vector_ghz: f64,
    /// Scalar engine clock, GHz (nki-facts: 1.4 / 1.2 / 1.2).
    pub scalar_ghz: f64,
    /// GpSimd clock, GHz (nki-facts: 1.4 / 1.2 / 1.2).
    pub gpsimd_ghz: f64,
    /// Vector engine elements per partition lane per cycle for 2-byte dtypes (NC-v2
    /// architecture guide: ~N cycles for N elements, i.e. 1; NC-v3: 512 bf16 elements per cycle
    /// over 128 lanes, i.e. 4).
    pub vector_lane_rate_16: f64,
    /// The same for other dtypes (NC-v3: 256 per cycle over 128 lanes, i.e. 2).
    pub vector_lane_rate_32: f64,
    /// Fixed cycles per Vector/Scalar/GpSimd instruction (NC-v2 guide: ~100 cycles of overhead
    /// for small or back-to-back dependent ops; 64 used as the issue/drain cost of any op).
    pub engine_fixed_cycles: f64,
    /// DMA queues per core (nki-facts: 16).
    pub dma_queues: usize,
    /// Bytes per nanosecond per queue (nki-facts: 17 / 23 / 33). Trn1 uses 25.6, its
    /// NeuronCore's share of the chip's HBM bandwidth (820 GB/s over two cores, over 16
    /// queues): the nki-samples tiled matmul measured on trn1 moves 168 MB in 463 µs, 362 GB/s,
    /// more than 16 × 17 B/ns allows (see `nki-core/tests/calibration.rs`). For Trn2 the two
    /// sources agree (2.9 TB/s over eight cores is 362 GB/s; 16 × 23 is 368).
    pub dma_queue_bytes_per_ns: f64,
    /// Completion latency of one DMA transfer, ns: from the queue finishing its bytes to the
    /// data being visible (HBM round trip, completion signalling). Queues keep several
    /// transfers in flight, so this delays dependents but does not occupy the queue. The NKI
    /// docs give no figure; 1.2 µs is an assumption of this model.
    pub dma_latency_ns: f64,
    /// Below this many bytes per partition row a DMA is overhead-bound (nki-facts: 256 B); a
    /// row is charged at least this much.
    pub dma_min_row_bytes: usize,
}

impl CostTable {
    /// The table for `target`.
    pub const fn for_target(target: Target) -> CostTable {
        match target {
            Target::Trn1 => CostTable {
                tensor_ghz: 2.8,
                vector_ghz: 1.12,
                scalar_ghz: 1.4,
                gpsimd_ghz: 1.4,
                vector_lane_rate_16: 1.0,
                vector_lane_rate_32: 1.0,
                engine_fixed_cycles: 64.0,
                dma_queues: 16,
                dma_queue_bytes_per_ns: 25.6,
                dma_latency_ns: 1200.0,
                dma_min_row_bytes: 256,
            },
            Target::Trn2 => CostTable {
                tensor_ghz: 2.4,
                vector_ghz: 0.96,
                scalar_ghz: 1.2,
                gpsimd_ghz: 1.2,
                vector_lane_rate_16: 4.0,
                vector_lane_rate_32: 2.0,
                engine_fixed_cycles: 64.0,
                dma_queues: 16,
                dma_queue_bytes_per_ns: 23.0,
                dma_latency_ns: 1200.0,
                dma_min_row_bytes: 256,
            },
            Target::Trn3 => CostTable {
                tensor_ghz: 2.4,
                vector_ghz: 1.2,
                scalar_ghz: 1.2,
                gpsimd_ghz: 1.2,
                vector_lane_rate_16: 4.0,
                vector_lane_rate_32: 2.0,
                engine_fixed_cycles: 64.0,
                dma_queues: 16,
                dma_queue_bytes_per_ns: 33.0,
                dma_latency_ns: 1200.0,
                dma_min_row_bytes: 256,
            },
        }
    }

    /// Peak tensor-engine FLOP/s for `dtype` operands: 128×128 MACs per cycle, fp32 at a
    /// quarter of the rate (nki-facts).
    pub fn tensor_peak_flops(&self, dtype: DType) -> f64 {
        let per_cycle = 2.0 * 128.0 * 128.0;
        let rate = if dtype == DType::F32 { 0.25 } else { 1.0 };
        per_cycle * rate * self.tensor_ghz * 1e9
    }

    /// Peak DMA bytes per second over every queue.
    pub fn dma_peak_bytes_per_s(&self) -> f64 {
        self.dma_queues as f64 * self.dma_queue_bytes_per_ns * 1e9
    }

    /// Vector-engine elements per lane per cycle for `dtype`.
    pub fn vector_lane_rate(&self, dtype: DType) -> f64 {
        if dtype.size_bytes() <= 2 {
            self.vector_lane_rate_16
        } else {
            self.vector_lane_rate_32
        }
    }
}
