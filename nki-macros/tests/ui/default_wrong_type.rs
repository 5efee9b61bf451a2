#![allow(unused_variables)]
use nki_core::prelude::*;

/// Top-k.
#[kernel(shape(x = [N, D]) -> [N, D], dtype(x in {f32}) -> x)]
pub fn topk(x: &Hbm, #[default(0.5)] k: i64) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
