#![allow(unused_variables)]
use nki_core::prelude::*;

#[kernel(shape(x = [N, D]) -> [N, D], dtype(x in {f32}) -> x)]
pub fn undocumented(x: &Hbm) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
