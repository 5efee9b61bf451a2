//! `nki.language` (`nl`) of NKI 0.7 as data: every public function with its signature
//! ([`FUNCTIONS`]), the dtypes ([`DTYPES`]), the buffers ([`BUFFERS`]), the `nl.tile_size`
//! constants ([`TILE_SIZES`]), the classes and operator constants ([`OTHER_NAMES`]), and which
//! `nl` names `nki.isa` instructions accept as an `op=` operator ([`OPERATORS`]) or as an
//! activation function ([`ACTIVATIONS`]). Signatures reuse the instruction vocabulary
//! ([`Param`], [`Kind`](crate::Kind), [`Default`](crate::Default)).
//!
//! Sources: the API stub `nki/api/nki/language/__init__.py`, `nki.language.rst`,
//! `nki.language.tile_size.rst` and `nki.api.shared.rst` (the dtype, operator and activation
//! tables) of aws-neuron/aws-neuron-sdk; where a fact comes from elsewhere the declaration
//! says so. Summaries are this project's own words.

use serde::Serialize;

use crate::isa::{NcVersion, Param, Targets};

mod dtypes;
mod functions;
mod ops;
mod tile_size;

pub use dtypes::{DTYPES, DTypeClass, DTypeSpec, FloatFormat, Specials, dtype};
pub use functions::{FUNCTIONS, function};
pub use ops::{
    ACTIVATIONS, ActivationSpec, Arity, InputRange, OPERATORS, OpClass, OperatorSpec, activation,
    operator,
};
pub use tile_size::{TILE_SIZES, TileSize, TileValue, tile_size};

/// Where a name sits in `nl`: the sections of `nki.language.rst`, plus `Spmd` (the launch-grid
/// queries the docs list under "Others") and the non-function names.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Category {
    /// Allocating and filling tensors (`ndarray`, `zeros`, `rand`, ...).
    Creation,
    /// Tile-level data movement and matrix work (`load`, `store`, `copy`, `matmul`, ...).
    TensorOps,
    /// Elementwise arithmetic (`add`, `exp`, `sqrt`, ...).
    Math,
    /// Activation functions and their derivatives (`relu`, `gelu_dx`, `softmax`, ...).
    Activation,
    /// Normalisation and regularisation (`rms_norm`, `dropout`).
    Normalization,
    /// Reductions over free axes (`sum`, `max`, `mean`, `var`, ...).
    Reduction,
    /// Elementwise comparisons (`equal`, `less`, ...).
    Comparison,
    /// Elementwise logical operations (`logical_and`, ...).
    Logical,
    /// Elementwise bitwise operations (`bitwise_and`, `left_shift`, ...).
    Bitwise,
    /// Reshaping views of tiles (`broadcast_to`, `expand_dims`, `ds`).
    Manipulation,
    /// Selecting and gathering elements (`where`, `gather_flattened`).
    Indexing,
    /// Loop iterators (`affine_range`, `static_range`, ...).
    Iterator,
    /// Device loops (`fori_loop`, `while_loop`).
    ControlFlow,
    /// The memory hierarchy: buffers and buffer predicates (`sbuf`, `is_psum`, ...).
    Memory,
    /// The SPMD launch grid (`program_id`, `num_programs`, `program_ndim`).
    Spmd,
    /// Everything else (`device_print`, `no_reorder`).
    Other,
    /// A dtype (`float32`, `float8_e4m3fn`, ...).
    DType,
    /// A constant: `tile_size` and the operator constants (`prelu`, `bypass`, `average`).
    Constant,
    /// A class or type (`NkiTensor`, `NKIObject`, ...).
    Class,
}

/// Whether the docs call a function stable, experimental or deprecated.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Stability {
    /// No warning in its documentation.
    Stable,
    /// Documented as experimental (it may change).
    Experimental,
    /// Documented as deprecated (it will be removed).
    Deprecated,
}

/// One `nl` function.
#[derive(Clone, Copy, Debug, PartialEq, Serialize)]
pub struct FnSpec {
    /// Its name (`add`).
    pub name: &'static str,
    /// Its section.
    pub category: Category,
    /// What it does, in one line.
    pub summary: &'static str,
    /// Its parameters, in NKI's order.
    pub params: &'static [Param],
    /// Stable, experimental or deprecated.
    pub stability: Stability,
    /// The NeuronCore versions that have it.
    pub targets: Targets,
}

impl FnSpec {
    /// The parameter called `name`.
    pub fn param(&self, name: &str) -> Option<&'static Param> {
        self.params.iter().find(|p| p.name == name)
    }

    /// Whether `version` has it.
    pub fn available_on(&self, version: NcVersion) -> bool {
        self.targets.includes(version)
    }
}

/// One `nl` buffer (`nl.sbuf`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct BufferSpec {
    /// Its name.
    pub name: &'static str,
    /// What it is, in one line.
    pub summary: &'static str,
    /// Whether it is on chip (SBUF, PSUM) rather than HBM.
    pub on_chip: bool,
    /// Whether every program of the SPMD grid sees it (only `shared_hbm`).
    pub shared: bool,
    /// The buffer it is another name for (`hbm` is `private_hbm`).
    pub alias_of: Option<&'static str>,
}

/// Every `nl` buffer (the `nl.MemoryRegion` values and the `hbm` alias).
pub static BUFFERS: &[BufferSpec] = &[
    BufferSpec {
        name: "sbuf",
        summary: "The state buffer: the main on-chip memory, private to each program.",
        on_chip: true,
        shared: false,
        alias_of: None,
    },
    BufferSpec {
        name: "psum",
        summary: "The partial-sum buffer the tensor engine accumulates into, private to each program.",
        on_chip: true,
        shared: false,
        alias_of: None,
    },
    BufferSpec {
        name: "hbm",
        summary: "Device memory private to each program (another name for private_hbm).",
        on_chip: false,
        shared: false,
        alias_of: Some("private_hbm"),
    },
    BufferSpec {
        name: "private_hbm",
        summary: "Device memory private to each program of the SPMD grid.",
        on_chip: false,
        shared: false,
        alias_of: None,
    },
    BufferSpec {
        name: "shared_hbm",
        summary: "Device memory every program of the SPMD grid sees (kernel outputs live here).",
        on_chip: false,
        shared: true,
        alias_of: None,
    },
];

/// The buffer called `name`.
pub fn buffer(name: &str) -> Option<&'static BufferSpec> {
    BUFFERS.iter().find(|b| b.name == name)
}

/// A public `nl` name that is neither a function, a dtype nor a buffer: the classes, the
/// `tile_size` namespace and the operator constants.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct NameSpec {
    /// Its name.
    pub name: &'static str,
    /// [`Category::Class`] or [`Category::Constant`].
    pub category: Category,
    /// What it is, in one line.
    pub summary: &'static str,
}

/// Every other public `nl` name.
pub static OTHER_NAMES: &[NameSpec] = &[
    NameSpec {
        name: "NKIObject",
        category: Category::Class,
        summary: "Base class of NKI values and of the dataclasses kernels pass as configuration.",
    },
    NameSpec {
        name: "NkiTensor",
        category: Category::Class,
        summary: "A tensor or a view of one (shape, dtype, buffer); views share storage.",
    },
    NameSpec {
        name: "MemoryRegion",
        category: Category::Class,
        summary: "The enum of buffers (sbuf, psum, private_hbm, shared_hbm).",
    },
    NameSpec {
        name: "DType",
        category: Category::Class,
        summary: "The type of dtype values (NKI spells a dtype as a string).",
    },
    NameSpec {
        name: "tile_size",
        category: Category::Constant,
        summary: "The hardware's tile limits (see TILE_SIZES).",
    },
    NameSpec {
        name: "prelu",
        category: Category::Constant,
        summary: "Parametric ReLU, an activation function only: the negative slope is the instruction's relu_param.",
    },
    NameSpec {
        name: "bypass",
        category: Category::Constant,
        summary: "The no-op operator: an op0/op1 stage that passes its input through.",
    },
    NameSpec {
        name: "average",
        category: Category::Constant,
        summary: "The mean, as a reduction operator (tensor_partition_reduce names it; the stub leaves it undocumented).",
    },
];

/// The other name called `name`.
pub fn other_name(name: &str) -> Option<&'static NameSpec> {
    OTHER_NAMES.iter().find(|n| n.name == name)
}

/// Every public `nl` name with its category: the functions, dtypes, buffers and other names
/// (what the coverage table lists).
pub fn names() -> impl Iterator<Item = (&'static str, Category)> {
    FUNCTIONS
        .iter()
        .map(|f| (f.name, f.category))
        .chain(DTYPES.iter().map(|d| (d.name, Category::DType)))
        .chain(BUFFERS.iter().map(|b| (b.name, Category::Memory)))
        .chain(OTHER_NAMES.iter().map(|n| (n.name, n.category)))
}

#[cfg(test)]
mod tests;
