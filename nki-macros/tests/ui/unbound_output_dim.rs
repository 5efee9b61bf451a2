#![allow(unused_variables)]
use nki_core::prelude::*;

/// Doubles the rows.
#[kernel(shape(x = [N, D]) -> [N, M], dtype(x in {f32}) -> x)]
pub fn double(x: &Hbm) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
