#![allow(unused_variables)]
use nki_core::prelude::*;

/// Scales by an optional factor.
#[kernel(shape(x = [N]) -> [N], dtype(x in {f32}) -> x)]
pub fn scale(x: &Hbm, s: Option<f32>) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
