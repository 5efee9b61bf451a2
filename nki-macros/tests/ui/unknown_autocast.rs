#![allow(unused_variables)]
use nki_core::prelude::*;

/// An autocast policy that does not exist.
#[kernel(shape(x = [N]) -> [N], dtype(x in {f32}) -> x, autocast(fast))]
pub fn copy(x: &Hbm) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
