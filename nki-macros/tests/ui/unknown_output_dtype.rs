#![allow(unused_variables)]
use nki_core::prelude::*;

/// Casts x.
#[kernel(shape(x = [N, D]) -> [N, D], dtype(x in {f32}) -> fp8)]
pub fn cast(x: &Hbm) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
