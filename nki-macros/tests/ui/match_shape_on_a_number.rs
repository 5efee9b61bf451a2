#![allow(unused_variables)]
use nki_core::prelude::*;

/// Matches on a float parameter: only `&str` parameters with choices choose shapes.
#[kernel(
    shape(x = [N, D]) -> match eps { "none" => [N], _ => [] },
    dtype(x in {f32}) -> x,
)]
pub fn reduce(x: &Hbm, eps: f32) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
