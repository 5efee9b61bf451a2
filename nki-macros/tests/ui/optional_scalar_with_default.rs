#![allow(unused_variables)]
use nki_core::prelude::*;

/// Scales by an optional factor, which cannot also have a default.
#[kernel(shape(x = [N]) -> [N], dtype(x in {f32}) -> x)]
pub fn scale(x: &Hbm, #[default(1.0)] s: Option<f32>) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
