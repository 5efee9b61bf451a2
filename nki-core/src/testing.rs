//! Helpers for kernel authors' tests: run a kernel on host arrays in one call
//! ([`run_kernel`]: contract check, trace, validation, simulation), and build signatures.
//!
//! ```
//! use nki_core::prelude::*;
//! use nki_core::testing::*;
//!
//! /// Doubles every element.
//! #[kernel(shape(x = [N]) -> [N], dtype(x in {f32}) -> x)]
//! pub fn double(x: &Hbm) -> Hbm {
//!     let out = shared_hbm(x.shape(), x.dtype());
//!     let (rows, v, o) = (x.dim(0), x.reshape(&[1, x.dim(0)]), out.reshape(&[1, x.dim(0)]));
//!     let t = sbuf([1, rows], x.dtype());
//!     dma_copy(&t, v);
//!     tensor_scalar(&t, &t, BinOp::Multiply, 2.0);
//!     dma_copy(o, &t);
//!     out
//! }
//!
//! let x = HostArray::new(&[3], DType::F32, [1.0, 2.0, 3.0]);
//! let y = run_kernel(&DOUBLE_KERNEL, &[x], &[], Target::Trn2).unwrap();
//! assert_eq!(y[0].values, [2.0, 4.0, 6.0]);
//! ```

pub use crate::kernel_def::{ScalarValue, Signature};
pub use crate::run::{HostArray, run_kernel, run_kernel_with};
