//! `nl.tile_size`: the hardware limits NKI exposes to kernels, with their values per
//! NeuronCore version. `nki.language.tile_size.rst` names and describes them but gives no
//! values; each declaration says where its value comes from.

use serde::Serialize;

use crate::isa::NcVersion;

/// A constant's value: the same on every NeuronCore version, or one per version.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum TileValue {
    /// One value everywhere.
    Fixed(u64),
    /// NeuronCore-v2, -v3 and -v4, in that order.
    PerTarget([u64; 3]),
}

impl TileValue {
    /// The value on `version`.
    pub const fn on(self, version: NcVersion) -> u64 {
        match self {
            TileValue::Fixed(v) => v,
            TileValue::PerTarget([v2, v3, v4]) => match version {
                NcVersion::Gen2 => v2,
                NcVersion::Gen3 => v3,
                NcVersion::Gen4 => v4,
            },
        }
    }
}

/// One `nl.tile_size` constant.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct TileSize {
    /// Its attribute name (`pmax`).
    pub name: &'static str,
    /// What it limits, in one line.
    pub summary: &'static str,
    /// Its value.
    pub value: TileValue,
    /// Whether the docs deprecate it (and for what).
    pub deprecated: Option<&'static str>,
    /// Where the value comes from.
    pub source: &'static str,
}

impl TileSize {
    /// Its value on `version`.
    pub const fn on(&self, version: NcVersion) -> u64 {
        self.value.on(version)
    }
}

const ARCH: &str =
    "the architecture guides (trainium_inferentia2_arch, trainium2_arch, trainium3_arch)";
const TRACER: &str = "KLR, the NKI tracer of aws-neuron (its tile_size environment)";

/// Usable SBUF bytes per partition: the partition (192 / 224 / 256 KiB) less what the
/// compiler reserves.
const SBUF_USABLE: [u64; 3] = [180_224, 212_984, 245_752];

const fn fixed(
    name: &'static str,
    summary: &'static str,
    value: u64,
    source: &'static str,
) -> TileSize {
    TileSize {
        name,
        summary,
        value: TileValue::Fixed(value),
        deprecated: None,
        source,
    }
}

/// Every `nl.tile_size` constant, in the order of `nki.language.tile_size.rst`.
pub static TILE_SIZES: &[TileSize] = &[
    fixed("pmax", "The most partitions a tile has.", 128, ARCH),
    TileSize {
        deprecated: Some("psum_bank_fmax (the name suggests the whole PSUM partition)"),
        ..fixed(
            "psum_fmax",
            "fp32 elements per partition of one PSUM bank.",
            512,
            ARCH,
        )
    },
    fixed(
        "psum_bank_fmax",
        "fp32 elements per partition of one PSUM bank.",
        512,
        ARCH,
    ),
    fixed(
        "psum_bank_fmax_bytes",
        "Bytes per partition of one PSUM bank.",
        2048,
        ARCH,
    ),
    // The docs: 7 when NKI_DMA_TRANSPOSE_AS_PE_TRANSPOSE lowers dma_transpose to tensor-engine
    // transposes on trn2+ (bank 7 is kept for them); torch-nki does not read that variable.
    fixed(
        "psum_num_banks",
        "PSUM banks a kernel may use per partition.",
        8,
        ARCH,
    ),
    TileSize {
        name: "sbuf_size_bytes",
        summary: "SBUF bytes over all 128 partitions (24 / 28 / 32 MiB).",
        value: TileValue::PerTarget([24 << 20, 28 << 20, 32 << 20]),
        deprecated: None,
        source: ARCH,
    },
    TileSize {
        name: "sbuf_fmax",
        summary: "fp32 elements a tile may have per SBUF partition.",
        value: TileValue::PerTarget([SBUF_USABLE[0] / 4, SBUF_USABLE[1] / 4, SBUF_USABLE[2] / 4]),
        deprecated: None,
        source: TRACER,
    },
    TileSize {
        name: "sbuf_fmax_bytes",
        summary: "Bytes a tile may have per SBUF partition.",
        value: TileValue::PerTarget(SBUF_USABLE),
        deprecated: None,
        source: TRACER,
    },
    fixed(
        "gemm_stationary_fmax",
        "The largest free size of nc_matmul's stationary operand.",
        128,
        ARCH,
    ),
    fixed(
        "gemm_moving_fmax",
        "The largest free size of nc_matmul's moving operand (one PSUM bank of fp32).",
        512,
        ARCH,
    ),
    fixed(
        "bn_stats_fmax",
        "The most elements per partition one bn_stats reads.",
        512,
        "nki.isa.bn_stats",
    ),
    fixed(
        "psum_min_align",
        "The byte alignment of a PSUM free-dimension address.",
        4,
        TRACER,
    ),
    fixed(
        "sbuf_min_align",
        "The byte alignment of an SBUF free-dimension address.",
        1,
        TRACER,
    ),
    TileSize {
        name: "total_available_sbuf_size",
        summary: "Bytes a tile may have per SBUF partition (the same value as sbuf_fmax_bytes).",
        value: TileValue::PerTarget(SBUF_USABLE),
        deprecated: Some("sbuf_fmax_bytes or sbuf_size_bytes (the name suggests all partitions)"),
        source: TRACER,
    },
];

/// The `nl.tile_size` constant called `name`.
pub fn tile_size(name: &str) -> Option<&'static TileSize> {
    TILE_SIZES.iter().find(|t| t.name == name)
}
