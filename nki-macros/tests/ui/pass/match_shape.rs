#![allow(unused_variables)]
use nki_core::prelude::*;

/// Per-row values for "none", one value otherwise; the backward takes either through `..R`.
#[kernel(
    shape(x = [N, D]) -> loss = match reduction { "none" => [N], "mean" | "sum" => [] },
    dtype(x in {f32}) -> x,
    backward(reduce_backward, saves(x)),
)]
pub fn reduce(
    x: &Hbm,
    #[default("mean")]
    #[choices("none", "mean", "sum")]
    reduction: &str,
) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

/// The gradient of `reduce`.
#[kernel(
    shape(grad_loss = [..R], x = [N, D]) -> grad_x = [N, D],
    dtype(grad_loss in {f32}, x = grad_loss) -> x,
)]
pub fn reduce_backward(
    grad_loss: &Hbm,
    x: &Hbm,
    #[default("mean")]
    #[choices("none", "mean", "sum")]
    reduction: &str,
) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {
    let c = &REDUCE_KERNEL.contract;
    assert_eq!(
        c.to_string(),
        r#"x[N, D] -> loss = match reduction { "none" => [N], _ => [] }"#
    );
}
