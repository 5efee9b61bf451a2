#![allow(unused_variables)]
use nki_core::prelude::*;

/// Lists choices for a float.
#[kernel(shape(x = [N]) -> [N], dtype(x in {f32}) -> x)]
pub fn pick(x: &Hbm, #[choices("a")] eps: f32) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
