//! Matrix multiplication on the tensor engine.

use nki_core::prelude::*;

/// Output columns handled together: one fp32 PSUM bank (512 columns) per moving tile, using all
/// eight banks, so each `xᵀ` tile is loaded once per 4096 output columns.
const BLOCK_N: usize = GEMM_MOVING_FMAX * PSUM_BANKS;

/// Matrix product `x @ w` of `x[M, K]` and `w[K, N]`.
///
/// Tiles M by 128 (stationary free size), K by 128 (the contraction runs over partitions) and
/// N by 512 (one fp32 PSUM bank), with ragged edges on all three. Output columns are processed
/// in blocks of up to eight 512-column tiles, each accumulating its K tiles in its own PSUM
/// bank; the stationary `xᵀ` tile of each K step is loaded once per block (through a transposed
/// DMA access pattern, as the stationary operand must be `[K, M]`) and reused by every column
/// tile. Results are copied PSUM → SBUF with a cast to the output dtype and stored.
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
        for_each_tile(n, BLOCK_N, |nb| {
            // The block's column tiles: static offsets and widths (the last may be ragged).
            let col_tiles: Vec<(usize, usize)> = (0..nb.size)
                .step_by(GEMM_MOVING_FMAX)
                .map(|c0| (c0, GEMM_MOVING_FMAX.min(nb.size - c0)))
                .collect();
            let accs: Vec<Tile> = col_tiles
                .iter()
                .map(|&(_, cols)| psum([mt.size, cols], DType::F32))
                .collect();
            for acc in &accs {
                memset(acc, 0.0);
            }
            for_each_tile(k, PMAX, |kt| {
                let lhs_t = sbuf([kt.size, mt.size], dt);
                dma_copy(
                    &lhs_t,
                    x.rows(mt.start.clone(), mt.size)
                        .cols(kt.start.clone(), kt.size)
                        .t(),
                );
                for (acc, &(c0, cols)) in accs.iter().zip(&col_tiles) {
                    let rhs = sbuf([kt.size, cols], dt);
                    dma_copy(
                        &rhs,
                        w.rows(kt.start.clone(), kt.size)
                            .cols(nb.start.clone() + c0, cols),
                    );
                    nc_matmul(acc, &lhs_t, &rhs, true);
                }
            });
            for (acc, &(c0, cols)) in accs.iter().zip(&col_tiles) {
                let res = sbuf([mt.size, cols], dt);
                tensor_copy(&res, acc);
                dma_copy(
                    out.rows(mt.start.clone(), mt.size)
                        .cols(nb.start.clone() + c0, cols),
                    &res,
                );
            }
        });
    });
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn naive(x: &[f32], w: &[f32], m: usize, k: usize, n: usize) -> Vec<f64> {
        let mut out = vec![0f64; m * n];
        for i in 0..m {
            for l in 0..k {
                let a = x[i * k + l] as f64;
                for j in 0..n {
                    out[i * n + j] += a * w[l * n + j] as f64;
                }
            }
        }
        out
    }

    fn check(m: usize, k: usize, n: usize, dtype: DType, tol: f64) {
        let x = HostArray::new(
            &[m, k],
            dtype,
            (0..m * k).map(|i| ((i * 7919) % 997) as f32 / 498.0 - 1.0),
        );
        let w = HostArray::new(
            &[k, n],
            dtype,
            (0..k * n).map(|i| ((i * 104729) % 991) as f32 / 495.0 - 1.0),
        );
        let y = run_kernel(&MATMUL_KERNEL, &[x.clone(), w.clone()], &[], Target::Trn2).unwrap();
        assert_eq!(y[0].shape, vec![m, n]);
        for (a, b) in y[0].values.iter().zip(naive(&x.values, &w.values, m, k, n)) {
            assert!(
                (*a as f64 - b).abs() <= tol * (1.0 + b.abs()),
                "[{m}x{k}x{n} {dtype}] {a} vs {b}"
            );
        }
    }

    #[test]
    fn ragged_m_k_n_in_fp32() {
        check(130, 260, 515, DType::F32, 1e-5);
        check(1, 5, 3, DType::F32, 1e-6);
    }

    #[test]
    fn wide_outputs_span_several_psum_blocks() {
        // 4700 columns = one full block of eight banks + a ragged block (512 + 92 columns).
        check(20, 150, 4700, DType::F32, 1e-5);
    }

    #[test]
    fn bf16_inputs_accumulate_in_fp32_and_round_once() {
        // Inputs are exact bf16 values; products and sums are fp32, then one bf16 rounding.
        check(129, 300, 513, DType::BF16, 4e-3);
    }
}
