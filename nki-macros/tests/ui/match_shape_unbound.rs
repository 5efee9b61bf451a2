#![allow(unused_variables)]
use nki_core::prelude::*;

/// An arm uses a symbol no input binds.
#[kernel(
    shape(x = [N, D]) -> match reduction { "none" => [M], _ => [] },
    dtype(x in {f32}) -> x,
)]
pub fn reduce(x: &Hbm, #[default("none")] #[choices("none", "mean")] reduction: &str) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
