#![allow(unused_variables)]
use nki_core::prelude::*;

/// A sample passes a mode the kernel does not accept.
#[kernel(
    shape(x = [N]) -> [N],
    dtype(x in {f32}) -> x,
    reference("x"),
    sample(x = [4], mode = "fast"),
)]
pub fn pick(x: &Hbm, #[default("none")] #[choices("none", "tanh")] mode: &str) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
