#![allow(unused_variables)]
use nki_core::prelude::*;

/// A reference with nothing to compare on.
#[kernel(shape(x = [N]) -> [N], dtype(x in {f32}) -> x, reference("x.clone()"))]
pub fn copy(x: &Hbm) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
