//! Matrix multiplication on the tensor engine.

use nki_core::prelude::*;

/// Matrix product `x @ w` of `x[M, K]` and `w[K, N]`.
///
/// Tiles M by 128 (stationary free size), N by 512 (one fp32 PSUM bank) and K by 128 (the
/// contraction runs over partitions), with ragged edges on all three. Each `[m, n]` output tile
/// accumulates its K tiles in fp32 PSUM, then is copied to SBUF with a cast to the output
/// dtype and stored. `x` tiles are loaded through a transposed DMA access pattern (`xᵀ`), as
/// the stationary operand must be `[K, M]`.
#[kernel(
    shape(x = [M, K], w = [K, N]) -> [M, N],
    dtype(x in {f32, bf16, f16}, w = x) -> x,
    replaces("aten::mm", "torch.nn.functional.linear"),
)]
pub fn matmul(x: &Hbm, w: &Hbm) -> Hbm {
    let (m, k, n) = (x.dim(0), x.dim(1), w.dim(1));
    let out = shared_hbm(&[m, n], x.dtype());
    let dt = x.dtype();
    for_each_tile(m, GEMM_STATIONARY_FMAX, |mt| {
        for_each_tile(n, GEMM_MOVING_FMAX, |nt| {
            let acc = psum([mt.size, nt.size], DType::F32);
            memset(&acc, 0.0);
            for_each_tile(k, PMAX, |kt| {
                let lhs_t = sbuf([kt.size, mt.size], dt);
                dma_copy(
                    &lhs_t,
                    x.rows(mt.start.clone(), mt.size)
                        .cols(kt.start.clone(), kt.size)
                        .t(),
                );
                let rhs = sbuf([kt.size, nt.size], dt);
                dma_copy(
                    &rhs,
                    w.rows(kt.start.clone(), kt.size)
                        .cols(nt.start.clone(), nt.size),
                );
                nc_matmul(&acc, &lhs_t, &rhs, true);
            });
            let res = sbuf([mt.size, nt.size], dt);
            tensor_copy(&res, &acc);
            dma_copy(
                out.rows(mt.start.clone(), mt.size)
                    .cols(nt.start.clone(), nt.size),
                &res,
            );
        });
    });
    out
}
