#![allow(unused_variables)]
use nki_core::prelude::*;

/// Scales x.
#[kernel(shape(x = [N, D], scale = [N]) -> [N, D], dtype(x in {f32}) -> x)]
pub fn scale(x: &Hbm, scale: f32) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
