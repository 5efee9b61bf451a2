#![allow(unused_variables)]
use nki_core::prelude::*;

/// Scales rows.
#[kernel(
    shape(x = [N, D]) -> y = [N, D],
    dtype(x in {f32}) -> x,
    backward(scale_backward),
)]
pub fn scale(x: &Hbm) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

/// Wants `x`, which the forward does not save.
#[kernel(shape(grad_y = [N, D], x = [N, D]) -> grad_x = [N, D], dtype(grad_y in {f32}, x = grad_y) -> x)]
pub fn scale_backward(grad_y: &Hbm, x: &Hbm) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
