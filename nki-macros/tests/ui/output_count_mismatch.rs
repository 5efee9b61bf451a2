#![allow(unused_variables)]
use nki_core::prelude::*;

/// Mean and variance.
#[kernel(shape(x = [N, D]) -> ([N], [N]), dtype(x in {f32}) -> (x, x))]
pub fn moments(x: &Hbm) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
