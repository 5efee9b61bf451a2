//! The parameter types of instructions that are not operands of their own module: per-partition
//! scalar operands, the engine of elementwise instructions, and the DMA modes
//! (`nisa.dge_mode`, `nisa.oob_mode`).

use crate::ir::TileRegion;
use serde::Serialize;

/// A per-partition operand: an immediate scalar, or a `(P, 1)` tile column.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ScalarOperand {
    /// The same value for every element.
    Imm {
        /// The value.
        value: f32,
    },
    /// One value per partition, broadcast along the free dim.
    Column {
        /// A region with `nf == 1`.
        region: TileRegion,
    },
}

/// The engine an elementwise two-tensor instruction runs on: NKI's `engine=` argument of
/// `nisa.tensor_tensor`. The arithmetic is the same (fp32 inside, rounded on write); what differs
/// is throughput, and that GpSimd cannot reach PSUM. Kernels move work to GpSimd when the vector
/// engine is their bottleneck and GpSimd is idle.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ElementwiseEngine {
    /// The vector engine (NKI's default for floating-point data).
    #[default]
    Vector,
    /// The GpSimd engine: eight general-purpose SIMD cores, no PSUM access.
    GpSimd,
}

impl ElementwiseEngine {
    /// The NKI spelling, `nisa.engine.<name>`.
    pub fn nki_name(self) -> &'static str {
        match self {
            ElementwiseEngine::Vector => "vector",
            ElementwiseEngine::GpSimd => "gpsimd",
        }
    }
}

/// The engine an `nc_transpose` runs on: the tensor engine (an identity matmul, SBUF to PSUM,
/// up to 128 × 128) or the vector engine (SBUF or PSUM on either side, up to 32 × 32). The
/// values are the same: a transpose passes its data through.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TransposeEngine {
    /// The tensor engine (NKI's choice for `engine=nisa.engine.unknown`).
    #[default]
    Tensor,
    /// The vector engine.
    Vector,
}

/// The tensor engine's performance mode for `nc_matmul`: NKI's `nisa.matmul_perf_mode`.
///
/// In `DoubleRow` (NeuronCore-v3 and newer, fp8 operands) each processing element holds two
/// stationary elements and multiplies two moving elements per cycle: the operands are
/// `[K/2, 2, M]` and `[K/2, 2, N]`, contracting over their partitions and their most major
/// free dim of 2, in the time an ordinary instruction takes for `K/2` (the Trainium2
/// architecture guide). The operand regions hold both halves: `[K/2, 2·M]` and `[K/2, 2·N]`,
/// each half a contiguous run of the free dims ([`MatmulPerfMode::double_row_halves`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum MatmulPerfMode {
    /// The ordinary mode (NKI's default).
    #[default]
    None,
    /// Double FP8 rows.
    DoubleRow,
}

impl MatmulPerfMode {
    /// The NKI spelling, `nisa.matmul_perf_mode.<name>`.
    pub fn nki_name(self) -> &'static str {
        match self {
            MatmulPerfMode::None => "none",
            MatmulPerfMode::DoubleRow => "double_row",
        }
    }

    /// Whether this is the ordinary mode (what the IR's serialisation leaves out).
    pub fn is_none(&self) -> bool {
        *self == MatmulPerfMode::None
    }

    /// `(K, M, N)` of a matmul in this mode on these operand regions: `K` the values each
    /// output element sums over, `M` and `N` the output's rows and columns.
    pub fn dims(self, stationary: &TileRegion, moving: &TileRegion) -> (usize, usize, usize) {
        match self {
            MatmulPerfMode::None => (stationary.np, stationary.nf, moving.nf),
            MatmulPerfMode::DoubleRow => (2 * stationary.np, stationary.nf / 2, moving.nf / 2),
        }
    }

    /// A `DoubleRow` operand's two halves along its most major free dim, the contraction rows
    /// the tensor engine takes second half after first half: for a rectangle, the two halves
    /// of its free elements; for a strided region, that dim's two indices. `None` when the
    /// region does not have two such halves.
    pub fn double_row_halves(region: &TileRegion) -> Option<[TileRegion; 2]> {
        match &region.pattern {
            None if region.nf.is_multiple_of(2) => {
                let nf = region.nf / 2;
                Some([0, 1].map(|j| {
                    TileRegion::rect(region.tile, region.p0, region.np, region.f0 + j * nf, nf)
                }))
            }
            Some(p) if p.free.first().is_some_and(|d| d.count == 2) => Some([0, 1].map(|j| {
                TileRegion::strided(
                    region.tile,
                    (region.p0, region.np, p.partition_step),
                    region.f0 + j * p.free[0].step,
                    p.free[1..].to_vec(),
                )
            })),
            _ => None,
        }
    }
}

/// How a DMA's descriptors are generated: NKI's `nisa.dge_mode`. The simulator moves the same
/// bytes whichever is chosen; validation checks which an instruction allows.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum DgeMode {
    /// The compiler chooses (NKI's default).
    #[default]
    Unknown,
    /// Software descriptor generation on GpSimd (the indirect forms).
    Swdge,
    /// The hardware descriptor generator (NeuronCore-v3 and newer).
    Hwdge,
    /// Descriptors made by the runtime before execution.
    None,
}

impl DgeMode {
    /// Every mode, in `nisa.dge_mode`'s order.
    pub const ALL: [DgeMode; 4] = [
        DgeMode::Unknown,
        DgeMode::Swdge,
        DgeMode::Hwdge,
        DgeMode::None,
    ];

    /// The NKI spelling, `nisa.dge_mode.<name>`.
    pub fn nki_name(self) -> &'static str {
        match self {
            DgeMode::Unknown => "unknown",
            DgeMode::Swdge => "swdge",
            DgeMode::Hwdge => "hwdge",
            DgeMode::None => "none",
        }
    }

    /// The mode `nisa.dge_mode.<name>` names.
    pub fn from_nki_name(name: &str) -> Option<DgeMode> {
        DgeMode::ALL.into_iter().find(|m| m.nki_name() == name)
    }
}

/// One `[step, num]` entry of `nisa.iota`'s `pattern` (outermost first): `num` values `step`
/// apart. The free elements of the destination region, in order, walk the entries as nested
/// loops.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct IotaDim {
    /// Added per step of this entry.
    pub step: i32,
    /// How many steps (the entry's size).
    pub num: usize,
}

/// The per-free-element offsets of an iota `pattern` (`Σ index_d · step_d` for flat free index
/// `f`, int32 wrapping as the engine's arithmetic), `Π num_d` of them.
pub fn iota_offsets(pattern: &[IotaDim]) -> Vec<i32> {
    let mut offsets = vec![0i32];
    for d in pattern {
        let mut next = Vec::with_capacity(offsets.len() * d.num);
        for &o in &offsets {
            next.extend((0..d.num).map(|i| o.wrapping_add(d.step.wrapping_mul(i as i32))));
        }
        offsets = next;
    }
    offsets
}

/// What a DMA does with an out-of-bounds index of an indirect access: NKI's `nisa.oob_mode`.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum OobMode {
    /// A runtime error (NKI's default).
    #[default]
    Error,
    /// The transfer of that index is skipped.
    Skip,
}

impl OobMode {
    /// The NKI spelling, `nisa.oob_mode.<name>`.
    pub fn nki_name(self) -> &'static str {
        match self {
            OobMode::Error => "error",
            OobMode::Skip => "skip",
        }
    }

    /// The mode `nisa.oob_mode.<name>` names.
    pub fn from_nki_name(name: &str) -> Option<OobMode> {
        [OobMode::Error, OobMode::Skip]
            .into_iter()
            .find(|m| m.nki_name() == name)
    }
}
