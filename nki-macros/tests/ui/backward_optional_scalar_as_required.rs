#![allow(unused_variables)]
use nki_core::prelude::*;

/// Scales rows by an optional factor.
#[kernel(
    shape(x = [N, D]) -> y = [N, D],
    dtype(x in {f32}) -> x,
    backward(scale_backward),
)]
pub fn scale(x: &Hbm, s: Option<f32>) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

/// Takes `s` as a plain float, but the forward may pass None.
#[kernel(shape(grad_y = [N, D]) -> grad_x = [N, D], dtype(grad_y in {f32}) -> grad_y)]
pub fn scale_backward(grad_y: &Hbm, s: f32) -> Hbm {
    shared_hbm(grad_y.shape(), grad_y.dtype())
}

fn main() {}
