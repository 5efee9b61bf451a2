#![allow(unused_variables)]
use nki_core::prelude::*;

/// Copies.
#[kernel(
    shape(x = [N]) -> [N],
    dtype(x in {f32}) -> x,
    reference("x.clone()"),
    sample(x = [4], scale = 2.0),
)]
pub fn copy(x: &Hbm) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
