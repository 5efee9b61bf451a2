//! Affine index arithmetic over symbolic loop variables.
//!
//! Loops stay loops in the IR: a loop index is a [`LoopVar`], and offsets computed from it are
//! [`AffineExpr`]s (`c + Σ kᵢ·iᵢ`). Because every loop has a static trip count, the range of an
//! expression is known exactly at trace time, which is what bounds checks use.

use serde::Serialize;
use std::fmt;
use std::ops::{Add, Mul, Sub};

/// A loop variable, identified by its index in [`crate::ir::Program::loops`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct LoopVar(pub u32);

/// `constant + Σ coefficient·variable`, with terms sorted by variable and no zero coefficients.
#[derive(Clone, Debug, Default, PartialEq, Eq, Hash, Serialize)]
pub struct AffineExpr {
    /// The constant term.
    pub constant: i64,
    /// `(variable, coefficient)` pairs, sorted by variable, coefficients non-zero.
    pub terms: Vec<(LoopVar, i64)>,
}

impl AffineExpr {
    /// A constant expression.
    pub fn constant(c: i64) -> Self {
        AffineExpr {
            constant: c,
            terms: Vec::new(),
        }
    }

    /// The expression `1·var`.
    pub fn var(var: LoopVar) -> Self {
        AffineExpr {
            constant: 0,
            terms: vec![(var, 1)],
        }
    }

    /// The constant value, if the expression has no variable terms.
    pub fn as_constant(&self) -> Option<i64> {
        self.terms.is_empty().then_some(self.constant)
    }

    /// The coefficient of `var` (0 when absent).
    pub fn coefficient(&self, var: LoopVar) -> i64 {
        self.terms
            .iter()
            .find(|(v, _)| *v == var)
            .map_or(0, |(_, k)| *k)
    }

    /// Evaluates with `values[var.0]` as each variable's current value (saturating at `i64`'s
    /// bounds, so an offset past them fails a bounds check instead of wrapping into range).
    #[inline]
    pub fn eval(&self, values: &[i64]) -> i64 {
        self.terms.iter().fold(self.constant, |acc, (v, k)| {
            acc.saturating_add(k.saturating_mul(values[v.0 as usize]))
        })
    }

    /// The smallest and largest value over all iterations, given each variable's trip count
    /// (`trips[var.0]`, variables range over `0..trip`), saturating as [`Self::eval`] does.
    pub fn range(&self, trips: &[usize]) -> (i64, i64) {
        let mut lo = self.constant;
        let mut hi = self.constant;
        for (v, k) in &self.terms {
            let last = i64::try_from(trips[v.0 as usize].saturating_sub(1)).unwrap_or(i64::MAX);
            let reach = k.saturating_mul(last);
            if *k > 0 {
                hi = hi.saturating_add(reach);
            } else {
                lo = lo.saturating_add(reach);
            }
        }
        (lo, hi)
    }

    fn add_term(&mut self, var: LoopVar, k: i64) {
        match self.terms.binary_search_by_key(&var, |(v, _)| *v) {
            Ok(i) => {
                self.terms[i].1 += k;
                if self.terms[i].1 == 0 {
                    self.terms.remove(i);
                }
            }
            Err(i) if k != 0 => self.terms.insert(i, (var, k)),
            Err(_) => {}
        }
    }

    /// Multiplies every coefficient and the constant by `k`.
    pub fn scaled(mut self, k: i64) -> Self {
        if k == 0 {
            return AffineExpr::constant(0);
        }
        self.constant *= k;
        for t in &mut self.terms {
            t.1 *= k;
        }
        self
    }
}

impl From<i64> for AffineExpr {
    fn from(c: i64) -> Self {
        AffineExpr::constant(c)
    }
}

impl From<usize> for AffineExpr {
    fn from(c: usize) -> Self {
        AffineExpr::constant(c as i64)
    }
}

impl From<i32> for AffineExpr {
    fn from(c: i32) -> Self {
        AffineExpr::constant(c as i64)
    }
}

impl<T: Into<AffineExpr>> Add<T> for AffineExpr {
    type Output = AffineExpr;
    fn add(mut self, rhs: T) -> AffineExpr {
        let rhs = rhs.into();
        self.constant += rhs.constant;
        for (v, k) in rhs.terms {
            self.add_term(v, k);
        }
        self
    }
}

impl<T: Into<AffineExpr>> Sub<T> for AffineExpr {
    type Output = AffineExpr;
    fn sub(self, rhs: T) -> AffineExpr {
        self + rhs.into().scaled(-1)
    }
}

impl Mul<i64> for AffineExpr {
    type Output = AffineExpr;
    fn mul(self, k: i64) -> AffineExpr {
        self.scaled(k)
    }
}

impl Mul<usize> for AffineExpr {
    type Output = AffineExpr;
    fn mul(self, k: usize) -> AffineExpr {
        self.scaled(k as i64)
    }
}

impl fmt::Display for AffineExpr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut first = true;
        for (v, k) in &self.terms {
            let sep = if first { "" } else { " + " };
            if *k == 1 {
                write!(f, "{sep}i{}", v.0)?;
            } else {
                write!(f, "{sep}{k}*i{}", v.0)?;
            }
            first = false;
        }
        if first {
            write!(f, "{}", self.constant)
        } else if self.constant != 0 {
            write!(f, " + {}", self.constant)
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn arithmetic_and_range() {
        let i = AffineExpr::var(LoopVar(0));
        let j = AffineExpr::var(LoopVar(1));
        let e = i.clone() * 128usize + j.clone() * 512usize + 3i64;
        assert_eq!(e.eval(&[2, 1]), 2 * 128 + 512 + 3);
        assert_eq!(e.range(&[4, 2]), (3, 3 * 128 + 512 + 3));
        let z = e.clone() - e;
        assert_eq!(z.as_constant(), Some(0));
        let neg = AffineExpr::constant(10) - i * 2i64;
        assert_eq!(neg.range(&[5]), (2, 10));
        assert_eq!(format!("{}", j * 4i64 + 1i64), "4*i1 + 1");
    }
}
