//! # nki-spec
//!
//! The NKI 0.7 API (Neuron SDK 2.33) as plain data, declared once: each `nki.isa` instruction's
//! keyword signature (order, kinds, defaults), the engines it runs on and the NeuronCore
//! versions that have it ([`isa`]); the `nki.isa` enums ([`enums`]); the `nki.language`
//! vocabulary: its functions, dtypes, buffers and tile sizes, and the operators and activation
//! functions instructions accept ([`language`]). Nothing here simulates or emits anything: the
//! tile language, the NKI frontend, code generation and the generated coverage table read these
//! declarations, so an instruction's or a name's surface is written in one place.
//!
//! Semantics come from the NKI docs (`nki/api/nki.isa.rst`, `nki.language.rst`,
//! `nki.api.shared.rst` and the API stubs of aws-neuron/aws-neuron-sdk); the summaries here are
//! this project's own words.

#![warn(missing_docs)]

pub mod enums;
pub mod isa;
pub mod language;

pub use enums::{ENUMS, EnumSpec, EnumValue, Variant, enum_spec};
pub use isa::{
    Default, Engine, INSTRUCTIONS, InstrSpec, Kind, NcVersion, Param, Status, Targets, instruction,
};
pub use language::{
    ACTIVATIONS, ActivationSpec, BUFFERS, BufferSpec, Category, DTYPES, DTypeClass, DTypeSpec,
    FUNCTIONS, FloatFormat, FnSpec, InputRange, NameSpec, OPERATORS, OTHER_NAMES, OpClass,
    OperatorSpec, Stability, TILE_SIZES, TileSize, TileValue, activation, buffer, dtype, function,
    operator, other_name, tile_size,
};
