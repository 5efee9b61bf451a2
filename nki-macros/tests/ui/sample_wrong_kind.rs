#![allow(unused_variables)]
use nki_core::prelude::*;

/// A shape where a scalar goes, and a scalar where a shape goes.
#[kernel(
    shape(x = [N]) -> [N],
    dtype(x in {f32}) -> x,
    reference("x * s"),
    sample(x = 2.0, s = [4]),
)]
pub fn scale(x: &Hbm, s: f32) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
