//! # nki-core
//!
//! NKI (Neuron Kernel Interface) kernels in Rust. This crate owns the tile language kernel
//! authors write ([`language`] and [`isa`], mirroring `nki.language` and `nki.isa`, built on
//! [`lang`]), the Program IR it traces to ([`ir`]), the hardware targets and their constraints
//! ([`target`], [`validate`]), output coverage ([`coverage`]), the CPU simulator ([`sim`], with
//! its engine arithmetic in [`engine_math`]),
//! kernel definitions ([`kernel_def`], [`op_info`], [`autodiff`]) and re-exports the contract
//! vocabulary ([`contract`]). The `#[kernel]` attribute is re-exported from `nki-macros`; test
//! helpers are in [`testing`].
//!
//! ```
//! use nki_core::prelude::*;
//!
//! /// Adds one to every element.
//! #[kernel(shape(x = [N, D]) -> [N, D], dtype(x in {f32}) -> x)]
//! pub fn add_one(x: &Hbm) -> Hbm {
//!     let out = shared_hbm(x.shape(), x.dtype());
//!     for_each_tile(x.dim(0), 128, |rows| {
//!         let t = sbuf([rows.size, x.dim(1)], x.dtype());
//!         dma_copy(&t, x.rows(rows.start.clone(), rows.size));
//!         tensor_scalar(&t, &t, BinOp::Add, 1.0);
//!         dma_copy(out.rows(rows.start, rows.size), &t);
//!     });
//!     out
//! }
//! # fn main() {}
//! ```

#![warn(missing_docs)]

pub mod affine;
pub use nki_contract as contract;
pub use nki_contract::dtype;
pub mod autodiff;
pub mod codegen;
pub mod compile;
pub mod cost;
pub mod coverage;
pub mod engine_math;
pub mod erf;
pub mod error;
pub mod ir;
pub mod isa;
pub mod kernel_def;
pub mod lang;
pub mod language;
pub mod loc;
pub mod op_info;
pub mod run;
pub mod sim;
pub mod target;
pub mod testing;
pub mod validate;
mod wide;

pub use compile::{CheckedSignature, Compiled, compile};
pub use dtype::DType;

/// This crate's version: a native module and the `torch_nki` package it is loaded into must be
/// built against the same one.
pub const VERSION: &str = env!("CARGO_PKG_VERSION");
pub use error::{NkiError, ValidationError, ValidationWarning};
pub use kernel_def::{KernelDef, ScalarValue, Signature};
pub use nki_macros::kernel;
pub use run::{HostArray, run_kernel};
pub use target::Target;

/// Everything a kernel body uses: `use nki_core::prelude::*;` — the `#[kernel]` attribute,
/// [`language`] (buffers, views, loops, tile sizes, dtypes) and [`isa`] (instructions), the
/// instruction enums and element types. Test helpers are in [`testing`].
pub mod prelude {
    pub use crate::affine::AffineExpr;
    pub use crate::dtype::DType;
    pub use crate::ir::{ActFn, BinOp, DgeMode, ElementwiseEngine, OobMode, TileRegion};
    pub use crate::isa::*;
    pub use crate::kernel;
    pub use crate::language::*;
    pub use crate::target::Target;
}

/// The README's code blocks, compiled and run as doctests so the quick start stays true.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// Paths the `#[kernel]` expansion uses; not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use crate::kernel_def::{IntoOutputs, KernelArgs, KernelRegistration};
    pub use inventory;
}
