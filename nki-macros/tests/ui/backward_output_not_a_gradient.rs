#![allow(unused_variables)]
use nki_core::prelude::*;

/// Copies.
#[kernel(shape(x = [N]) -> y = [N], dtype(x in {f32}) -> x, backward(copy_backward))]
pub fn copy(x: &Hbm) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

/// Returns `dx`, which is not named after an input's gradient.
#[kernel(shape(grad_y = [N]) -> dx = [N], dtype(grad_y in {f32}) -> grad_y)]
pub fn copy_backward(grad_y: &Hbm) -> Hbm {
    shared_hbm(grad_y.shape(), grad_y.dtype())
}

fn main() {}
