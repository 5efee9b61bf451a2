//! Dimension expressions as written in `shape(...) -> [...]` outputs and `require(...)`
//! clauses: symbols, integer literals, `+ - * / %` and parentheses.
//!
//! They are parsed as ordinary Rust expressions ([`syn::Expr`]) and converted into the small
//! [`DimExpr`] tree, which remembers the span of every symbol for error messages and prints
//! itself back with minimal parentheses (the `text` of a requirement).

use proc_macro2::{Ident, Span};
use std::fmt;
use syn::spanned::Spanned;
use syn::{BinOp, Expr, Lit, UnOp};

/// An arithmetic operator allowed in a dimension expression (the shared vocabulary's).
pub use nki_contract::DimOp;

fn dim_op(op: &BinOp) -> Option<DimOp> {
    Some(match op {
        BinOp::Add(_) => DimOp::Add,
        BinOp::Sub(_) => DimOp::Sub,
        BinOp::Mul(_) => DimOp::Mul,
        BinOp::Div(_) => DimOp::Div,
        BinOp::Rem(_) => DimOp::Rem,
        _ => return None,
    })
}

/// An integer expression over dimension symbols, e.g. `N`, `2 * D`, `(K + 127) / 128`.
#[derive(Clone, Debug)]
pub enum DimExpr {
    /// A dimension symbol.
    Sym(Ident),
    /// An integer literal (negative literals allowed).
    Const {
        /// The value.
        value: i64,
        /// Where it was written.
        span: Span,
    },
    /// A binary operation.
    Binary {
        /// The operator.
        op: DimOp,
        /// Left operand.
        lhs: Box<DimExpr>,
        /// Right operand.
        rhs: Box<DimExpr>,
    },
}

const EXPECTED: &str = "expected a dimension expression: a symbol such as `N`, an integer literal, `+ - * / %` or parentheses";

impl DimExpr {
    /// Converts a parsed Rust expression, rejecting anything outside the dimension grammar.
    pub fn from_expr(expr: &Expr) -> syn::Result<DimExpr> {
        match expr {
            Expr::Path(p) if p.qself.is_none() && p.attrs.is_empty() => match p.path.get_ident() {
                Some(ident) => Ok(DimExpr::Sym(ident.clone())),
                None => Err(syn::Error::new_spanned(
                    p,
                    "a dimension symbol is a single identifier such as `N`, not a path",
                )),
            },
            Expr::Lit(l) => match &l.lit {
                Lit::Int(i) => Ok(DimExpr::Const {
                    value: i.base10_parse()?,
                    span: i.span(),
                }),
                other => Err(syn::Error::new_spanned(
                    other,
                    "dimension literals are integers such as `128`; this literal is not an integer",
                )),
            },
            Expr::Unary(u) if matches!(u.op, UnOp::Neg(_)) => match &*u.expr {
                Expr::Lit(l) => match &l.lit {
                    Lit::Int(i) => {
                        let value: i64 =
                            format!("-{}", i.base10_digits()).parse().map_err(|_| {
                                syn::Error::new_spanned(u, "this integer does not fit in 64 bits")
                            })?;
                        Ok(DimExpr::Const {
                            value,
                            span: u.span(),
                        })
                    }
                    _ => Err(syn::Error::new_spanned(u, EXPECTED)),
                },
                _ => Err(syn::Error::new_spanned(
                    u,
                    "negation applies only to integer literals in dimension expressions; write `0 - N`",
                )),
            },
            Expr::Binary(b) => match dim_op(&b.op) {
                Some(op) => Ok(DimExpr::Binary {
                    op,
                    lhs: Box::new(DimExpr::from_expr(&b.left)?),
                    rhs: Box::new(DimExpr::from_expr(&b.right)?),
                }),
                None => Err(syn::Error::new_spanned(
                    b.op,
                    "dimension expressions allow only the operators `+ - * / %`",
                )),
            },
            Expr::Paren(p) => DimExpr::from_expr(&p.expr),
            Expr::Group(g) => DimExpr::from_expr(&g.expr),
            Expr::Range(r) if r.start.is_none() => Err(syn::Error::new_spanned(
                r,
                "a sequence `..S` must be a whole output dimension on its own, e.g. `[..S, D]`",
            )),
            other => Err(syn::Error::new_spanned(other, EXPECTED)),
        }
    }

    /// Appends every symbol in the expression, left to right.
    pub fn symbols<'a>(&'a self, out: &mut Vec<&'a Ident>) {
        match self {
            DimExpr::Sym(s) => out.push(s),
            DimExpr::Const { .. } => {}
            DimExpr::Binary { lhs, rhs, .. } => {
                lhs.symbols(out);
                rhs.symbols(out);
            }
        }
    }

    /// The expression in the shared vocabulary (operands leaked: the macro's process is short
    /// lived), for rendering and checks.
    pub fn to_contract(&self) -> nki_contract::DimExpr {
        match self {
            DimExpr::Sym(s) => nki_contract::DimExpr::Sym {
                name: Box::leak(s.to_string().into_boxed_str()),
            },
            DimExpr::Const { value, .. } => nki_contract::DimExpr::Const { value: *value },
            DimExpr::Binary { op, lhs, rhs } => nki_contract::DimExpr::Binary {
                op: *op,
                lhs: Box::leak(Box::new(lhs.to_contract())),
                rhs: Box::leak(Box::new(rhs.to_contract())),
            },
        }
    }
}

impl fmt::Display for DimExpr {
    /// Prints the expression as the contract renders it (minimal parentheses).
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.to_contract())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn dim(src: &str) -> syn::Result<DimExpr> {
        DimExpr::from_expr(&syn::parse_str(src)?)
    }

    #[test]
    fn converts_and_prints_with_minimal_parentheses() {
        for (src, printed) in [
            ("N", "N"),
            ("128", "128"),
            ("-3", "-3"),
            ("2 * D", "2 * D"),
            ("(K + 127) / 128", "(K + 127) / 128"),
            ("N - (D - 1)", "N - (D - 1)"),
            ("(N - D) - 1", "N - D - 1"),
            ("N % 128", "N % 128"),
            ("((N))", "N"),
        ] {
            assert_eq!(dim(src).unwrap().to_string(), printed, "{src}");
        }
    }

    #[test]
    fn collects_symbols_in_order() {
        let e = dim("(K + N) * K / D").unwrap();
        let mut syms = Vec::new();
        e.symbols(&mut syms);
        let names: Vec<String> = syms.iter().map(|s| s.to_string()).collect();
        assert_eq!(names, ["K", "N", "K", "D"]);
    }

    #[test]
    fn rejects_what_is_not_a_dimension() {
        for (src, msg) in [
            ("N << 2", "only the operators `+ - * / %`"),
            ("1.5", "not an integer"),
            ("a::b", "not a path"),
            ("f(N)", EXPECTED),
            ("-N", "negation applies only to integer literals"),
            ("..S", "must be a whole output dimension"),
        ] {
            let e = dim(src).unwrap_err().to_string();
            assert!(e.contains(msg), "{src}: {e}");
        }
    }
}
