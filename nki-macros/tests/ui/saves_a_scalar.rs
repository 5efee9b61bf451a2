#![allow(unused_variables)]
use nki_core::prelude::*;

/// Saves a scalar.
#[kernel(
    shape(x = [N]) -> y = [N],
    dtype(x in {f32}) -> x,
    backward(scale_backward, saves(x, s)),
)]
pub fn scale(x: &Hbm, s: f32) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
