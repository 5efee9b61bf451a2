#![allow(unused_variables)]
use nki_core::prelude::*;

/// Copies.
#[kernel(shape(x = [N]) -> x = [N], dtype(x in {f32}) -> x)]
pub fn copy(x: &Hbm) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
