#![allow(unused_variables)]
use nki_core::prelude::*;

/// A `_` arm before the last, and a value matched twice.
#[kernel(
    shape(x = [N, D]) -> match reduction { _ => [], "none" => [N], "none" => [D] },
    dtype(x in {f32}) -> x,
)]
pub fn reduce(x: &Hbm, #[default("none")] #[choices("none", "mean")] reduction: &str) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
