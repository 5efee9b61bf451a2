#![allow(unused_variables)]
use nki_core::prelude::*;

/// Scales rows.
#[kernel(
    shape(x = [..B, D]) -> [..B, D],
    dtype(x in {f32, bf16}) -> x,
    backward(scale_backward, saves(x)),
)]
pub fn scale(x: &Hbm) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

/// Takes only 2-D tensors, so it cannot take every `x` the forward accepts.
#[kernel(shape(grad_out = [N, D], x = [N, D]) -> grad_x = [N, D], dtype(grad_out in {f32, bf16}, x = grad_out) -> x)]
pub fn scale_backward(grad_out: &Hbm, x: &Hbm) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
