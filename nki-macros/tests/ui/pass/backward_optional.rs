#![allow(unused_variables)]
use nki_core::prelude::*;

/// Scales rows by an optional weight.
#[kernel(
    shape(x = [N, D], w = [D]) -> y = [N, D],
    dtype(x in {f32}, w = x) -> x,
    backward(scale_backward, saves(w)),
)]
pub fn scale(x: &Hbm, w: Option<&Hbm>) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

/// Receives the optional weight as an optional tensor.
#[kernel(shape(grad_y = [N, D], w = [D]) -> grad_x = [N, D], dtype(grad_y in {f32}, w = grad_y) -> grad_y)]
pub fn scale_backward(grad_y: &Hbm, w: Option<&Hbm>) -> Hbm {
    shared_hbm(grad_y.shape(), grad_y.dtype())
}

fn main() {}
