#![allow(unused_variables)]
use nki_core::prelude::*;

/// Two outputs with one name.
#[kernel(shape(x = [N]) -> (y = [N], y = [N]), dtype(x in {f32}) -> (x, x))]
pub fn twice(x: &Hbm) -> (Hbm, Hbm) {
    (shared_hbm(x.shape(), x.dtype()), shared_hbm(x.shape(), x.dtype()))
}

fn main() {}
