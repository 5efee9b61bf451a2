#![allow(unused_variables)]
use nki_core::prelude::*;

/// Names "none" but neither "mean" nor "sum", and has no `_` arm.
#[kernel(
    shape(x = [N, D]) -> match reduction { "none" => [N] },
    dtype(x in {f32}) -> x,
)]
pub fn reduce(
    x: &Hbm,
    #[default("none")]
    #[choices("none", "mean", "sum")]
    reduction: &str,
) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
