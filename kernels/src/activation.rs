//! Activation kernels: SiLU, GELU, the SwiGLU product `silu(gate) * up` of Llama-style MLPs
//! and the gated-GELU product `gelu(gate) * up` of Gemma-style MLPs, forward and backward.
//!
//! Tensors are flattened to rows of their last dimension, rows tiled 128 to the partitions and
//! columns in 2048-wide chunks. The activation runs on the scalar engine in fp32; every output
//! is rounded once to the input dtype.

use crate::tiling::{as_rows, block, for_each_chunk};
use nki_core::prelude::*;

/// `func(x)` elementwise on the scalar engine, chunk by chunk, rounded once to `x`'s dtype.
fn map_activation(x: &Hbm, func: ActFn) -> Hbm {
    let out = shared_hbm(x.shape(), x.dtype());
    let (xv, ov) = (as_rows(x), as_rows(&out));
    for_each_chunk(&xv, |r, c| {
        let t = sbuf([r.size, c.size], x.dtype());
        dma_copy(&t, block(&xv, r, &c));
        activation(&t, func, &t, None, 1.0);
        dma_copy(block(&ov, r, &c), &t);
    });
    out
}

/// `grad_out · f'(x)` chunk by chunk, `derivative(dst, x)` writing `f'(x)` in fp32.
fn chain_rule(grad_out: &Hbm, x: &Hbm, derivative: impl Fn(&TileRegion, &TileRegion)) -> Hbm {
    let dt = x.dtype();
    let grad_x = shared_hbm(x.shape(), dt);
    let (gv, xv, dv) = (as_rows(grad_out), as_rows(x), as_rows(&grad_x));
    for_each_chunk(&xv, |r, c| {
        let (g, xt) = (sbuf([r.size, c.size], dt), sbuf([r.size, c.size], dt));
        dma_copy(&g, block(&gv, r, &c));
        dma_copy(&xt, block(&xv, r, &c));
        let d = sbuf([r.size, c.size], DType::F32);
        derivative(&d.region(), &xt.region());
        tensor_tensor(&g, &g, &d, BinOp::Multiply);
        dma_copy(block(&dv, r, &c), &g);
    });
    grad_x
}

/// SiLU (swish): `x · σ(x)`, elementwise, any rank ≥ 1.
#[kernel(
    shape(x = [..S, D]) -> [..S, D],
    dtype(x in {f32, bf16, f16}) -> x,
    backward(silu_backward, saves(x)),
    replaces("aten::silu", "torch.nn.SiLU"),
    reference("F.silu(x.float()).to(x.dtype)"),
    sample(x = [3, 50, 70]),
    sample(x = [130, 2100], dtypes = {f32}),
    sample(x = [1]),
    tolerance(elementwise),
    bench(x = [8192, 4096]),
)]
pub fn silu(x: &Hbm) -> Hbm {
    map_activation(x, ActFn::Silu)
}

/// Gradient of `silu`: `grad_x = grad_out · σ(x) · (1 + x · (1 − σ(x)))`, as ATen computes it.
#[kernel(
    shape(grad_out = [..S, D], x = [..S, D]) -> grad_x = [..S, D],
    dtype(grad_out in {f32, bf16, f16}, x = grad_out) -> grad_out,
    tolerance(elementwise),
)]
pub fn silu_backward(grad_out: &Hbm, x: &Hbm) -> Hbm {
    // The scalar engine's `silu_dx` in one pass, then one product on the vector engine.
    chain_rule(grad_out, x, |d, x| {
        activation(d, ActFn::SiluDx, x, None, 1.0)
    })
}

/// GELU, `x · Φ(x)`, elementwise, any rank ≥ 1: `approximate = "none"` is the exact form
/// (`x/2 · (1 + erf(x/√2))`, the scalar engine's `gelu`), `"tanh"` the tanh approximation
/// (`gelu_apprx_tanh`), as `F.gelu(x, approximate=...)`. fp32 inside, rounded once.
///
/// `gelu(+inf) = +inf` and `gelu(−inf) = NaN` (the exact formula's `−inf · 0`), as ATen
/// computes in float64; the reference is evaluated there because ATen's vectorised fp32 path
/// returns NaN for `+inf` while its scalar path returns `+inf`.
#[kernel(
    shape(x = [..S, D]) -> [..S, D],
    dtype(x in {f32, bf16, f16}) -> x,
    backward(gelu_backward, saves(x)),
    replaces("aten::gelu", "torch.nn.GELU"),
    reference("F.gelu(x.double(), approximate=approximate).to(x.dtype)"),
    sample(x = [3, 50, 70]),
    sample(x = [2, 33, 70], approximate = "tanh"),
    sample(x = [130, 2100], dtypes = {f32}),
    sample(x = [1], approximate = "tanh"),
    sample(x = [5]),
    tolerance(elementwise),
    bench(x = [8192, 4096]),
)]
pub fn gelu(
    x: &Hbm,
    #[default("none")]
    #[choices("none", "tanh")]
    approximate: &str,
) -> Hbm {
    map_activation(x, gelu_fn(approximate))
}

/// Gradient of `gelu`: `grad_x = grad_out · gelu'(x)`, with the scalar engine's `gelu_dx`
/// (`Φ(x) + x·φ(x)`) for the exact form; for the tanh approximation, with
/// `t = tanh(√(2/π) · (x + 0.044715 x³))`,
/// `gelu'(x) = (1 + t)/2 + x/2 · (1 − t²) · √(2/π) · (1 + 3 · 0.044715 x²)`, in fp32.
#[kernel(
    shape(grad_out = [..S, D], x = [..S, D]) -> grad_x = [..S, D],
    dtype(grad_out in {f32, bf16, f16}, x = grad_out) -> grad_out,
    tolerance(elementwise),
)]
pub fn gelu_backward(
    grad_out: &Hbm,
    x: &Hbm,
    #[default("none")]
    #[choices("none", "tanh")]
    approximate: &str,
) -> Hbm {
    chain_rule(grad_out, x, |d, x| {
        if approximate == "tanh" {
            gelu_tanh_derivative(d, x);
        } else {
            activation(d, ActFn::GeluDx, x, None, 1.0);
        }
    })
}

/// The derivative of the tanh-approximated GELU into `dst` (fp32), from `x`.
fn gelu_tanh_derivative(dst: &TileRegion, x: &TileRegion) {
    const K: f32 = 0.044_715;
    let c = (2.0f32 / std::f32::consts::PI).sqrt();
    let [p, f] = x.shape();
    // x² and u = c · (x + K x³) = c · x · (1 + K x²).
    let x2 = sbuf([p, f], DType::F32);
    tensor_tensor(&x2, x, x, BinOp::Multiply);
    let u = sbuf([p, f], DType::F32);
    tensor_scalar(&u, &x2, BinOp::Multiply, K).then(BinOp::Add, 1.0);
    tensor_tensor(&u, &u, x, BinOp::Multiply);
    let t = sbuf([p, f], DType::F32);
    activation(&t, ActFn::Tanh, &u, None, c);
    // du = c · (1 + 3K x²) · x / 2, then (1 − t²) · du.
    let du = sbuf([p, f], DType::F32);
    tensor_scalar(&du, &x2, BinOp::Multiply, 3.0 * K).then(BinOp::Add, 1.0);
    tensor_tensor(&du, &du, x, BinOp::Multiply);
    tensor_scalar(&du, &du, BinOp::Multiply, 0.5 * c);
    tensor_tensor(&x2, &t, &t, BinOp::Multiply);
    tensor_scalar(&x2, &x2, BinOp::Multiply, -1.0).then(BinOp::Add, 1.0);
    tensor_tensor(&du, &du, &x2, BinOp::Multiply);
    // + (1 + t) / 2.
    tensor_scalar(&t, &t, BinOp::Multiply, 0.5).then(BinOp::Add, 0.5);
    tensor_tensor(dst, &du, &t, BinOp::Add);
}

/// SwiGLU's product `silu(gate) · up` (the gated MLP of Llama-style models), elementwise, any
/// rank ≥ 1: the activation and the product in fp32, rounded once.
#[kernel(
    shape(gate = [..S, D], up = [..S, D]) -> [..S, D],
    dtype(gate in {f32, bf16, f16}, up = gate) -> gate,
    backward(silu_mul_backward, saves(gate, up)),
    replaces("silu(a) * b", "*MLP"),
    reference("(F.silu(gate.float()) * up.float()).to(gate.dtype)"),
    sample(gate = [3, 50, 70], up = [3, 50, 70]),
    sample(gate = [130, 2100], up = [130, 2100], dtypes = {f32}),
    sample(gate = [1], up = [1]),
    tolerance(elementwise),
    autocast(promote),
    bench(gate = [8192, 4096], up = [8192, 4096]),
)]
pub fn silu_mul(gate: &Hbm, up: &Hbm) -> Hbm {
    gated(gate, up, ActFn::Silu)
}

/// A gated product `act(gate) · up`, chunk by chunk: the activation on the scalar engine in
/// fp32, the product on the vector engine rounded once into the output tile (`silu_mul`,
/// `gelu_mul`).
fn gated(gate: &Hbm, up: &Hbm, act: ActFn) -> Hbm {
    let dt = gate.dtype();
    let out = shared_hbm(gate.shape(), dt);
    let (gv, uv, ov) = (as_rows(gate), as_rows(up), as_rows(&out));
    for_each_chunk(&gv, |r, c| {
        let (g, u) = (sbuf([r.size, c.size], dt), sbuf([r.size, c.size], dt));
        dma_copy(&g, block(&gv, r, &c));
        dma_copy(&u, block(&uv, r, &c));
        let s = sbuf([r.size, c.size], DType::F32);
        activation(&s, act, &g, None, 1.0);
        tensor_tensor(&g, &s, &u, BinOp::Multiply);
        dma_copy(block(&ov, r, &c), &g);
    });
    out
}

/// Gradients of `silu_mul`: `grad_gate = grad_out · up · silu'(gate)` and
/// `grad_up = grad_out · silu(gate)`, in fp32, each rounded once.
#[kernel(
    shape(grad_out = [..S, D], gate = [..S, D], up = [..S, D])
        -> (grad_gate = [..S, D], grad_up = [..S, D]),
    dtype(grad_out in {f32, bf16, f16}, gate = grad_out, up = grad_out) -> (grad_out, grad_out),
    tolerance(elementwise),
)]
pub fn silu_mul_backward(grad_out: &Hbm, gate: &Hbm, up: &Hbm) -> (Hbm, Hbm) {
    gated_backward((grad_out, gate, up), ActFn::Silu, |d, g| {
        activation(d, ActFn::SiluDx, g, None, 1.0);
    })
}

/// The gradients of `act(gate) · up`, chunk by chunk: `grad_up = grad_out · act(gate)` (the
/// activation on the scalar engine, the product on the vector engine rounded once into the
/// output tile) and `grad_gate = act'(gate) · (grad_out · up)` (`derivative` writes `act'` into
/// an fp32 tile, the gradient's product with `up` runs on GpSimd, their product on the vector
/// engine).
fn gated_backward(
    (grad_out, gate, up): (&Hbm, &Hbm, &Hbm),
    act: ActFn,
    derivative: impl Fn(&Tile, &Tile),
) -> (Hbm, Hbm) {
    let dt = gate.dtype();
    let grad_gate = shared_hbm(gate.shape(), dt);
    let grad_up = shared_hbm(gate.shape(), dt);
    let (ov, gv, uv) = (as_rows(grad_out), as_rows(gate), as_rows(up));
    let (dgv, duv) = (as_rows(&grad_gate), as_rows(&grad_up));
    for_each_chunk(&gv, |r, c| {
        let load = |v: &HbmView| {
            let t = sbuf([r.size, c.size], dt);
            dma_copy(&t, block(v, r, &c));
            t
        };
        let (go, g, u) = (load(&ov), load(&gv), load(&uv));
        let s = sbuf([r.size, c.size], DType::F32);
        activation(&s, act, &g, None, 1.0);
        let out_up = sbuf([r.size, c.size], dt);
        tensor_tensor(&out_up, &s, &go, BinOp::Multiply);
        dma_copy(block(&duv, r, &c), &out_up);
        let d = sbuf([r.size, c.size], DType::F32);
        derivative(&d, &g);
        let gu = sbuf([r.size, c.size], DType::F32);
        tensor_tensor(&gu, &go, &u, BinOp::Multiply).on(ElementwiseEngine::GpSimd);
        tensor_tensor(&g, &d, &gu, BinOp::Multiply);
        dma_copy(block(&dgv, r, &c), &g);
    });
    (grad_gate, grad_up)
}

/// The gated-GELU product `gelu(gate) · up` (the MLP of Gemma-style models), elementwise, any
/// rank ≥ 1, with GELU exact (`approximate = "none"`) or tanh-approximated (`"tanh"`, what
/// `gelu_pytorch_tanh` computes), as `F.gelu(gate, approximate=...) * up`: the activation and
/// the product in fp32, rounded once.
#[kernel(
    shape(gate = [..S, D], up = [..S, D]) -> [..S, D],
    dtype(gate in {f32, bf16, f16}, up = gate) -> gate,
    backward(gelu_mul_backward, saves(gate, up)),
    replaces("gelu(a) * b", "*MLP"),
    reference("(F.gelu(gate.double(), approximate=approximate) * up.double()).to(gate.dtype)"),
    sample(gate = [3, 50, 70], up = [3, 50, 70]),
    sample(gate = [2, 33, 70], up = [2, 33, 70], approximate = "tanh"),
    sample(gate = [130, 2100], up = [130, 2100], dtypes = {f32}, approximate = "tanh"),
    sample(gate = [1], up = [1]),
    tolerance(elementwise),
    autocast(promote),
    bench(gate = [8192, 4096], up = [8192, 4096]),
)]
pub fn gelu_mul(
    gate: &Hbm,
    up: &Hbm,
    #[default("none")]
    #[choices("none", "tanh")]
    approximate: &str,
) -> Hbm {
    gated(gate, up, gelu_fn(approximate))
}

/// Gradients of `gelu_mul`: `grad_gate = grad_out · up · gelu'(gate)` and
/// `grad_up = grad_out · gelu(gate)`, with `gelu'` as in `gelu_backward`, in fp32, each
/// rounded once.
#[kernel(
    shape(grad_out = [..S, D], gate = [..S, D], up = [..S, D])
        -> (grad_gate = [..S, D], grad_up = [..S, D]),
    dtype(grad_out in {f32, bf16, f16}, gate = grad_out, up = grad_out) -> (grad_out, grad_out),
    tolerance(elementwise),
)]
pub fn gelu_mul_backward(
    grad_out: &Hbm,
    gate: &Hbm,
    up: &Hbm,
    #[default("none")]
    #[choices("none", "tanh")]
    approximate: &str,
) -> (Hbm, Hbm) {
    gated_backward((grad_out, gate, up), gelu_fn(approximate), |d, g| {
        if approximate == "tanh" {
            gelu_tanh_derivative(&d.region(), &g.region());
        } else {
            activation(d, ActFn::GeluDx, g, None, 1.0);
        }
    })
}

/// The scalar engine's GELU for `approximate` (`"tanh"`, else the exact form).
fn gelu_fn(approximate: &str) -> ActFn {
    match approximate {
        "tanh" => ActFn::GeluTanh,
        _ => ActFn::Gelu,
    }
}
