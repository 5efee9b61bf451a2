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

#[cfg(test)]
mod tests {
    use super::*;

    fn reference(x: &[f32], w: &[f32], d: usize, eps: f32) -> Vec<f32> {
        x.chunks(d)
            .flat_map(|row| {
                let ms = row.iter().map(|v| (*v as f64).powi(2)).sum::<f64>() / d as f64;
                let r = 1.0 / (ms + eps as f64).sqrt();
                row.iter()
                    .zip(w)
                    .map(move |(v, w)| (*v as f64 * r * *w as f64) as f32)
            })
            .collect()
    }

    #[test]
    fn matches_reference_on_a_ragged_row_count() {
        let (n, d) = (300, 96);
        let x = HostArray::new(
            &[n, d],
            DType::F32,
            (0..n * d).map(|i| ((i * 7919) % 1000) as f32 / 500.0 - 1.0),
        );
        let w = HostArray::new(&[d], DType::F32, (0..d).map(|i| 0.5 + i as f32 / d as f32));
        let y = run_kernel(
            &RMSNORM_KERNEL,
            &[x.clone(), w.clone()],
            &[ScalarValue::Float(1e-6)],
            Target::Trn2,
        )
        .unwrap();
        for (a, b) in y[0]
            .values
            .iter()
            .zip(reference(&x.values, &w.values, d, 1e-6))
        {
            assert!((a - b).abs() <= 1e-5 + 1e-5 * b.abs(), "{a} vs {b}");
        }
    }

    #[test]
    fn widest_row_fits_trn2_sbuf_and_the_contract_stops_wider_ones() {
        let sig = |d: u64| {
            nki_core::Signature::new(
                &[(&[256, d], DType::F32), (&[d], DType::F32)],
                &[ScalarValue::Float(1e-6)],
                Target::Trn2,
            )
        };
        let program = RMSNORM_KERNEL.trace(&sig(16384)).unwrap();
        nki_core::validate::validate(&program).unwrap();
        let err = RMSNORM_KERNEL.check(&sig(16385)).unwrap_err();
        assert_eq!(
            err.to_string(),
            "neuron::rmsnorm: the contract requires D <= 16384, but D = 16385, N = 256"
        );
    }
}
