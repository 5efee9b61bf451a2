//! Elementwise kernels.

use nki_core::prelude::*;

/// Free-dim chunk (elements per partition) for elementwise kernels: 2048 fp32 = 8 KiB per
/// partition per tile, large enough for efficient DMA (≥ 2 KiB per partition).
const CHUNK: usize = 2048;

/// Elementwise sum `x + y` of two tensors of the same shape and dtype (any rank ≥ 1).
///
/// The tensors are flattened to rows of their last dimension; rows are tiled 128 to the
/// partitions and columns in chunks of 2048.
#[kernel(
    shape(x = [..S, D], y = [..S, D]) -> [..S, D],
    dtype(x in {f32, bf16, f16}, y = x) -> x,
    replaces("aten::add.Tensor"),
)]
pub fn add(x: &Hbm, y: &Hbm) -> Hbm {
    let out = shared_hbm(x.shape(), x.dtype());
    let cols = *x.shape().last().unwrap_or(&1);
    let rows = x.numel() / cols.max(1);
    let (xv, yv, ov) = (
        x.reshape(&[rows, cols]),
        y.reshape(&[rows, cols]),
        out.reshape(&[rows, cols]),
    );
    for_each_tile(rows, PMAX, |r| {
        for_each_tile(cols, CHUNK, |c| {
            let a = sbuf([r.size, c.size], x.dtype());
            let b = sbuf([r.size, c.size], x.dtype());
            dma_copy(
                &a,
                xv.clone()
                    .rows(r.start.clone(), r.size)
                    .cols(c.start.clone(), c.size),
            );
            dma_copy(
                &b,
                yv.clone()
                    .rows(r.start.clone(), r.size)
                    .cols(c.start.clone(), c.size),
            );
            tensor_tensor(&a, &a, &b, BinOp::Add);
            dma_copy(
                ov.clone()
                    .rows(r.start.clone(), r.size)
                    .cols(c.start, c.size),
                &a,
            );
        });
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn any_rank_and_ragged_columns() {
        for shape in [vec![1000], vec![3, 50, 70], vec![130, 4100]] {
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
}
