//! Shape unification for the backward check: backward dimension patterns matched against the
//! forward's dimension lists, binding backward symbols (`Binds`), and the messages that print
//! dimensions.

#![allow(clippy::result_large_err)]

use super::super::msg::{ConstMsg, str_eq};
use super::{Ctx, MAX_SYMS};
use crate::contract::{DimExpr, DimPattern, OutDim};

/// A forward dimension list.
#[derive(Clone, Copy)]
pub(super) enum Dims {
    In(&'static [DimPattern]),
    Out(&'static [OutDim]),
}

/// One forward dimension.
#[derive(Clone, Copy)]
pub(super) enum Term {
    Sym(&'static str),
    Const(i64),
    Rest(&'static str),
    Expr(&'static DimExpr),
}

impl Dims {
    pub(super) const fn len(self) -> usize {
        match self {
            Dims::In(d) => d.len(),
            Dims::Out(d) => d.len(),
        }
    }

    pub(super) const fn term(self, i: usize) -> Term {
        match self {
            Dims::In(d) => match d[i] {
                DimPattern::Sym { name } => Term::Sym(name),
                DimPattern::Const { value } => Term::Const(value as i64),
                DimPattern::Rest { name } => Term::Rest(name),
            },
            Dims::Out(d) => match &d[i] {
                OutDim::Expr { expr } => match expr {
                    DimExpr::Sym { name } => Term::Sym(name),
                    DimExpr::Const { value } => Term::Const(*value),
                    other => Term::Expr(other),
                },
                OutDim::Rest { name } => Term::Rest(name),
            },
        }
    }
}

pub(super) const fn expr_eq(a: &DimExpr, b: &DimExpr) -> bool {
    match (a, b) {
        (DimExpr::Sym { name: x }, DimExpr::Sym { name: y }) => str_eq(x, y),
        (DimExpr::Const { value: x }, DimExpr::Const { value: y }) => *x == *y,
        (
            DimExpr::Binary {
                op: o1,
                lhs: l1,
                rhs: r1,
            },
            DimExpr::Binary {
                op: o2,
                lhs: l2,
                rhs: r2,
            },
        ) => *o1 as u8 == *o2 as u8 && expr_eq(l1, l2) && expr_eq(r1, r2),
        _ => false,
    }
}

pub(super) const fn term_eq(a: Term, b: Term) -> bool {
    match (a, b) {
        (Term::Sym(x), Term::Sym(y)) | (Term::Rest(x), Term::Rest(y)) => str_eq(x, y),
        (Term::Const(x), Term::Const(y)) => x == y,
        (Term::Expr(x), Term::Expr(y)) => expr_eq(x, y),
        _ => false,
    }
}

pub(super) const fn push_i64(m: ConstMsg, v: i64) -> ConstMsg {
    let mut digits = [0u8; 20];
    let mut n = v.unsigned_abs();
    let mut len = 0;
    loop {
        digits[len] = b'0' + (n % 10) as u8;
        len += 1;
        n /= 10;
        if n == 0 {
            break;
        }
    }
    let mut m = if v < 0 { m.push("-") } else { m };
    while len > 0 {
        len -= 1;
        let d = [digits[len]];
        m = match core::str::from_utf8(&d) {
            Ok(s) => m.push(s),
            Err(_) => m,
        };
    }
    m
}

pub(super) const fn push_expr(m: ConstMsg, e: &DimExpr) -> ConstMsg {
    match e {
        DimExpr::Sym { name } => m.push(name),
        DimExpr::Const { value } => push_i64(m, *value),
        DimExpr::Binary { op, lhs, rhs } => {
            let m = push_expr(m.push("("), lhs)
                .push(" ")
                .push(op.symbol())
                .push(" ");
            push_expr(m, rhs).push(")")
        }
    }
}

pub(super) const fn push_term(m: ConstMsg, t: Term) -> ConstMsg {
    match t {
        Term::Sym(s) => m.push(s),
        Term::Const(v) => push_i64(m, v),
        Term::Rest(s) => m.push("..").push(s),
        Term::Expr(e) => push_expr(m, e),
    }
}

pub(super) const fn push_dims(mut m: ConstMsg, d: Dims) -> ConstMsg {
    m = m.push("[");
    let mut i = 0;
    while i < d.len() {
        if i > 0 {
            m = m.push(", ");
        }
        m = push_term(m, d.term(i));
        i += 1;
    }
    m.push("]")
}

/// Backward symbols bound to forward dimensions.
pub(super) struct Binds {
    dims: [(&'static str, Term); MAX_SYMS],
    n_dims: usize,
    /// `..S` → a slice `start..start + len` of a forward dimension list.
    rests: [(&'static str, Dims, usize, usize); MAX_SYMS],
    n_rests: usize,
}

impl Binds {
    pub(super) const fn new() -> Binds {
        Binds {
            dims: [("", Term::Const(0)); MAX_SYMS],
            n_dims: 0,
            rests: [("", Dims::In(&[]), 0, 0); MAX_SYMS],
            n_rests: 0,
        }
    }

    pub(super) const fn dim(&self, name: &str) -> Option<Term> {
        let mut i = 0;
        while i < self.n_dims {
            if str_eq(self.dims[i].0, name) {
                return Some(self.dims[i].1);
            }
            i += 1;
        }
        None
    }

    pub(super) const fn rest(&self, name: &str) -> Option<(Dims, usize, usize)> {
        let mut i = 0;
        while i < self.n_rests {
            if str_eq(self.rests[i].0, name) {
                let (_, d, s, l) = self.rests[i];
                return Some((d, s, l));
            }
            i += 1;
        }
        None
    }
}

pub(super) const fn match_dim(
    ctx: Ctx,
    mut b: Binds,
    param: &str,
    pat: DimPattern,
    t: Term,
    what: (&'static str, Dims),
) -> Result<Binds, ConstMsg> {
    match pat {
        DimPattern::Sym { name } => match b.dim(name) {
            Some(prev) if !term_eq(prev, t) => {
                let m = ctx
                    .msg()
                    .push("`")
                    .push(param)
                    .push("` binds `")
                    .push(name)
                    .push("` to ");
                let m = push_term(m, t).push(" of forward ").push(what.0);
                let m = push_dims(m, what.1).push(", but it is already bound to ");
                Err(push_term(m, prev).push("; the two are not always equal"))
            }
            Some(_) => Ok(b),
            None => {
                if b.n_dims == MAX_SYMS {
                    return Err(ctx.msg().push("too many symbols to check"));
                }
                b.dims[b.n_dims] = (name, t);
                b.n_dims += 1;
                Ok(b)
            }
        },
        DimPattern::Const { value } => match t {
            Term::Const(v) if v == value as i64 => Ok(b),
            _ => {
                let m = ctx
                    .msg()
                    .push("`")
                    .push(param)
                    .push("` needs a dimension of ");
                let m = push_i64(m, value as i64)
                    .push(" where forward ")
                    .push(what.0);
                let m = push_dims(m, what.1).push(" has ");
                Err(push_term(m, t).push(", which can be any size"))
            }
        },
        DimPattern::Rest { .. } => Err(ctx.msg().push("internal: rest handled by unify")),
    }
}

/// Matches backward pattern `pat` of `param` against forward dims `f`.
pub(super) const fn unify(
    ctx: Ctx,
    mut b: Binds,
    param: &'static str,
    pat: &'static [DimPattern],
    what: (&'static str, Dims),
) -> Result<Binds, ConstMsg> {
    let f = what.1;
    let n = f.len();
    let mut rest_at = None;
    let mut forward_rest = false;
    let mut i = 0;
    while i < pat.len() {
        if let DimPattern::Rest { .. } = pat[i] {
            rest_at = Some(i);
        }
        i += 1;
    }
    i = 0;
    while i < n {
        if let Term::Rest(_) = f.term(i) {
            forward_rest = true;
        }
        i += 1;
    }
    let (before, after) = match rest_at {
        Some(r) => (r, pat.len() - 1 - r),
        None => (pat.len(), 0),
    };
    let fits = match rest_at {
        None => !forward_rest && n == pat.len(),
        Some(_) => n >= before + after,
    };
    if !fits {
        let m = ctx.msg().push("`").push(param).push("` has the pattern ");
        let m = push_dims(m, Dims::In(pat)).push(", which cannot take every shape of forward ");
        let m = push_dims(m.push(what.0), f);
        return Err(m.push(" (the ranks differ)"));
    }
    i = 0;
    while i < before {
        let t = f.term(i);
        if let Term::Rest(_) = t {
            let m = ctx.msg().push("`").push(param).push("` has the pattern ");
            let m = push_dims(m, Dims::In(pat)).push(", which cannot take every shape of forward ");
            return Err(push_dims(m.push(what.0), f).push(" (the ranks differ)"));
        }
        b = match match_dim(ctx, b, param, pat[i], t, what) {
            Ok(b) => b,
            Err(e) => return Err(e),
        };
        i += 1;
    }
    if let Some(r) = rest_at {
        let mut j = 0;
        while j < after {
            let t = f.term(n - after + j);
            if let Term::Rest(_) = t {
                let m = ctx.msg().push("`").push(param).push("` has the pattern ");
                let m =
                    push_dims(m, Dims::In(pat)).push(", which cannot take every shape of forward ");
                return Err(push_dims(m.push(what.0), f).push(" (the ranks differ)"));
            }
            b = match match_dim(ctx, b, param, pat[r + 1 + j], t, what) {
                Ok(b) => b,
                Err(e) => return Err(e),
            };
            j += 1;
        }
        let DimPattern::Rest { name } = pat[r] else {
            return Err(ctx.msg().push("internal: rest position"));
        };
        let len = n - after - before;
        match b.rest(name) {
            Some((d, s, l)) => {
                let mut same = l == len;
                let mut k = 0;
                while same && k < len {
                    same = term_eq(d.term(s + k), f.term(before + k));
                    k += 1;
                }
                if !same {
                    let m = ctx
                        .msg()
                        .push("`")
                        .push(param)
                        .push("` binds `..")
                        .push(name);
                    let m = m.push("` to a part of forward ").push(what.0);
                    let m =
                        push_dims(m, f).push(" that is not always equal to its earlier binding");
                    return Err(m);
                }
            }
            None => {
                if b.n_rests == MAX_SYMS {
                    return Err(ctx.msg().push("too many symbols to check"));
                }
                b.rests[b.n_rests] = (name, f, before, len);
                b.n_rests += 1;
            }
        }
    }
    Ok(b)
}
