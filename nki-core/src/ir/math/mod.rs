//! The arithmetic of the engines: the ALU operators (`BinOp`: NKI's `op=` values, binary and
//! unary, arithmetic and bitvec) and the scalar engine's activation functions (`ActFn`), each
//! declared once with its `nl` name and its fp32 (or bit-pattern) semantics. The `nki_spec`
//! tables say which instructions and targets accept each; `nki-core/tests/spec.rs` checks that
//! these enums implement every operator and activation function those tables list.

mod activation;
mod operator;

pub use activation::ActFn;
pub use operator::{BinOp, to_bits32};
