#![allow(unused_variables)]
use nki_core::prelude::*;

/// Scales rows by an optional factor (`None`: by `1 / √D`), passed on to the backward.
#[kernel(
    shape(x = [N, D]) -> y = [N, D],
    dtype(x in {f32}) -> x,
    backward(scale_backward),
)]
pub fn scale(x: &Hbm, s: Option<f32>, n: Option<usize>, #[default(true)] b: bool) -> Hbm {
    let _: (Option<f32>, Option<usize>) = (s, n);
    shared_hbm(x.shape(), x.dtype())
}

/// Receives the optional factor as an option.
#[kernel(shape(grad_y = [N, D]) -> grad_x = [N, D], dtype(grad_y in {f32}) -> grad_y)]
pub fn scale_backward(grad_y: &Hbm, s: Option<f64>) -> Hbm {
    shared_hbm(grad_y.shape(), grad_y.dtype())
}

fn main() {}
