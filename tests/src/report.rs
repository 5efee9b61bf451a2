//! Tolerances (each kernel's `ToleranceClass`, `nki_core::op_info`), the element-wise comparison
//! against ATen, and the text report.

use std::fmt::Write as _;

pub use nki_core::op_info::Tolerance;

/// The smallest magnitude a relative error divides by: `f32::MIN_POSITIVE` (2^-126).
pub const REL_FLOOR: f64 = f32::MIN_POSITIVE as f64;

/// The share of `tol` an error of `abs_err` against `reference` uses (≤ 1 passes).
pub fn used(tol: &Tolerance, abs_err: f64, reference: f64) -> f64 {
    abs_err / (tol.atol + tol.rtol * reference.abs())
}

/// How one case compared against its ATen reference. All errors are computed in `f64` from
/// the `f32` values of kernel output and reference, over the stored elements only.
#[derive(Clone, Debug, PartialEq)]
pub struct CaseResult {
    /// Case name.
    pub name: String,
    /// The tolerance applied.
    pub tol: Tolerance,
    /// Elements compared.
    pub checked: usize,
    /// Elements of the full output (more than `checked` when the fixture stores a row sample).
    pub total: usize,
    /// Largest absolute error `|a - r|` (NaN if any element is NaN).
    pub max_abs: f64,
    /// Largest relative error `|a - r| / max(|r|, REL_FLOOR)` (NaN if any element is NaN).
    pub max_rel: f64,
    /// Largest share of the tolerance used, `|a - r| / (atol + rtol * |r|)`; ≤ 1 passes.
    pub max_used: f64,
    /// Elements outside the tolerance (NaN counts as outside).
    pub failures: usize,
    /// The element using the most tolerance: flat index into the full output, actual, reference.
    pub worst: Option<(usize, f32, f32)>,
}

impl CaseResult {
    /// Compares `actual` (the full kernel output) with `reference` (the stored elements, at
    /// flat positions `indices` of the full output) under `tol`.
    pub fn compare(
        name: &str,
        tol: Tolerance,
        actual: &[f32],
        indices: &[usize],
        reference: &[f32],
    ) -> CaseResult {
        assert_eq!(
            indices.len(),
            reference.len(),
            "{name}: one index per reference element"
        );
        let nan_max = |m: f64, v: f64| {
            if m.is_nan() || v.is_nan() {
                f64::NAN
            } else {
                m.max(v)
            }
        };
        let mut res = CaseResult {
            name: name.to_string(),
            tol,
            checked: indices.len(),
            total: actual.len(),
            max_abs: 0.0,
            max_rel: 0.0,
            max_used: 0.0,
            failures: 0,
            worst: None,
        };
        let mut worst_used = -1.0;
        for (&i, &r) in indices.iter().zip(reference) {
            let a = actual[i];
            let (a64, r64) = (f64::from(a), f64::from(r));
            let abs = (a64 - r64).abs();
            let used = used(&tol, abs, r64);
            res.max_abs = nan_max(res.max_abs, abs);
            res.max_rel = nan_max(res.max_rel, abs / r64.abs().max(REL_FLOOR));
            res.max_used = nan_max(res.max_used, used);
            // Written so that NaN is outside.
            let within = abs <= tol.atol + tol.rtol * r64.abs();
            if !within {
                res.failures += 1;
            }
            let key = if used.is_nan() { f64::INFINITY } else { used };
            if key > worst_used {
                worst_used = key;
                res.worst = Some((i, a, r));
            }
        }
        res
    }

    /// Whether every compared element is within tolerance.
    pub fn passed(&self) -> bool {
        self.failures == 0 && self.checked > 0
    }
}

/// A number to two significant digits, `3.1e-7` style; `0` for an exact zero.
pub fn sig2(v: f64) -> String {
    if v == 0.0 {
        "0".to_string()
    } else if v.is_finite() {
        format!("{v:.1e}")
    } else {
        format!("{v}")
    }
}

/// The accuracy report: a header and one line per case, sorted by case name, columns aligned.
pub fn render(results: &[CaseResult]) -> String {
    let mut sorted: Vec<&CaseResult> = results.iter().collect();
    sorted.sort_by(|a, b| a.name.cmp(&b.name));
    let header = [
        "case", "checked", "max_abs", "max_rel", "tol_used", "atol", "rtol", "result",
    ]
    .map(String::from);
    let mut rows = vec![header.to_vec()];
    for r in sorted {
        let checked = if r.checked == r.total {
            r.checked.to_string()
        } else {
            format!("{}/{}", r.checked, r.total)
        };
        let result = if r.passed() {
            "PASS".to_string()
        } else {
            format!("FAIL ({} elements)", r.failures)
        };
        rows.push(vec![
            r.name.clone(),
            checked,
            sig2(r.max_abs),
            sig2(r.max_rel),
            sig2(r.max_used),
            sig2(r.tol.atol),
            sig2(r.tol.rtol),
            result,
        ]);
    }
    let widths: Vec<usize> = (0..header.len())
        .map(|c| rows.iter().map(|r| r[c].len()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in &rows {
        let mut line = String::new();
        for (c, cell) in row.iter().enumerate() {
            let _ = write!(line, "{cell:<w$}  ", w = widths[c]);
        }
        out.push_str(line.trim_end());
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    const TOL: Tolerance = Tolerance {
        rtol: 1e-3,
        atol: 1e-3,
    };

    #[test]
    fn sig2_rounds_to_two_significant_digits() {
        assert_eq!(sig2(0.0), "0");
        assert_eq!(sig2(3.14159e-7), "3.1e-7");
        assert_eq!(sig2(1e-5), "1.0e-5");
        assert_eq!(sig2(0.016), "1.6e-2");
        assert_eq!(sig2(2.96), "3.0e0");
        assert_eq!(sig2(f64::NAN), "NaN");
    }

    #[test]
    fn allclose_rule_and_error_metrics() {
        // |a - r| = 0.002 against r = 1: bound 0.001 + 0.001 = 0.002 passes (inclusive).
        let ok = CaseResult::compare("c", TOL, &[1.0, 1.002], &[0, 1], &[1.0, 1.0]);
        assert_eq!(ok.failures, 0, "{ok:?}");
        assert!(ok.passed());
        assert!((ok.max_abs - 0.002).abs() < 1e-6 && (ok.max_rel - 0.002).abs() < 1e-6);
        assert_eq!(ok.worst.map(|w| w.0), Some(1));
        let bad = CaseResult::compare("c", TOL, &[9.0, 0.0, 0.1], &[1, 2], &[0.0, 0.0]);
        assert_eq!((bad.failures, bad.checked, bad.total), (1, 2, 3));
        assert_eq!(bad.worst, Some((2, 0.1, 0.0)));
        assert!(
            bad.max_rel > 1e30,
            "relative error against 0 divides by REL_FLOOR"
        );
    }

    #[test]
    fn nan_always_fails() {
        let r = CaseResult::compare("c", TOL, &[f32::NAN, 1.0], &[0, 1], &[1.0, 1.0]);
        assert_eq!(r.failures, 1);
        assert!(r.max_abs.is_nan() && r.max_used.is_nan());
        assert!(!r.passed());
    }

    #[test]
    fn report_is_sorted_and_aligned() {
        let pass = CaseResult::compare("b_case", TOL, &[1.0], &[0], &[1.0]);
        let fail = CaseResult::compare("a", TOL, &[1.0, 2.0], &[1], &[1.0]);
        let text = render(&[pass, fail]);
        assert_eq!(
            text,
            "case    checked  max_abs  max_rel  tol_used  atol    rtol    result\n\
             a       1/2      1.0e0    1.0e0    5.0e2     1.0e-3  1.0e-3  FAIL (1 elements)\n\
             b_case  1        0        0        0         1.0e-3  1.0e-3  PASS\n"
        );
    }
}
