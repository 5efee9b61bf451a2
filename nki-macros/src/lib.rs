//! # nki-macros
//!
//! The `#[kernel(...)]` attribute, which turns a Rust NKI kernel function into a registered
//! torch op (`torch.ops.neuron.<name>`) with a checked shape and dtype contract. Use it through
//! `nki_core::prelude::*` (which re-exports it as `kernel`).
//!
//! ```
//! use nki_core::prelude::*;
//!
//! /// RMSNorm over the last dim: x * rsqrt(mean(x²) + eps) * weight.
//! #[kernel(
//!     shape(x = [N, D], weight = [D]) -> [N, D],
//!     dtype(x in {f32, bf16, f16}, weight = x) -> x,
//!     require(D <= 16384),
//!     replaces("torch.nn.RMSNorm", "*.LlamaRMSNorm"),
//! )]
//! pub fn rmsnorm(x: &Hbm, weight: &Hbm, #[default(1e-6)] eps: f32) -> Hbm {
//!     let out = shared_hbm(x.shape(), x.dtype());
//!     // ... tile loops over x and weight, writing `out` ...
//!     # let _ = (weight, eps);
//!     out
//! }
//!
//! fn main() {
//!     // The generated definition, named after the function.
//!     assert_eq!(RMSNORM_KERNEL.schema, "rmsnorm(Tensor x, Tensor weight, float eps=1e-06) -> Tensor");
//! }
//! ```
//!
//! ## The function
//!
//! - A **doc comment is required**; it becomes the op's documentation.
//! - Parameters are tensors, `&Hbm` (schema `Tensor`), optional tensors, `Option<&Hbm>`
//!   (schema `Tensor?`), or scalars: `f32`/`f64` (schema `float`),
//!   `i32`/`i64`/`u32`/`u64`/`usize`/`isize` (`int`) and `bool` (`bool`).
//! - A scalar parameter may have a default, `#[default(1e-6)] eps: f32`; the literal must fit
//!   the type (a number for floats, an integer for ints, `true`/`false` for bools). Tensors
//!   cannot have defaults.
//! - It returns `Hbm` or a tuple of two to four `Hbm`; the contract declares exactly that
//!   many outputs. It cannot be generic or `async`.
//!
//! ## The contract
//!
//! Clauses are separated by commas, in any order; a trailing comma is allowed.
//!
//! - `shape(p = [dims], ...) -> out` (**required**): one pattern per tensor parameter and none
//!   for scalars. A pattern dimension is a symbol (`N`, bound by the first input that has it
//!   and checked against every later one), a size (`128`), or `..S`, a sequence of zero or
//!   more dimensions (at most one per pattern). The output is one shape `[N, D]` or a tuple
//!   `([N, D], [N])`; each output dimension is an expression over bound symbols with integer
//!   literals, `+ - * / %` and parentheses (`(K + 127) / 128`), or `..S` to splice a bound
//!   sequence.
//! - `dtype(rule, ...) -> out` (**required**): one rule per tensor parameter, either
//!   `p in {f32, bf16}` (one of these dtypes) or `p = q` (the same dtype as tensor `q`). Each
//!   output dtype is a tensor parameter name (its dtype) or a dtype; several outputs are a tuple
//!   `(x, f32)`. Dtypes are NKI's scalar dtypes by their
//!   kernel names (`f32`, `bf16`, `f16`, `tf32`, `f8e4m3`, `f8e4m3fn`, `f8e5m2`, `f8e8m0`, `i8`,
//!   `i16`, `i32`, `u8`, `u16`, `u32`, `bool`).
//! - `require(cond, ...)` (optional, may repeat): comparisons `== != < <= > >=` between
//!   dimension expressions over bound symbols, e.g. `require(D <= 16384, N % 128 == 0)`.
//! - `replaces("torch.nn.RMSNorm", "*.LlamaRMSNorm")` (optional): the module classes or
//!   functions this kernel can stand in for.
//! - Outputs may be named, `-> (y = [N, D], saved rstd = [N])`; a `saved` output is kept for the
//!   backward kernel and not returned by the torch op.
//! - `backward(rmsnorm_backward, saves(x, weight, rstd))` (optional): the backward kernel (a
//!   `#[kernel]` whose parameters are `grad_<output>`, saved names and forward scalars, and
//!   whose outputs are `grad_<input>`) and what the forward keeps for it. The two contracts are
//!   checked against each other at compile time (`nki_core::autodiff::check_backward`).
//! - `reference("x @ w")`, `sample(x = [130, 96], w = [96, 4], eps = 1e-5, dtypes = {f32})`
//!   (repeatable) and `tolerance(elementwise | reduction(D) | matmul)`: the ATen expression, the
//!   sample arguments and the tolerance class every test suite uses. A forward kernel declares
//!   a reference and samples; a backward kernel is tested through its forward.
//! - `autocast(lower | fp32 | promote | keep)` (optional): the op's `torch.autocast` policy.
//! - `bench(x = [8192, 4096], ...)`: the large shape `torch-nki bench` grades the op at.
//! - `shard(whole(D), whole(S) if causal, together(H, Hkv), additive(bias), reads(out: x))`
//!   (optional): what the contract cannot tell about splitting the tensors across devices; the
//!   manifest exports the sharding semantics derived with it (`nki_contract::sharding`).
//!
//! ## What it generates
//!
//! Beside the function (unchanged except for the `#[default]` attributes), a static with the
//! function's visibility named after it, `RMSNORM_KERNEL: nki_core::kernel_def::KernelDef`,
//! holding the name, doc, torch schema (`rmsnorm(Tensor x, Tensor weight, float eps=1e-06) ->
//! Tensor`), parameters, contract, `replaces` list, source location and a trace function; and
//! an `inventory` registration so `nki_core::kernel_def::registered_kernels()` finds it.
//!
//! Mistakes are compile errors pointing at the offending tokens, e.g. an output dimension
//! whose symbol no input binds, an unknown dtype, a name that is not a parameter, a tensor
//! without a shape pattern or dtype rule, a default of the wrong type, or output counts that
//! disagree with the return type.

use proc_macro::TokenStream;

/// Declares an NKI kernel: see the [crate documentation](crate) for the grammar.
#[proc_macro_attribute]
pub fn kernel(attr: TokenStream, item: TokenStream) -> TokenStream {
    let item = proc_macro2::TokenStream::from(item);
    match nki_macros_backend::expand_kernel(attr.into(), item.clone()) {
        Ok(tokens) => tokens.into(),
        Err(e) => {
            let mut out = e.to_compile_error();
            out.extend(nki_macros_backend::recover_item(item));
            out.into()
        }
    }
}
