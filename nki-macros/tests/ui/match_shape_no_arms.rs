#![allow(unused_variables)]
use nki_core::prelude::*;

/// A `match` without arms.
#[kernel(
    shape(x = [N, D]) -> match reduction {},
    dtype(x in {f32}) -> x,
)]
pub fn reduce(x: &Hbm, #[default("none")] #[choices("none", "mean")] reduction: &str) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
