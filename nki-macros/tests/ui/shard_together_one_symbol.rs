#![allow(unused_variables)]
use nki_core::prelude::*;

/// A together declaration with one symbol.
#[kernel(shape(x = [N, D], w = [D]) -> y = [N, D], dtype(x in {f32}, w = x) -> x, shard(together(N)))]
pub fn norm(x: &Hbm, w: &Hbm, #[default(false)] causal: bool, #[default("a")] #[choices("a", "b")] mode: &str, eps: f32) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
