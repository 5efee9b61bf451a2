#![allow(unused_variables)]
use nki_core::prelude::*;

/// Adds y to x.
#[kernel(shape(x = [N, D], y = [N, D]) -> [N, D], dtype(x in {f32, bf16}) -> x)]
pub fn add(x: &Hbm, y: &Hbm) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
