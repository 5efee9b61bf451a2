//! The per-generation numbers the cost model uses, one table per target, each with its source.
//! Everything here is an estimate input, not a measurement of this project.
//!
//! Sources are the public NKI documentation (aws-neuron/aws-neuron-sdk), cited by path and
//! section; docs/cost-model.md explains each figure and says what the model does where the
//! documentation is silent.

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
    /// `MIN_II`, the minimum initiation interval of a Vector/Scalar/GpSimd instruction, cycles:
    /// an instruction over N elements per partition takes `max(MIN_II, N)` cycles
    /// (`nki/api/nki.api.shared.rst`, "NKI Engine Selection": "MIN_II is roughly 64 engine
    /// cycles"). The tensor engine's `MM_INIT_LATENCY` is the same 64 cycles
    /// (`trainium_inferentia2_arch.rst`, Tensor Engine, "Cost Model").
    pub min_ii_cycles: f64,
    /// Vector-engine cycles added to an instruction that reads what the engine's previous
    /// instruction wrote (`trainium_inferentia2_arch.rst`, Vector Engine "Cost Model": "add a
    /// static instruction overhead of 100 engine cycles").
    pub vector_dependent_cycles: f64,
    /// The same for the scalar engine: the perf guide measures back-to-back dependent one-element
    /// activations at an initiation interval of ~189 ns, 264 ScalarE cycles on NC-v2
    /// (`nki_perf_guide.rst`, Opt #5), i.e. 200 cycles over `MIN_II`.
    pub scalar_dependent_cycles: f64,
    /// The same for GpSimd (the docs give no figure; the vector engine's 100 cycles).
    pub gpsimd_dependent_cycles: f64,
    /// The largest most-minor free-dim stride, in bytes, at which SBUF and PSUM supply an
    /// engine's read or write interface at full bandwidth (`trainium_inferentia2_arch.rst`,
    /// SBUF/PSUM "Performance Consideration", "Access pattern": 16 bytes, 4 fp32 or 8 bf16
    /// elements).
    pub full_rate_stride_bytes: usize,
    /// The fraction of that bandwidth an interface gets past that stride (the same section:
    /// "half of the peak bandwidth, which translates to roughly 50% performance hit on the
    /// instructions"; the NeuronCore-v2 guide's figure, the later guides give none).
    pub strided_access_bandwidth: f64,
    /// How much faster a LoadStationary is than a MultiplyMoving of the same free size
    /// (`trainium_inferentia2_arch.rst`, "Fast LoadStationary": "up to 4x").
    pub load_stationary_speedup: f64,
    /// DMA engines per NeuronCore (`nki-dma-overview.rst`: "Each NeuronCore (v2-v4) is paired
    /// with 16 DMA engines").
    pub dma_engines: usize,
    /// Queues per DMA engine (`nki-dma-overview.rst`, "DMA Queues": 16, served round robin):
    /// reported, not a separate resource (a queue shares its engine's bandwidth).
    pub dma_queues_per_engine: usize,
    /// SBUF partitions each DMA engine moves (`nki-dma-overview.rst`, "Performance
    /// Considerations": 128 partitions / 16 engines = 8), so a transfer over P partitions
    /// spans ⌈P / 8⌉ engines.
    pub dma_partitions_per_engine: usize,
    /// Bytes per nanosecond per DMA engine (`nki-dma-overview.rst`, the theoretical peak table:
    /// Trainium1 17 B/ns, Trainium2 23, Trainium3 33, × 16 engines).
    pub dma_engine_bytes_per_ns: f64,
    /// The least time a DMA engine spends on one transfer, ns: below ~2 KiB per partition the
    /// transfer is latency-bound (`nki-dma-overview.rst`, "Performance Considerations", the
    /// throughput-against-bytes-per-partition figure: throughput grows in proportion to the
    /// bytes up to 1 KiB per partition, as a fixed time per transfer, ~2.3 KiB per partition
    /// at the peak rate, 800 ns at Trainium2's 23 B/ns for 8 partitions per engine).
    pub dma_min_transfer_ns: f64,
    /// Time per transfer per engine on top of streaming, ns (the same figure: 4 KiB per
    /// partition reaches 96.6% of the 32 KiB point, ~150 bytes per partition at the peak rate,
    /// 52 ns). With it the model gives the DMA overview's Example 1 profile (one engine, 32 KiB,
    /// 1416 ns on Trn2) as 1477 ns.
    pub dma_transfer_overhead_ns: f64,
    /// Fraction of copy throughput an HBM→SBUF `dma_transpose` reaches (`trainium2_arch.rst`,
    /// "DMA Transpose": "up to 90%").
    pub dma_transpose_efficiency: f64,
    /// The same for SBUF→SBUF (`trainium2_arch.rst`: "up to 50% of DMA throughput").
    pub dma_sbuf_transpose_efficiency: f64,
    /// Time a hardware-DGE (`dge_mode=hwdge`) DMA instruction takes before its transfer starts,
    /// ns (`nki-dge.rst`, "hwdge": "approximately 600 ns"; `trainium2_arch.rst`, DGE). Trn1 has
    /// no hardware DGE (0).
    pub hwdge_ns: f64,
    /// Completion latency of one DMA transfer, ns: from the engines finishing its bytes to the
    /// data being visible (HBM round trip, the completion semaphore). Engines keep several
    /// transfers in flight, so this delays dependents but does not occupy the engine. The NKI
    /// docs give no figure; 1.2 µs is an assumption of this model.
    pub dma_latency_ns: f64,
}

impl CostTable {
    /// The table for `target`.
    pub const fn for_target(target: Target) -> CostTable {
        // What every generation shares; the figures the docs give per generation follow.
        const BASE: CostTable = CostTable {
            tensor_ghz: 2.4,
            vector_ghz: 0.96,
            scalar_ghz: 1.2,
            gpsimd_ghz: 1.2,
            vector_lane_rate_16: 4.0,
            vector_lane_rate_32: 2.0,
            min_ii_cycles: 64.0,
            vector_dependent_cycles: 100.0,
            scalar_dependent_cycles: 200.0,
            gpsimd_dependent_cycles: 100.0,
            full_rate_stride_bytes: 16,
            strided_access_bandwidth: 0.5,
            load_stationary_speedup: 4.0,
            dma_engines: 16,
            dma_queues_per_engine: 16,
            dma_partitions_per_engine: 8,
            dma_engine_bytes_per_ns: 23.0,
            dma_min_transfer_ns: 800.0,
            dma_transfer_overhead_ns: 52.0,
            dma_transpose_efficiency: 0.9,
            dma_sbuf_transpose_efficiency: 0.5,
            hwdge_ns: 600.0,
            dma_latency_ns: 1200.0,
        };
        match target {
            Target::Trn1 => CostTable {
                tensor_ghz: 2.8,
                vector_ghz: 1.12,
                scalar_ghz: 1.4,
                gpsimd_ghz: 1.4,
                vector_lane_rate_16: 1.0,
                vector_lane_rate_32: 1.0,
                dma_engine_bytes_per_ns: 17.0,
                hwdge_ns: 0.0,
                ..BASE
            },
            Target::Trn2 => BASE,
            Target::Trn3 => CostTable {
                vector_ghz: 1.2,
                dma_engine_bytes_per_ns: 33.0,
                ..BASE
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

    /// Peak DMA bytes per second over every engine.
    pub fn dma_peak_bytes_per_s(&self) -> f64 {
        self.dma_engines as f64 * self.dma_engine_bytes_per_ns * 1e9
    }

    /// Vector-engine elements per lane per cycle for `dtype`.
    pub fn vector_lane_rate(&self, dtype: DType) -> f64 {
        if dtype.size_bytes() <= 2 {
            self.vector_lane_rate_16
        } else {
            self.vector_lane_rate_32
        }
    }

    /// How many DMA engines a transfer over `partitions` rows spans.
    pub fn dma_engines_for(&self, partitions: usize) -> usize {
        partitions
            .div_ceil(self.dma_partitions_per_engine.max(1))
            .clamp(1, self.dma_engines.max(1))
    }

    /// How long one engine spends on its share of a transfer, `bytes` of it, ns.
    pub fn dma_engine_ns(&self, bytes: f64) -> f64 {
        (bytes / self.dma_engine_bytes_per_ns).max(self.dma_min_transfer_ns)
            + self.dma_transfer_overhead_ns
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn dma_curve_is_latency_bound_below_two_kib_per_partition_and_saturates_by_four() {
        let t = CostTable::for_target(Target::Trn2);
        // 128 partitions of `b` bytes: 16 engines of 8 partitions each.
        let throughput = |b: f64| 128.0 * b / t.dma_engine_ns(8.0 * b);
        let peak = t.dma_engines as f64 * t.dma_engine_bytes_per_ns;
        assert!(throughput(256.0) < 0.15 * peak);
        assert!(throughput(1024.0) < 0.5 * peak);
        assert!(throughput(4096.0) > 0.9 * peak);
        assert!(throughput(32768.0) > 0.99 * peak);
        // The DMA overview's Example 1: [4, 4096] bf16 on one engine, 1416 ns measured on Trn2.
        assert_eq!(t.dma_engines_for(4), 1);
        let ns = t.dma_engine_ns(32768.0);
        assert!((ns / 1416.0 - 1.0).abs() < 0.05, "{ns}");
        assert_eq!(t.dma_engines_for(128), 16);
        assert_eq!(t.dma_engines_for(300), 16);
    }

    #[test]
    fn documented_per_engine_bandwidths() {
        let rates = Target::ALL.map(|t| CostTable::for_target(t).dma_peak_bytes_per_s() / 1e9);
        assert_eq!(rates, [272.0, 368.0, 528.0]);
    }
}
