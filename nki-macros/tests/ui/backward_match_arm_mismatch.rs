#![allow(unused_variables)]
use nki_core::prelude::*;

/// Per-row losses for "none", one loss otherwise.
#[kernel(
    shape(x = [N, D]) -> loss = match reduction { "none" => [N], _ => [] },
    dtype(x in {f32}) -> x,
    backward(reduce_backward, saves(x)),
)]
pub fn reduce(x: &Hbm, #[default("mean")] #[choices("none", "mean")] reduction: &str) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

/// Takes the gradient as one element: not what the "none" arm gives it.
#[kernel(
    shape(grad_loss = [], x = [N, D]) -> grad_x = [N, D],
    dtype(grad_loss in {f32}, x = grad_loss) -> x,
)]
pub fn reduce_backward(
    grad_loss: &Hbm,
    x: &Hbm,
    #[default("mean")]
    #[choices("none", "mean")]
    reduction: &str,
) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
