//! Helpers for kernel authors' tests: run a kernel on host arrays in one call
//! ([`run_kernel`]: contract check, trace, validation, simulation), build signatures, and run a
//! program with its `affine_range` iterations in two orders ([`order_difference`]).
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

use crate::error::NkiError;
use crate::ir::Program;
use crate::sim::{IterationOrder, SimOptions, simulate_to_vecs};

/// Runs `program` on `inputs` (little-endian bytes, in parameter order) with its
/// `affine_range` iterations in each of `orders`, and compares the bits of every output:
/// `Ok(None)` when they are the same, else where the first output differs. A kernel whose
/// iterations are independent gives the same bits in every order; one that differs has a
/// dependence between iterations (or an associative reduction whose rounding depends on the
/// order: compare those with a tolerance instead).
pub fn order_difference(
    program: &Program,
    inputs: &[&[u8]],
    orders: [IterationOrder; 2],
) -> Result<Option<String>, NkiError> {
    let run = |order| {
        let opts = SimOptions {
            order,
            ..SimOptions::default()
        };
        simulate_to_vecs(program, inputs, opts)
    };
    let (a, b) = (run(orders[0])?, run(orders[1])?);
    for (k, (x, y)) in a.iter().zip(&b).enumerate() {
        let Some(byte) = x.iter().zip(y).position(|(p, q)| p != q) else {
            continue;
        };
        let decl = &program.hbm[program.outputs[k].0 as usize];
        let size = decl.dtype.size_bytes().max(1);
        let element = byte / size;
        let bits = |v: &[u8]| {
            let e = &v[element * size..(element + 1) * size];
            e.iter()
                .rev()
                .map(|b| format!("{b:02x}"))
                .collect::<String>()
        };
        return Ok(Some(format!(
            "output {k} ({}) element {element} (flat) is 0x{} in {:?} order and 0x{} in {:?} \
             order: the result depends on the order of affine_range iterations",
            decl.name,
            bits(x),
            orders[0],
            bits(y),
            orders[1],
        )));
    }
    Ok(None)
}
