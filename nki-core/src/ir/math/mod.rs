//! The arithmetic of the engines: the ALU operators (`BinOp`: NKI's `op=` values, binary and
//! unary, arithmetic and bitvec) and the scalar engine's activation functions (`ActFn`), each
//! declared once with its `nl` name and its fp32 (or bit-pattern) semantics. The `nki_spec`
//! tables say which instructions and targets accept each; `nki-core/tests/spec.rs` checks that
//! these enums implement every operator and activation function those tables list.

/// Declares an enum of `nl` names (an operator or activation function per variant, `Variant =
/// "nl_name"`) and derives the list, the two spellings and the lookup by name from it.
macro_rules! nl_enum {
    (
        $(#[$meta:meta])*
        pub enum $enum:ident { $( $(#[$doc:meta])* $variant:ident = $name:literal, )* }
    ) => {
        $(#[$meta])*
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize)]
        #[serde(rename_all = "snake_case")]
        pub enum $enum {
            $( $(#[$doc])* $variant, )*
        }

        impl $enum {
            /// Every value, in declaration order (the order of the docs' table).
            pub const ALL: &'static [$enum] = &[$($enum::$variant),*];

            /// The `nl` name without `nl.` (`add`, `exp`, `copy` for the identity).
            pub const fn nl_name(self) -> &'static str {
                match self {
                    $( $enum::$variant => $name, )*
                }
            }

            /// The `nl.*` spelling used by code generation (`nl.add`).
            pub const fn nki_name(self) -> &'static str {
                match self {
                    $( $enum::$variant => concat!("nl.", $name), )*
                }
            }

            /// The value spelled `nl.<name>` (`"add"` → `Add`).
            pub fn from_nki_name(name: &str) -> Option<$enum> {
                $enum::ALL.iter().copied().find(|v| v.nl_name() == name)
            }
        }
    };
}

mod activation;
mod operator;

pub use activation::ActFn;
pub(crate) use activation::gelu_tanh_exponent;
pub use operator::{BinOp, to_bits32};
