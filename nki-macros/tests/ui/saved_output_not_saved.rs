#![allow(unused_variables)]
use nki_core::prelude::*;

/// Two outputs, one kept for a backward that is not declared.
#[kernel(
    shape(x = [N, D]) -> (y = [N, D], saved stat = [N]),
    dtype(x in {f32}) -> (x, f32),
)]
pub fn stats(x: &Hbm) -> (Hbm, Hbm) {
    (shared_hbm(x.shape(), x.dtype()), shared_hbm(&[x.dim(0)], x.dtype()))
}

fn main() {}
