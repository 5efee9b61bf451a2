//! Scalar kernel parameters: the supported primitive types, their torch schema class
//! (`float`, `int`, `bool`) and `#[default(...)]` values checked against the declared type.

use proc_macro2::{Ident, TokenStream};
use quote::ToTokens;
use syn::{Attribute, Expr, Lit, UnOp};

/// Supported scalar parameter types.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalarType {
    /// `f32`
    F32,
    /// `f64`
    F64,
    /// `i32`
    I32,
    /// `i64`
    I64,
    /// `u32`
    U32,
    /// `u64`
    U64,
    /// `usize`
    Usize,
    /// `isize`
    Isize,
    /// `bool`
    Bool,
    /// `&str` with `#[choices(..)]`
    Str,
}

/// The value class a scalar type belongs to: the schema type and the `KernelArgs` accessor.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum ScalarClass {
    /// Schema `float`.
    Float,
    /// Schema `int`.
    Int,
    /// Schema `bool`.
    Bool,
    /// Schema `str` (one of the parameter's choices).
    Str,
}

impl ScalarType {
    /// Every primitive scalar type, matched by name (`&str` is matched as a reference).
    pub const ALL: [ScalarType; 9] = [
        ScalarType::F32,
        ScalarType::F64,
        ScalarType::I32,
        ScalarType::I64,
        ScalarType::U32,
        ScalarType::U64,
        ScalarType::Usize,
        ScalarType::Isize,
        ScalarType::Bool,
    ];

    /// The Rust type name.
    pub fn rust_name(self) -> &'static str {
        match self {
            ScalarType::F32 => "f32",
            ScalarType::F64 => "f64",
            ScalarType::I32 => "i32",
            ScalarType::I64 => "i64",
            ScalarType::U32 => "u32",
            ScalarType::U64 => "u64",
            ScalarType::Usize => "usize",
            ScalarType::Isize => "isize",
            ScalarType::Bool => "bool",
            ScalarType::Str => "&str",
        }
    }

    /// Float, int or bool.
    pub fn class(self) -> ScalarClass {
        match self {
            ScalarType::F32 | ScalarType::F64 => ScalarClass::Float,
            ScalarType::Bool => ScalarClass::Bool,
            ScalarType::Str => ScalarClass::Str,
            _ => ScalarClass::Int,
        }
    }

    /// Whether `KernelArgs` returns exactly this type (`f64`, `i64`, `bool`), so no cast is needed.
    pub fn is_accessor_type(self) -> bool {
        matches!(
            self,
            ScalarType::F64 | ScalarType::I64 | ScalarType::Bool | ScalarType::Str
        )
    }

    /// The inclusive range of integer values this type can hold as an `i64` default.
    fn int_range(self) -> (i64, i64) {
        match self {
            ScalarType::I32 => (i32::MIN.into(), i32::MAX.into()),
            ScalarType::U32 => (0, u32::MAX.into()),
            ScalarType::U64 | ScalarType::Usize => (0, i64::MAX),
            _ => (i64::MIN, i64::MAX),
        }
    }
}

impl ScalarClass {
    /// The torch schema type: `float`, `int` or `bool`.
    pub fn schema_type(self) -> &'static str {
        match self {
            ScalarClass::Float => "float",
            ScalarClass::Int => "int",
            ScalarClass::Bool => "bool",
            ScalarClass::Str => "str",
        }
    }
}

/// A default value, already converted to the parameter's class.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum ScalarValue {
    /// A float.
    Float(f64),
    /// An int.
    Int(i64),
    /// A bool.
    Bool(bool),
    /// A `str` parameter's choice, by index.
    Choice(usize),
}

/// Parses `#[default(lit)]` for parameter `name: ty`, checking that the literal fits the type.
pub fn parse_default(attr: &Attribute, name: &Ident, ty: ScalarType) -> syn::Result<ScalarValue> {
    let syn::Meta::List(list) = &attr.meta else {
        return Err(syn::Error::new_spanned(
            attr,
            format!("write the default of `{name}` as `#[default(value)]`"),
        ));
    };
    let expr: Expr = syn::parse2(list.tokens.clone()).map_err(|e| {
        syn::Error::new(
            e.span(),
            format!("expected a literal default for `{name}`, e.g. `#[default(1e-6)]`"),
        )
    })?;
    let (negative, lit) = match &expr {
        Expr::Lit(l) => (false, &l.lit),
        Expr::Unary(u) if matches!(u.op, UnOp::Neg(_)) => match &*u.expr {
            Expr::Lit(l) if matches!(l.lit, Lit::Int(_) | Lit::Float(_)) => (true, &l.lit),
            _ => return Err(not_literal(&expr, name)),
        },
        _ => return Err(not_literal(&expr, name)),
    };
    let class = ty.class();
    let wrong = || {
        let example = match class {
            ScalarClass::Float => "a number such as `1e-6` or `0.5`",
            ScalarClass::Int => "an integer such as `4`",
            ScalarClass::Bool => "`true` or `false`",
            ScalarClass::Str => "a string literal",
        };
        syn::Error::new_spanned(
            &expr,
            format!(
                "default `{}` does not match the type of `{name}: {}`; expected {example}",
                tokens_text(expr.to_token_stream()),
                ty.rust_name()
            ),
        )
    };
    let sign = if negative { "-" } else { "" };
    match (class, lit) {
        (ScalarClass::Float, Lit::Float(f)) => Ok(ScalarValue::Float(
            format!("{sign}{}", f.base10_digits())
                .parse()
                .map_err(|_| wrong())?,
        )),
        (ScalarClass::Float, Lit::Int(i)) => Ok(ScalarValue::Float(
            format!("{sign}{}", i.base10_digits())
                .parse()
                .map_err(|_| wrong())?,
        )),
        (ScalarClass::Int, Lit::Int(i)) => {
            let v: i64 = format!("{sign}{}", i.base10_digits())
                .parse()
                .map_err(|_| wrong())?;
            let (lo, hi) = ty.int_range();
            if v < lo || v > hi {
                return Err(syn::Error::new_spanned(
                    &expr,
                    format!(
                        "default `{v}` is out of range for `{name}: {}` ({lo} to {hi})",
                        ty.rust_name()
                    ),
                ));
            }
            Ok(ScalarValue::Int(v))
        }
        (ScalarClass::Bool, Lit::Bool(b)) => Ok(ScalarValue::Bool(b.value)),
        _ => Err(wrong()),
    }
}

fn not_literal(expr: &Expr, name: &Ident) -> syn::Error {
    syn::Error::new_spanned(
        expr,
        format!("the default of `{name}` must be a literal such as `1e-6`, `4` or `true`"),
    )
}

/// Token text without the spaces `TokenStream`'s `Display` puts between a sign and a literal.
fn tokens_text(tokens: TokenStream) -> String {
    tokens.to_string().replace("- ", "-")
}
