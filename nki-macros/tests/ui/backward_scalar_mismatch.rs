#![allow(unused_variables)]
use nki_core::prelude::*;

/// Scales by an int.
#[kernel(shape(x = [N]) -> y = [N], dtype(x in {f32}) -> x, backward(scale_backward))]
pub fn scale(x: &Hbm, k: i64) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

/// Takes `k` as a float.
#[kernel(shape(grad_y = [N]) -> grad_x = [N], dtype(grad_y in {f32}) -> grad_y)]
pub fn scale_backward(grad_y: &Hbm, k: f32) -> Hbm {
    shared_hbm(grad_y.shape(), grad_y.dtype())
}

fn main() {}
