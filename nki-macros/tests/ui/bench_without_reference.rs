#![allow(unused_variables)]
use nki_core::prelude::*;

/// A benchmark shape with nothing to time against.
#[kernel(shape(x = [N]) -> [N], dtype(x in {f32}) -> x, bench(x = [4096]))]
pub fn copy(x: &Hbm) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
