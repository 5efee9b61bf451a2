//! C declarations derived from Rust types, so that the fast path's C ABI is written once, in
//! Rust, and its C++ header generated from it (see [`super::abi::header`]).
//!
//! [`CType`] spells a Rust FFI type as a C declaration; [`c_struct!`] defines a `#[repr(C)]`
//! struct and its C definition from one field list, and [`c_enum!`] a `#[repr(u8)]` enum and
//! its C++ `enum class`.

use std::ffi::{c_char, c_void};
use std::fmt::Write;

/// A Rust type with a C spelling.
pub trait CType {
    /// The C declaration of `declarator` with this type (`uint8_t x`, `const int64_t* shape`,
    /// `size_t ndim[8]`); an empty declarator gives the type alone, as in a parameter list.
    fn declare(declarator: &str) -> String;
}

macro_rules! scalar_ctypes {
    ($($rust:ty => $c:literal),* $(,)?) => {$(
        impl CType for $rust {
            fn declare(declarator: &str) -> String {
                join($c, declarator)
            }
        }
    )*};
}

scalar_ctypes! {
    u8 => "uint8_t",
    u32 => "uint32_t",
    i32 => "int32_t",
    i64 => "int64_t",
    usize => "size_t",
    f64 => "double",
    c_char => "char",
    c_void => "void",
    () => "void",
}

/// `type declarator`, without a trailing space when the declarator is empty.
fn join(ty: &str, declarator: &str) -> String {
    if declarator.is_empty() {
        ty.to_string()
    } else {
        format!("{ty} {declarator}")
    }
}

/// A declarator that binds looser than a suffix (`[N]`, `(..)`) is parenthesised first.
fn bind(declarator: &str) -> String {
    if declarator.starts_with('*') {
        format!("({declarator})")
    } else {
        declarator.to_string()
    }
}

impl<T: CType> CType for *const T {
    fn declare(declarator: &str) -> String {
        format!("const {}", T::declare(&format!("*{declarator}")))
    }
}

impl<T: CType> CType for *mut T {
    fn declare(declarator: &str) -> String {
        T::declare(&format!("*{declarator}"))
    }
}

impl<T: CType, const N: usize> CType for [T; N] {
    fn declare(declarator: &str) -> String {
        T::declare(&format!("{}[{N}]", bind(declarator)))
    }
}

macro_rules! fn_ctypes {
    ($(($($arg:ident),*)),* $(,)?) => {$(
        impl<R: CType, $($arg: CType),*> CType for unsafe extern "C" fn($($arg),*) -> R {
            fn declare(declarator: &str) -> String {
                let params: Vec<String> = vec![$($arg::declare("")),*];
                let params = if params.is_empty() { "void".to_string() } else { params.join(", ") };
                R::declare(&format!("(*{})({params})", declarator))
            }
        }
    )*};
}

fn_ctypes! {
    (),
    (A),
    (A, B),
    (A, B, C),
    (A, B, C, D),
    (A, B, C, D, E),
    (A, B, C, D, E, F),
}

/// A `#[repr(C)]` struct whose C definition can be generated.
pub trait CStruct {
    /// The C++ definition: its doc as comments, then `struct Name { fields };`.
    fn definition() -> String;
}

/// Writes Rust doc lines as C++ `//` comments indented by `indent`.
pub fn comment(out: &mut String, indent: &str, doc: &[&str]) {
    for line in doc {
        let line = line.strip_prefix(' ').unwrap_or(line);
        if line.is_empty() {
            let _ = writeln!(out, "{indent}//");
        } else {
            let _ = writeln!(out, "{indent}// {line}");
        }
    }
}

/// Defines a `#[repr(C)]` struct and its [`CStruct`] C definition from one field list (each
/// field's type spelled by [`CType`]), and makes the struct itself a [`CType`] by name.
macro_rules! c_struct {
    (
        $(#[doc = $doc:literal])*
        pub struct $name:ident {
            $(
                $(#[doc = $fdoc:literal])*
                pub $field:ident: $ty:ty,
            )*
        }
    ) => {
        $(#[doc = $doc])*
        #[repr(C)]
        pub struct $name {
            $(
                $(#[doc = $fdoc])*
                pub $field: $ty,
            )*
        }

        impl $crate::fast::c_decl::CStruct for $name {
            fn definition() -> String {
                let mut out = String::new();
                $crate::fast::c_decl::comment(&mut out, "", &[$($doc),*]);
                out.push_str(concat!("struct ", stringify!($name), " {\n"));
                $(
                    $crate::fast::c_decl::comment(&mut out, "  ", &[$($fdoc),*]);
                    out.push_str("  ");
                    out.push_str(&<$ty as $crate::fast::c_decl::CType>::declare(stringify!($field)));
                    out.push_str(";\n");
                )*
                out.push_str("};\n");
                out.push_str(&format!(
                    "static_assert(sizeof({}) == {}, \"{} has the Rust layout\");\n",
                    stringify!($name),
                    ::std::mem::size_of::<$name>(),
                    stringify!($name),
                ));
                $(
                    out.push_str(&format!(
                        "static_assert(offsetof({}, {}) == {});\n",
                        stringify!($name),
                        stringify!($field),
                        ::std::mem::offset_of!($name, $field),
                    ));
                )*
                out
            }
        }

        impl $crate::fast::c_decl::CType for $name {
            fn declare(declarator: &str) -> String {
                if declarator.is_empty() {
                    stringify!($name).to_string()
                } else {
                    format!("{} {declarator}", stringify!($name))
                }
            }
        }
    };
}

/// Defines a `#[repr(u8)]` enum with explicit codes, its `from_code` (the value of a byte read
/// from C, `None` for an unknown code), and its C++ `enum class Name : uint8_t` (`c_definition`).
macro_rules! c_enum {
    (
        $(#[doc = $doc:literal])*
        pub enum $name:ident {
            $(
                $(#[doc = $vdoc:expr])*
                $variant:ident = $code:literal,
            )*
        }
    ) => {
        $(#[doc = $doc])*
        #[repr(u8)]
        #[derive(Clone, Copy, Debug, PartialEq, Eq)]
        pub enum $name {
            $(
                $(#[doc = $vdoc])*
                $variant = $code,
            )*
        }

        impl $name {
            /// The variant with this code.
            pub const fn from_code(code: u8) -> Option<Self> {
                match code {
                    $($code => Some(Self::$variant),)*
                    _ => None,
                }
            }

            /// The C++ definition, `enum class Name : uint8_t { .. };`.
            pub fn c_definition() -> String {
                let mut out = String::new();
                $crate::fast::c_decl::comment(&mut out, "", &[$($doc),*]);
                out.push_str(concat!("enum class ", stringify!($name), " : uint8_t {\n"));
                $(
                    $crate::fast::c_decl::comment(&mut out, "  ", &[$($vdoc),*]);
                    out.push_str(concat!("  ", stringify!($variant), " = ", $code, ",\n"));
                )*
                out.push_str("};\n");
                out
            }
        }
    };
}

pub(crate) use {c_enum, c_struct};

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn declarations_follow_c_declarator_syntax() {
        assert_eq!(u8::declare("present"), "uint8_t present");
        assert_eq!(<*const i64>::declare("shape"), "const int64_t *shape");
        assert_eq!(<*mut u8>::declare("data"), "uint8_t *data");
        assert_eq!(<*const c_void>::declare(""), "const void *");
        assert_eq!(<[usize; 8]>::declare("ndim"), "size_t ndim[8]");
        assert_eq!(<[[i64; 4]; 8]>::declare("shape"), "int64_t shape[8][4]");
        assert_eq!(<[*const u8; 2]>::declare("p"), "const uint8_t *p[2]");
        assert_eq!(<*const [u8; 2]>::declare("p"), "const uint8_t (*p)[2]");
        assert_eq!(
            <unsafe extern "C" fn(*const c_char) -> *const c_void>::declare("lookup"),
            "const void *(*lookup)(const char *)"
        );
        assert_eq!(
            <unsafe extern "C" fn(*const c_void, usize)>::declare("release"),
            "void (*release)(const void *, size_t)"
        );
        assert_eq!(
            <unsafe extern "C" fn() -> i32>::declare("f"),
            "int32_t (*f)(void)"
        );
    }

    super::c_struct! {
        /// A test struct.
        pub struct Pair {
            /// First.
            pub a: u8,
            pub b: *const Pair,
        }
    }

    super::c_enum! {
        /// A test enum.
        pub enum Kind {
            /// One.
            One = 1,
            Three = 3,
        }
    }

    #[test]
    fn structs_and_enums_carry_their_docs_layout_and_codes() {
        let ptr = std::mem::size_of::<usize>();
        assert_eq!(
            Pair::definition(),
            format!(
                "// A test struct.\nstruct Pair {{\n  // First.\n  uint8_t a;\n  const Pair *b;\n}};\n\
                 static_assert(sizeof(Pair) == {}, \"Pair has the Rust layout\");\n\
                 static_assert(offsetof(Pair, a) == 0);\n\
                 static_assert(offsetof(Pair, b) == {ptr});\n",
                2 * ptr
            )
        );
        assert_eq!(
            Kind::c_definition(),
            "// A test enum.\nenum class Kind : uint8_t {\n  // One.\n  One = 1,\n  Three = 3,\n};\n"
        );
        assert_eq!(Kind::from_code(3), Some(Kind::Three));
        assert_eq!(Kind::from_code(2), None);
    }
}
