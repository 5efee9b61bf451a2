//! The expansion compiles warning-free in a crate that denies warnings and missing docs, for
//! public and private kernels, kernels in modules, and every scalar type.
#![deny(warnings, missing_docs)]

use nki_core::prelude::*;

/// Public kernel with every scalar type and defaults.
#[kernel(
    shape(x = [N, D], w = [D]) -> [N, D],
    dtype(x in {f32, bf16}, w = x) -> x,
    require(D <= 16384, N % 1 == 0),
    replaces("torch.nn.RMSNorm"),
)]
pub fn everything(
    x: &Hbm,
    w: &Hbm,
    #[default(1e-6)] a: f32,
    #[default(2)] b: f64,
    #[default(-1)] c: i32,
    #[default(4)] d: i64,
    #[default(7)] e: u32,
    #[default(8)] f: u64,
    #[default(9)] g: usize,
    #[default(-10)] h: isize,
    #[default(true)] i: bool,
) -> Hbm {
    let _ = (w, a, b, c, d, e, f, g, h, i);
    shared_hbm(x.shape(), x.dtype())
}

/// A private kernel.
#[kernel(shape(x = [..S]) -> ([..S], [1]), dtype(x in {f32}) -> (x, f32))]
fn private(x: &Hbm) -> (Hbm, Hbm) {
    (shared_hbm(x.shape(), x.dtype()), shared_hbm(&[1], DType::F32))
}

mod inner {
    use nki_core::prelude::*;

    /// A kernel in a module, visible to the crate.
    #[kernel(shape(x = [N, K]) -> [(K + 127) / 128 * N], dtype(x in {f16}) -> bf16)]
    pub(crate) fn inner(x: &Hbm) -> Hbm {
        shared_hbm(&[x.dim(0)], DType::BF16)
    }
}

fn main() {
    assert_eq!(EVERYTHING_KERNEL.name, "everything");
    assert_eq!(PRIVATE_KERNEL.name, "private");
    assert_eq!(inner::INNER_KERNEL.name, "inner");
}
