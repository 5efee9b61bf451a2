//! A kernel crate outside the torch-nki workspace: residual add fused with RMSNorm, forward and
//! backward, loaded into PyTorch with `torch_nki.load("examples/kernel-crate")` as
//! `torch.ops.neuron.residual_rmsnorm` (or another namespace).
//!
//! What makes it a torch-nki kernel module: kernels written with `#[kernel]` (from `nki-core`),
//! a `cdylib`, and `nki_python::nki_module!` naming the module after the `[lib]` name.

use nki_core::prelude::*;

nki_python::nki_module!(residual_kernels);

/// `[..B, D]` as `[N, D]` rows.
fn rows_of(x: &Hbm) -> (usize, usize) {
    let d = *x.shape().last().unwrap_or(&1);
    (x.numel() / d.max(1), d)
}

/// Residual add fused with RMSNorm, as at every norm of a Llama-style decoder layer:
/// `h = x + residual` and `y = h * rsqrt(mean(h²) + eps) * weight`. Both are returned (`h` is
/// the next residual); `rstd` is saved for the backward.
///
/// Rows are tiled 128 to the partitions, the whole row on the free dim (`D <= 4096` keeps one
/// row tile and its fp32 scratch in SBUF). `h` is rounded to the input dtype once, as ATen's add
/// does; the statistics are fp32 on the scalar engine.
#[kernel(
    shape(x = [..B, D], residual = [..B, D], weight = [D])
        -> (h = [..B, D], y = [..B, D], saved rstd = [..B]),
    dtype(x in {f32, bf16, f16}, residual = x, weight = x) -> (x, x, f32),
    require(D <= 4096),
    backward(residual_rmsnorm_backward, saves(h, weight, rstd)),
    replaces("*ResidualRMSNorm"),
    reference("(x + residual, ((x + residual).float() * torch.rsqrt((x + residual).float().pow(2).mean(-1, keepdim=True) + eps)).to(x.dtype) * weight)"),
    sample(x = [130, 96], residual = [130, 96], weight = [96]),
    sample(x = [2, 3, 200], residual = [2, 3, 200], weight = [200], eps = 1e-5),
    sample(x = [1, 1], residual = [1, 1], weight = [1]),
    tolerance(reduction(D)),
    autocast(promote),
)]
pub fn residual_rmsnorm(
    x: &Hbm,
    residual: &Hbm,
    weight: &Hbm,
    #[default(1e-6)] eps: f32,
) -> (Hbm, Hbm, Hbm) {
    let (n, d) = rows_of(x);
    let dt = x.dtype();
    let h_out = shared_hbm(x.shape(), dt);
    let y_out = shared_hbm(x.shape(), dt);
    let rstd_out = shared_hbm(&x.shape()[..x.shape().len() - 1], DType::F32);
    let (xv, rv) = (x.reshape(&[n, d]), residual.reshape(&[n, d]));
    let (hv, yv, sv) = (
        h_out.reshape(&[n, d]),
        y_out.reshape(&[n, d]),
        rstd_out.reshape(&[n, 1]),
    );
    let p = n.min(PMAX);
    let w = sbuf([p, d], dt);
    dma_copy(&w, weight.view().broadcast_to(&[p, d]));
    for_each_tile(n, PMAX, |rows| {
        let (h, r) = (sbuf([rows.size, d], dt), sbuf([rows.size, d], dt));
        dma_copy(&h, xv.clone().rows(rows.start.clone(), rows.size));
        dma_copy(&r, rv.clone().rows(rows.start.clone(), rows.size));
        tensor_tensor(&h, &h, &r, BinOp::Add);
        dma_copy(hv.clone().rows(rows.start.clone(), rows.size), &h);
        // rstd = rsqrt(Σh² / D + eps), fp32.
        let scratch = sbuf([rows.size, d], DType::F32);
        let rstd = sbuf([rows.size, 1], DType::F32);
        activation_reduce(&scratch, ActFn::Square, &h, BinOp::Add, &rstd, None, 1.0);
        tensor_scalar(&rstd, &rstd, BinOp::Multiply, 1.0 / d as f32).then(BinOp::Add, eps);
        activation(&rstd, ActFn::Rsqrt, &rstd, None, 1.0);
        // y = (h · rstd) · weight, rounded once (into r, which is free now).
        tensor_scalar(&scratch, &h, BinOp::Multiply, &rstd);
        tensor_tensor(&r, &scratch, w.rows(rows.size), BinOp::Multiply);
        dma_copy(yv.clone().rows(rows.start.clone(), rows.size), &r);
        dma_copy(sv.clone().rows(rows.start, rows.size), &rstd);
    });
    (h_out, y_out, rstd_out)
}

/// Gradients of [`residual_rmsnorm`]. With `ĥ = h · rstd` and `ĝ = grad_y · weight`, the
/// gradient reaching `h` is `grad_h + rstd · (ĝ − ĥ · mean(ĝ · ĥ))`, and `h = x + residual`
/// passes it to both inputs; `grad_weight = Σ_rows grad_y · ĥ`, reduced across partitions on the
/// tensor engine (a ones column as the stationary operand) into fp32 PSUM banks.
#[kernel(
    shape(grad_h = [..B, D], grad_y = [..B, D], h = [..B, D], weight = [D], rstd = [..B])
        -> (grad_x = [..B, D], grad_residual = [..B, D], grad_weight = [D]),
    dtype(grad_h in {f32, bf16, f16}, grad_y = grad_h, h = grad_h, weight = grad_h, rstd in {f32})
        -> (grad_h, grad_h, grad_h),
    require(D <= 4096),
    tolerance(reduction(D)),
)]
pub fn residual_rmsnorm_backward(
    grad_h: &Hbm,
    grad_y: &Hbm,
    h: &Hbm,
    weight: &Hbm,
    rstd: &Hbm,
) -> (Hbm, Hbm, Hbm) {
    let (n, d) = rows_of(h);
    let dt = h.dtype();
    let grad_x = shared_hbm(h.shape(), dt);
    let grad_residual = shared_hbm(h.shape(), dt);
    let grad_weight = shared_hbm(&[d], dt);
    let (ghv, gyv, hv, rv) = (
        grad_h.reshape(&[n, d]),
        grad_y.reshape(&[n, d]),
        h.reshape(&[n, d]),
        rstd.reshape(&[n, 1]),
    );
    let (gxv, grv) = (grad_x.reshape(&[n, d]), grad_residual.reshape(&[n, d]));
    let p = n.min(PMAX);
    let w = sbuf([p, d], dt);
    dma_copy(&w, weight.view().broadcast_to(&[p, d]));
    let ones = sbuf([p, 1], DType::F32);
    memset(&ones, 1.0);
    let banks: Vec<(usize, usize)> = (0..d)
        .step_by(PSUM_BANK_FMAX)
        .map(|c0| (c0, PSUM_BANK_FMAX.min(d - c0)))
        .collect();
    let accs: Vec<Tile> = banks
        .iter()
        .map(|&(_, width)| psum([1, width], DType::F32))
        .collect();
    for acc in &accs {
        memset(acc, 0.0);
    }
    for_each_tile(n, PMAX, |rows| {
        let load = |view: &HbmView| {
            let t = sbuf([rows.size, d], dt);
            dma_copy(&t, view.clone().rows(rows.start.clone(), rows.size));
            t
        };
        let (ht, gyt, ght) = (load(&hv), load(&gyv), load(&ghv));
        let r = sbuf([rows.size, 1], DType::F32);
        dma_copy(&r, rv.clone().rows(rows.start.clone(), rows.size));
        let (hhat, ghat, m) = (
            sbuf([rows.size, d], DType::F32),
            sbuf([rows.size, d], DType::F32),
            sbuf([rows.size, d], DType::F32),
        );
        tensor_scalar(&hhat, &ht, BinOp::Multiply, &r);
        tensor_tensor(&ghat, &gyt, w.rows(rows.size), BinOp::Multiply);
        // grad_weight += Σ_rows grad_y · ĥ (tensor engine, accumulating over row tiles).
        tensor_tensor(&m, &gyt, &hhat, BinOp::Multiply);
        for (acc, &(c0, width)) in accs.iter().zip(&banks) {
            nc_matmul(acc, ones.rows(rows.size), m.cols(c0, width), true);
        }
        // coef = mean(ĝ · ĥ) per row.
        let coef = sbuf([rows.size, 1], DType::F32);
        tensor_tensor(&m, &ghat, &hhat, BinOp::Multiply);
        tensor_reduce(&coef, BinOp::Add, &m, 1, false);
        tensor_scalar(&coef, &coef, BinOp::Multiply, 1.0 / d as f32);
        // grad = (ĝ − ĥ · coef) · rstd + grad_h, rounded once.
        tensor_scalar(&hhat, &hhat, BinOp::Multiply, &coef);
        tensor_tensor(&ghat, &ghat, &hhat, BinOp::Subtract);
        tensor_scalar(&ghat, &ghat, BinOp::Multiply, &r);
        let out = sbuf([rows.size, d], dt);
        tensor_tensor(&out, &ghat, &ght, BinOp::Add);
        dma_copy(gxv.clone().rows(rows.start.clone(), rows.size), &out);
        dma_copy(grv.clone().rows(rows.start, rows.size), &out);
    });
    for (acc, &(c0, width)) in accs.iter().zip(&banks) {
        let res = sbuf([1, width], dt);
        tensor_copy(&res, acc);
        dma_copy(grad_weight.reshape(&[1, d]).cols(c0, width), &res);
    }
    (grad_x, grad_residual, grad_weight)
}
