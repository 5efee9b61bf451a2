#![allow(unused_variables)]
use nki_core::prelude::*;

/// Copies x.
#[kernel(shape(x = [N, D]) -> [N, D], dtype(x in {f32}) -> x)]
pub fn copy(x: Hbm) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
