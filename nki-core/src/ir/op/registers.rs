//! Engine-sequencer register instructions: allocating, moving, loading and storing virtual
//! registers.
//!
//! Declared here, expanded by [`super::instructions`]: each variant's operands (their roles)
//! and the NKI keyword(s) each field is spelled as.

/// Appends this family's variants to the declaration and hands it to the next family macro.
#[rustfmt::skip]
macro_rules! registers_instructions {
    ([$next:ident $(, $rest:ident)*] $($acc:tt)*) => { $next! { [$($rest),*] $($acc)*

    /// Engine sequencers: a new register, holding `init` (or nothing until it is written: a
    /// read before then is a simulation error).
    RegisterAlloc = "register_alloc" {
        /// The register.
        write dst: RegisterId => _,
        /// Its first value.
        param init: Option<i32> => x,
    },
    /// Engine sequencers: `dst = src`, an immediate or another register's value.
    RegisterMove = "register_move" {
        /// The register written.
        write dst: RegisterId => dst,
        /// The value.
        read src: RegisterValue => src,
    },
    /// Engine sequencers: `dst` = the one integer element of `src` (HBM or SBUF), as int32.
    RegisterLoad = "register_load" {
        /// The register written.
        write dst: RegisterId => dst,
        /// A one-element region of an integer tensor.
        read src: DmaOperand => src,
    },
    /// Engine sequencers: the one element of `dst` (HBM or SBUF) = `src`'s value, converted
    /// to `dst`'s integer dtype.
    RegisterStore = "register_store" {
        /// A one-element region of an integer tensor.
        write dst: DmaOperand => dst,
        /// The register read.
        read src: RegisterId => src,
    },

    } };
}

pub(super) use registers_instructions;
