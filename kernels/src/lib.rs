//! # nki-kernels
//!
//! The kernel library. One module per kernel family; each kernel carries its contract in its
//! `#[kernel]` attribute and registers itself with `inventory`. Binaries that read the
//! registry must reference this crate (`use nki_kernels as _;`) or the linker drops it.
//!
//! | op | module | what |
//! |---|---|---|
//! | `add` | [`elementwise`] | `x + y`, same shape, any rank |
//! | `silu`, `gelu`, `silu_mul`, `gelu_mul` | [`activation`] | `x·σ(x)`, GELU (exact or tanh, `approximate=`), SwiGLU's `silu(gate) · up` and the gated GELU `gelu(gate) · up` |
//! | `rmsnorm` | [`norm`] | `x * rsqrt(mean(x²) + eps) * weight` over the last dim |
//! | `add_rmsnorm` | [`norm`] | `h = x + residual`, `y = rmsnorm(h)`: the fused residual of a decoder layer |
//! | `layernorm` | [`norm`] | `(x − mean) · rsqrt(var + eps) · weight + bias`, weight and bias optional |
//! | `matmul`, `bmm` | [`matmul`] | `x[..B, K] @ w`, and batched `x[b] @ y[b]`; K accumulated in fp32 PSUM |
//! | `linear` | [`matmul`] | `F.linear`: `x @ weightᵀ + bias`, optional bias |
//! | `rope` | [`rope`] | rotary position embedding of `q` and `k` (Llama's rotate-half) |
//! | `softmax`, `log_softmax` | [`softmax`] | over the last dim, max-subtracted, fp32 inside |
//! | `cross_entropy` | [`loss`] | `F.cross_entropy` over `logits[N, V]` and int targets, `ignore_index`, mean/sum/none; V chunked |
//! | `flash_attention` | [`attention`] | `softmax(q·kᵀ·scale) · v`, online softmax, causal, grouped-query |

#![warn(missing_docs)]

pub mod activation;
pub mod attention;
pub mod elementwise;
pub mod loss;
pub mod matmul;
pub mod norm;
mod partials;
pub mod rope;
pub mod softmax;
mod tiling;
