#![allow(unused_variables)]
use nki_core::prelude::*;

/// An output sized by a tensor that may be left out.
#[kernel(shape(x = [N], b = [K]) -> [K], dtype(x in {f32}, b = x) -> b)]
pub fn pick(x: &Hbm, b: Option<&Hbm>) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
