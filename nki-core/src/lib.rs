//! # nki-core
//!
//! NKI (Neuron Kernel Interface) kernels in Rust. This crate owns the tile language kernel
//! authors write ([`lang`]), the Program IR it traces to ([`ir`]), the hardware targets and
//! their constraints ([`target`], [`validate`]), the CPU simulator ([`sim`]) and kernel
//! contracts ([`contract`], [`kernel_def`]). The `#[kernel]` attribute is re-exported from
//! `nki-macros`.
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
pub mod coverage;
pub mod error;
pub mod ir;
pub mod kernel_def;
pub mod lang;
pub mod loc;
pub mod op_info;
pub mod run;
pub mod sim;
pub mod target;
pub mod validate;

pub use dtype::DType;
pub use error::{NkiError, ValidationError};
pub use kernel_def::{KernelDef, ScalarValue, Signature};
pub use nki_macros::kernel;
pub use run::{HostArray, run_kernel};
pub use target::Target;

/// Everything a kernel author needs: `use nki_core::prelude::*;`.
pub mod prelude {
    pub use crate::affine::AffineExpr;
    pub use crate::dtype::DType;
    pub use crate::ir::{ActFn, BinOp, TileRegion};
    pub use crate::kernel;
    pub use crate::kernel_def::{KernelDef, ScalarValue};
    pub use crate::lang::*;
    pub use crate::run::{HostArray, run_kernel};
    pub use crate::target::Target;
    pub use crate::target::{
        GEMM_MOVING_FMAX, GEMM_STATIONARY_FMAX, PMAX, PSUM_BANK_FMAX, PSUM_BANKS,
    };
}

/// The README's code blocks, compiled and run as doctests so the quick start stays true.
#[cfg(doctest)]
#[doc = include_str!("../../README.md")]
pub struct ReadmeDoctests;

/// Paths the `#[kernel]` expansion uses; not part of the public API.
#[doc(hidden)]
pub mod __private {
    pub use inventory;
}
