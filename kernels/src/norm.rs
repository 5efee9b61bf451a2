//! Normalisation kernels.

use nki_core::prelude::*;

/// RMSNorm over the last dim: `x * rsqrt(mean(x²) + eps) * weight`.
///
/// Rows are tiled 128 to the partitions with a ragged last tile; the whole row stays on the
/// free dim. The weight is loaded once, broadcast across partitions. Statistics are computed
/// in fp32 on the scalar engine (square with a free-dim sum reduction), the result is rounded
/// once to the input dtype.
#[kernel(
    shape(x = [N, D], weight = [D]) -> [N, D],
    dtype(x in {f32, bf16, f16}, weight = x) -> x,
    require(D <= 16384),
    replaces("torch.nn.RMSNorm", "*.LlamaRMSNorm"),
)]
pub fn rmsnorm(x: &Hbm, weight: &Hbm, #[default(1e-6)] eps: f32) -> Hbm {
    let (n, d) = (x.dim(0), x.dim(1));
    let out = shared_hbm(&[n, d], x.dtype());
    let p = n.min(PMAX);
    let w = sbuf([p, d], weight.dtype());
    dma_copy(&w, weight.view().broadcast_to(&[p, d]));
    for_each_tile(n, PMAX, |rows| {
        let xt = sbuf([rows.size, d], x.dtype());
        dma_copy(&xt, x.rows(rows.start.clone(), rows.size));
        // sum(x²) per row, fp32, on the scalar engine; the squares themselves are scratch.
        let scratch = sbuf([rows.size, d], DType::F32);
        let sumsq = sbuf([rows.size, 1], DType::F32);
        activation_reduce(&scratch, ActFn::Square, &xt, 1.0, None, BinOp::Add, &sumsq);
        // rstd = rsqrt(sumsq / D + eps)
        let rstd = sbuf([rows.size, 1], DType::F32);
        tensor_scalar2(
            &rstd,
            &sumsq,
            BinOp::Multiply,
            1.0 / d as f32,
            BinOp::Add,
            eps,
        );
        activation(&rstd, ActFn::Rsqrt, &rstd, 1.0, None);
        // y = (x * rstd) * w, fp32 until the final write rounds to x's dtype.
        tensor_scalar(&scratch, &xt, BinOp::Multiply, &rstd);
        tensor_tensor(&xt, &scratch, w.rows(rows.size), BinOp::Multiply);
        dma_copy(out.rows(rows.start, rows.size), &xt);
    });
    out
}
