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
