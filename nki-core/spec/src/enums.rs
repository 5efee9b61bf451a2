//! The enums of `nki.isa` (`nisa.engine`, `nisa.reduce_cmd`, ...), as NKI 0.7 defines them:
//! each variant's name and value. The frontend builds its Python `enum.Enum` classes from
//! these, and `nki.isa.constants` re-exports them.

use serde::Serialize;

/// A variant's value: NKI uses integers for most enums and strings for `matmul_perf_mode`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(untagged)]
pub enum EnumValue {
    /// An integer value.
    Int(i64),
    /// A string value.
    Str(&'static str),
}

/// One variant of an enum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Variant {
    /// Its name (`vector`).
    pub name: &'static str,
    /// Its value.
    pub value: EnumValue,
    /// What it means, in one line.
    pub doc: &'static str,
}

/// An `nki.isa` enum.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct EnumSpec {
    /// Its name under `nki.isa` (`engine`).
    pub name: &'static str,
    /// What it is for, in one line.
    pub doc: &'static str,
    /// Its variants, in NKI's order.
    pub variants: &'static [Variant],
}

impl EnumSpec {
    /// The variant called `name`.
    pub fn variant(&self, name: &str) -> Option<&'static Variant> {
        self.variants.iter().find(|v| v.name == name)
    }
}

const fn int(name: &'static str, value: i64, doc: &'static str) -> Variant {
    Variant {
        name,
        value: EnumValue::Int(value),
        doc,
    }
}

const fn text(name: &'static str, doc: &'static str) -> Variant {
    Variant {
        name,
        value: EnumValue::Str(name),
        doc,
    }
}

/// Every `nki.isa` enum.
pub static ENUMS: &[EnumSpec] = &[
    EnumSpec {
        name: "engine",
        doc: "The engine an instruction runs on.",
        variants: &[
            int(
                "tensor",
                1,
                "the tensor engine (matrix multiplication, transposes)",
            ),
            int("vector", 5, "the vector engine"),
            int("scalar", 2, "the scalar engine (activation functions)"),
            int(
                "gpsimd",
                3,
                "the GpSimd engine (general-purpose SIMD cores; no PSUM access)",
            ),
            int("dma", 4, "a DMA engine"),
            int("sync", 6, "the sync engine"),
            int("unknown", 0, "let the compiler choose"),
        ],
    },
    EnumSpec {
        name: "reduce_cmd",
        doc: "What an instruction does with the engine's accumulator registers.",
        variants: &[
            int("idle", 0, "leave the accumulators alone"),
            int("reset", 1, "reset the accumulators"),
            int(
                "reduce",
                2,
                "accumulate this instruction's results into the accumulators",
            ),
            int(
                "reset_reduce",
                3,
                "reset, then accumulate this instruction's results",
            ),
            int(
                "load_reduce",
                4,
                "load a value into the accumulators, then accumulate",
            ),
        ],
    },
    EnumSpec {
        name: "dge_mode",
        doc: "How a DMA's descriptors are generated.",
        variants: &[
            int("unknown", 0, "let the compiler choose"),
            int("swdge", 1, "software descriptor generation (on GpSimd)"),
            int("hwdge", 2, "hardware descriptor generation"),
            int("none", 3, "static descriptors, no descriptor generation"),
        ],
    },
    EnumSpec {
        name: "oob_mode",
        doc: "What a DMA does with an out-of-bounds indirect access.",
        variants: &[
            int("error", 0, "raise a runtime error"),
            int("skip", 1, "skip the access"),
        ],
    },
    EnumSpec {
        name: "matmul_perf_mode",
        doc: "The tensor engine's performance mode.",
        variants: &[
            text("none", "the default mode"),
            text(
                "double_row",
                "fp8 with two weight/input element pairs packed: twice the throughput",
            ),
        ],
    },
    EnumSpec {
        name: "nc_version",
        doc: "A NeuronCore version.",
        variants: &[
            int("gen2", 2, "NeuronCore-v2: Trn1 / Inf2"),
            int("gen3", 3, "NeuronCore-v3: Trn2"),
            int("gen4", 4, "NeuronCore-v4: Trn3"),
        ],
    },
    EnumSpec {
        name: "dma_engine",
        doc: "The engine that carries a sendrecv transfer.",
        variants: &[
            int(
                "dma",
                1,
                "the shared DMA, synchronised with a core barrier (default)",
            ),
            int(
                "gpsimd_dma",
                2,
                "GpSimd's own DMA engine, for low-latency swaps under LNC=2",
            ),
        ],
    },
];

/// The enum called `name`.
pub fn enum_spec(name: &str) -> Option<&'static EnumSpec> {
    ENUMS.iter().find(|e| e.name == name)
}
