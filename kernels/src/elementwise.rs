//! Elementwise kernels.

use crate::tiling::{as_rows, block, for_each_chunk};
use nki_core::prelude::*;

/// Elementwise sum `x + y` of two tensors of the same shape and dtype (any rank ≥ 1).
///
/// The tensors are flattened to rows of their last dimension; rows are tiled 128 to the
/// partitions and columns in chunks of 2048.
#[kernel(
    shape(x = [..S, D], y = [..S, D]) -> [..S, D],
    dtype(x in {f32, bf16, f16}, y = x) -> x,
    backward(add_backward),
    replaces("aten::add.Tensor"),
    reference("x + y"),
    sample(x = [3, 50, 70], y = [3, 50, 70]),
    sample(x = [1000], y = [1000]),
    sample(x = [1], y = [1]),
    sample(x = [130, 4100], y = [130, 4100], dtypes = {f32}),
    tolerance(elementwise),
    autocast(promote),
    bench(x = [8192, 4096], y = [8192, 4096]),
)]
pub fn add(x: &Hbm, y: &Hbm) -> Hbm {
    let out = shared_hbm(x.shape(), x.dtype());
    let (xv, yv, ov) = (as_rows(x), as_rows(y), as_rows(&out));
    for_each_chunk(&xv, |r, c| {
        let a = sbuf([r.size, c.size], x.dtype());
        let b = sbuf([r.size, c.size], x.dtype());
        dma_copy(&a, block(&xv, r, &c));
        dma_copy(&b, block(&yv, r, &c));
        tensor_tensor(&a, &a, &b, BinOp::Add);
        dma_copy(block(&ov, r, &c), &a);
    });
    out
}

/// Gradients of `add`: both inputs receive `grad_out` unchanged (one load, two stores per tile).
#[kernel(
    shape(grad_out = [..S, D]) -> (grad_x = [..S, D], grad_y = [..S, D]),
    dtype(grad_out in {f32, bf16, f16}) -> (grad_out, grad_out),
)]
pub fn add_backward(grad_out: &Hbm) -> (Hbm, Hbm) {
    let grad_x = shared_hbm(grad_out.shape(), grad_out.dtype());
    let grad_y = shared_hbm(grad_out.shape(), grad_out.dtype());
    let (gv, xv, yv) = (as_rows(grad_out), as_rows(&grad_x), as_rows(&grad_y));
    for_each_chunk(&gv, |r, c| {
        let t = sbuf([r.size, c.size], grad_out.dtype());
        dma_copy(&t, block(&gv, r, &c));
        dma_copy(block(&xv, r, &c), &t);
        dma_copy(block(&yv, r, &c), &t);
    });
    (grad_x, grad_y)
}

#[cfg(test)]
mod tests {
    use super::*;
    use nki_core::testing::*;

    #[test]
    fn any_rank_and_ragged_columns() {
        // Rows shared in whole tiles; the cores splitting the columns of one tile, of a tile
        // and a ragged tail, and of the tail after two whole tiles (`for_each_chunk`).
        for shape in [
            vec![1000],
            vec![3, 50, 70],
            vec![128, 2100],
            vec![130, 4100],
            vec![300, 2100],
        ] {
            let n: usize = shape.iter().product();
            let x = HostArray::new(
                &shape,
                DType::BF16,
                (0..n).map(|i| (i % 251) as f32 / 100.0),
            );
            let y = HostArray::new(&shape, DType::BF16, (0..n).map(|i| (i % 13) as f32 / 7.0));
            let out = run_kernel(&ADD_KERNEL, &[x.clone(), y.clone()], &[], Target::Trn2).unwrap();
            assert_eq!(out[0].shape, shape);
            for i in 0..n {
                assert_eq!(
                    out[0].values[i],
                    DType::BF16.round(x.values[i] + y.values[i]),
                    "{shape:?}[{i}]"
                );
            }
        }
    }

    #[test]
    fn backward_copies_the_gradient_to_both_inputs() {
        let g = HostArray::new(&[3, 130, 5], DType::F16, (0..1950).map(|i| i as f32 / 64.0));
        let out = run_kernel(
            &ADD_BACKWARD_KERNEL,
            std::slice::from_ref(&g),
            &[],
            Target::Trn2,
        )
        .unwrap();
        assert_eq!(out, vec![g.clone(), g]);
    }
}
