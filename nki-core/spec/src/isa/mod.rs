//! `nki.isa` instructions as data: each one's keyword signature in NKI's order with each
//! parameter's kind and default, the engines it runs on, the NeuronCore versions that have it
//! and whether torch-nki implements it yet. The declarations are [`INSTRUCTIONS`]; this
//! module holds their vocabulary and lookups.

use serde::Serialize;

mod table;

pub use table::INSTRUCTIONS;

/// A NeuronCore version (`nisa.nc_version`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum NcVersion {
    /// NeuronCore-v2: Trn1 / Inf2.
    Gen2,
    /// NeuronCore-v3: Trn2.
    Gen3,
    /// NeuronCore-v4: Trn3.
    Gen4,
}

impl NcVersion {
    /// Every version, oldest first.
    pub const ALL: [NcVersion; 3] = [NcVersion::Gen2, NcVersion::Gen3, NcVersion::Gen4];

    /// The `nisa.nc_version` variant name (`gen2`).
    pub const fn name(self) -> &'static str {
        match self {
            NcVersion::Gen2 => "gen2",
            NcVersion::Gen3 => "gen3",
            NcVersion::Gen4 => "gen4",
        }
    }

    /// `NeuronCore-v2` ... `NeuronCore-v4`, as the docs write it.
    pub const fn neuron_core(self) -> &'static str {
        match self {
            NcVersion::Gen2 => "NeuronCore-v2",
            NcVersion::Gen3 => "NeuronCore-v3",
            NcVersion::Gen4 => "NeuronCore-v4",
        }
    }

    /// `Trn1` ... `Trn3`, as the docs write it.
    pub const fn trainium_title(self) -> &'static str {
        match self {
            NcVersion::Gen2 => "Trn1",
            NcVersion::Gen3 => "Trn2",
            NcVersion::Gen4 => "Trn3",
        }
    }

    /// The Trainium generation built on it (`trn1`, `trn2`, `trn3`).
    pub const fn trainium(self) -> &'static str {
        match self {
            NcVersion::Gen2 => "trn1",
            NcVersion::Gen3 => "trn2",
            NcVersion::Gen4 => "trn3",
        }
    }
}

/// The NeuronCore versions an instruction is available on: a contiguous range from `since`.
/// (Every instruction of NKI 0.7 that exists on a version exists on the later ones too.)
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Targets {
    /// The oldest version that has it.
    pub since: NcVersion,
}

impl Targets {
    /// Every NeuronCore version.
    pub const ALL: Targets = Targets {
        since: NcVersion::Gen2,
    };
    /// NeuronCore-v3 (Trn2) and newer.
    pub const GEN3: Targets = Targets {
        since: NcVersion::Gen3,
    };
    /// NeuronCore-v4 (Trn3) and newer.
    pub const GEN4: Targets = Targets {
        since: NcVersion::Gen4,
    };

    /// Whether `version` has the instruction.
    pub fn includes(self, version: NcVersion) -> bool {
        version >= self.since
    }
}

/// An engine (`nisa.engine`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Engine {
    /// The tensor engine.
    Tensor,
    /// The vector engine.
    Vector,
    /// The scalar (activation) engine.
    Scalar,
    /// The GpSimd engine.
    Gpsimd,
    /// A DMA engine.
    Dma,
    /// The sync engine.
    Sync,
}

impl Engine {
    /// The `nisa.engine` variant name.
    pub const fn name(self) -> &'static str {
        match self {
            Engine::Tensor => "tensor",
            Engine::Vector => "vector",
            Engine::Scalar => "scalar",
            Engine::Gpsimd => "gpsimd",
            Engine::Dma => "dma",
            Engine::Sync => "sync",
        }
    }
}

/// What a parameter accepts.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", content = "of", rename_all = "snake_case")]
pub enum Kind {
    /// An on-chip tile (SBUF or PSUM) the instruction writes.
    TileOut,
    /// An on-chip tile the instruction (or `nl` function) reads.
    TileIn,
    /// A tile or an HBM tensor the instruction writes (the DMA instructions).
    TensorOut,
    /// A tile or an HBM tensor the instruction reads (the DMA instructions).
    TensorIn,
    /// A list of tiles or HBM tensors the instruction reads.
    TensorsIn,
    /// An immediate number, or a tile giving one value per partition (`float | NkiTensor`).
    Scalar,
    /// A tile read element by element, or an immediate number standing for every element
    /// (`nisa.tensor_copy_predicated`'s `src`, the operands of `nl.add`).
    TileOrNumber,
    /// An `nl` arithmetic, comparison or bitwise function (`nl.add`), as an operator.
    Operator,
    /// An `nl` activation function (`nl.exp`).
    Activation,
    /// A variant of the named `nisa` enum.
    Enum(&'static str),
    /// `True` or `False`.
    Bool,
    /// An integer.
    Int,
    /// A number (integer or float) used as an immediate.
    Number,
    /// An axis or a tuple of axes.
    Axes,
    /// A tuple of integers.
    Ints,
    /// A list of numbers (`nisa.dma_compute`'s `scales`).
    Numbers,
    /// An access pattern: a list of `[step, count]` pairs.
    Pattern,
    /// A list of core ids.
    Cores,
    /// A virtual register (`nisa.register_alloc`) or an integer.
    Register,
    /// A Python string.
    Str,
    /// A tensor shape: a tuple of integers, the partition dimension first on chip.
    Shape,
    /// An `nl` dtype (`nl.float32`).
    DType,
    /// An `nl` buffer (`nl.sbuf`, `nl.psum`, `nl.shared_hbm`, ...).
    Buffer,
    /// A Python callable (the body of `nl.fori_loop` / `nl.while_loop`).
    Callable,
    /// Any Python value (`nl.shared_constant`'s array or `.npy` path).
    Any,
}

/// A parameter's default value, as NKI writes it.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
#[serde(tag = "default", content = "value", rename_all = "snake_case")]
pub enum Default {
    /// No default: the caller must pass it.
    Required,
    /// `None`.
    None,
    /// A boolean.
    Bool(bool),
    /// An integer.
    Int(i64),
    /// A float.
    Float(f64),
    /// `nisa.<enum>.<variant>`.
    Enum(&'static str, &'static str),
    /// `nl.<name>` (an operator default such as `nl.maximum`).
    Operator(&'static str),
    /// `()`.
    EmptyTuple,
    /// `...` (a value the instruction picks from its other arguments).
    Ellipsis,
    /// `nl.<dtype>` (`nl.uint8`).
    DType(&'static str),
    /// `nl.<buffer>` (`nl.sbuf`).
    Buffer(&'static str),
    /// A string literal (`''`).
    Str(&'static str),
}

/// One keyword parameter.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct Param {
    /// Its keyword.
    pub name: &'static str,
    /// What it accepts.
    #[serde(flatten)]
    pub kind: Kind,
    /// Its default.
    #[serde(flatten)]
    pub default: Default,
}

/// Whether torch-nki implements an instruction.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "status", content = "note", rename_all = "snake_case")]
pub enum Status {
    /// Traced, validated, simulated, costed and emitted.
    Implemented,
    /// Not implemented yet: calling it raises `NotImplementedError` naming the call and line.
    Planned,
    /// Not applicable to torch-nki, with the reason.
    NotApplicable(&'static str),
}

/// One `nki.isa` instruction.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct InstrSpec {
    /// Its name (`tensor_tensor`).
    pub name: &'static str,
    /// What it computes, in one line.
    pub summary: &'static str,
    /// Its parameters, in NKI's order (the trailing `name=None` included).
    pub params: &'static [Param],
    /// The engines it can run on; where it has an `engine=` parameter, the values that
    /// parameter accepts besides `unknown` (the first is the default).
    pub engines: &'static [Engine],
    /// The NeuronCore versions that have it.
    pub targets: Targets,
    /// Whether torch-nki implements it.
    #[serde(flatten)]
    pub status: Status,
}

impl InstrSpec {
    /// The parameter called `name`.
    pub fn param(&self, name: &str) -> Option<&'static Param> {
        self.params.iter().find(|p| p.name == name)
    }

    /// Whether it takes `engine=`.
    pub fn takes_engine(&self) -> bool {
        self.param("engine").is_some()
    }
}

/// The instruction called `name`.
pub fn instruction(name: &str) -> Option<&'static InstrSpec> {
    INSTRUCTIONS.iter().find(|i| i.name == name)
}

/// What is wrong with a signature as Python would take it: a keyword twice, a required
/// parameter after a defaulted one, a default its kind cannot hold. Empty when it is sound.
#[cfg(test)]
pub(crate) fn signature_problems(params: &[Param]) -> Vec<String> {
    let mut problems = Vec::new();
    let mut seen = std::collections::HashSet::new();
    let mut defaulted = false;
    for p in params {
        if !seen.insert(p.name) {
            problems.push(format!("{} twice", p.name));
        }
        let required = p.default == Default::Required;
        if required && defaulted {
            problems.push(format!("required {} after a defaulted parameter", p.name));
        }
        defaulted |= !required;
        let fits = match p.default {
            Default::Required | Default::None => true,
            Default::Bool(_) => p.kind == Kind::Bool,
            Default::Int(_) => {
                matches!(p.kind, Kind::Int | Kind::Number | Kind::Axes | Kind::Scalar)
            }
            Default::Float(_) => matches!(p.kind, Kind::Scalar | Kind::Number),
            Default::Enum(of, _) => p.kind == Kind::Enum(of),
            Default::Operator(_) => p.kind == Kind::Operator,
            Default::EmptyTuple => p.kind == Kind::Ints,
            // `...`: a value picked from the other arguments (`range_select`'s `on_false_value`,
            // `scalar_tensor_tensor`'s `reduce_op`, which has no default without `reduce_res`).
            Default::Ellipsis => matches!(p.kind, Kind::Number | Kind::Operator),
            Default::DType(_) => p.kind == Kind::DType,
            Default::Buffer(_) => p.kind == Kind::Buffer,
            Default::Str(_) => p.kind == Kind::Str,
        };
        if !fits {
            problems.push(format!(
                "{}: default {:?} does not fit {:?}",
                p.name, p.default, p.kind
            ));
        }
    }
    problems
}

/// Shorthands the table is written with.
pub(crate) mod build {
    use super::{Default, Kind, Param};

    pub(crate) const fn req(name: &'static str, kind: Kind) -> Param {
        Param {
            name,
            kind,
            default: Default::Required,
        }
    }

    pub(crate) const fn opt(name: &'static str, kind: Kind, default: Default) -> Param {
        Param {
            name,
            kind,
            default,
        }
    }

    pub(crate) const fn none(name: &'static str, kind: Kind) -> Param {
        opt(name, kind, Default::None)
    }

    pub(crate) const fn flag(name: &'static str, default: bool) -> Param {
        opt(name, Kind::Bool, Default::Bool(default))
    }

    pub(crate) const fn en(name: &'static str, kind: &'static str, variant: &'static str) -> Param {
        opt(name, Kind::Enum(kind), Default::Enum(kind, variant))
    }

    /// The trailing `name=None` every instruction takes.
    pub(crate) const NAME: Param = none("name", Kind::Str);
}

#[cfg(test)]
mod tests;
