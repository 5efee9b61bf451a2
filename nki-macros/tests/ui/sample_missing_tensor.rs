#![allow(unused_variables)]
use nki_core::prelude::*;

/// A sample that forgets `y`.
#[kernel(
    shape(x = [N], y = [N]) -> [N],
    dtype(x in {f32}, y = x) -> x,
    reference("x + y"),
    sample(x = [4]),
)]
pub fn add(x: &Hbm, y: &Hbm) -> Hbm {
    shared_hbm(x.shape(), x.dtype())
}

fn main() {}
