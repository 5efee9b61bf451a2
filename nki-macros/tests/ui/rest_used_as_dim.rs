#![allow(unused_variables)]
use nki_core::prelude::*;

/// Flattens x.
#[kernel(shape(x = [..S, D]) -> [S, D], dtype(x in {f32}) -> x)]
pub fn flatten(x: &Hbm) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
