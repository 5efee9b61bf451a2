#![allow(unused_variables)]
use nki_core::prelude::*;

/// RMSNorm.
#[kernel(shape(x = [N, D], w = [D]) -> [N, D], dtype(x in {f32}, weight = x) -> x)]
pub fn rmsnorm(x: &Hbm, weight: &Hbm) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
