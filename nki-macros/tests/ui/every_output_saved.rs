#![allow(unused_variables)]
use nki_core::prelude::*;

/// Returns nothing the caller can see.
#[kernel(
    shape(x = [N]) -> saved s = [N],
    dtype(x in {f32}) -> x,
    backward(hidden_backward, saves(s)),
)]
pub fn hidden(x: &Hbm) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
