#![allow(unused_variables)]
use nki_core::prelude::*;

/// Picks a mode whose default is not among its choices.
#[kernel(shape(x = [N]) -> [N], dtype(x in {f32}) -> x)]
pub fn pick(x: &Hbm, #[default("fast")] #[choices("none", "tanh")] mode: &str) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
