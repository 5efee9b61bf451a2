//! The fp32 exponential of the simulated scalar engine: one definition, evaluated element by
//! element ([`exp`]) or over a row ([`exp_row`]) with the same bits.
//!
//! The device evaluates activations with its own approximations; the simulator's `exp` is a
//! Cody–Waite range reduction (`x = n·ln 2 + r`, `|r| ≤ ln 2 / 2`) and a degree-6 polynomial in
//! `r`, within 2 ulp of the exact value, written with plain fp32 multiplies and adds (no FMA, so
//! every build computes the same bits) and branch-free over a row so it vectorises. Arguments
//! at or below -104 give 0 (what a correctly rounded `expf` gives there: `e^-104` is under half
//! the smallest subnormal), so a row of masked `-inf` scores stays on the vector loop; other
//! arguments outside `[-87, 88]` (overflow, subnormal results) and NaN go to the C library's
//! `expf`.

/// Below this the result is subnormal or 0: computed by `expf`.
const LOW: f32 = -87.0;
/// Above this the result overflows soon: computed by `expf`.
const HIGH: f32 = 88.0;
/// At or below this `e^x < 2^-150`, half the smallest subnormal: the result rounds to 0.
const ZERO_AT_OR_BELOW: f32 = -104.0;

/// `e^x` for `x` in `[LOW, HIGH]` (any other input gives a finite garbage value).
#[inline(always)]
fn exp_in_range(x: f32) -> f32 {
    const LOG2E: f32 = std::f32::consts::LOG2_E;
    // ln 2 split so that n · LN2_HI is exact for |n| ≤ 2^9.
    const LN2_HI: f32 = 0.693_359_4;
    const LN2_LO: f32 = -2.121_944_4e-4;
    // Adding and subtracting 1.5 · 2^23 rounds to the nearest integer (ties to even).
    const ROUND: f32 = 12_582_912.0;
    let n = (x * LOG2E + ROUND) - ROUND;
    let r = (x - n * LN2_HI) - n * LN2_LO;
    let mut p = 1.987_569_1e-4_f32;
    p = p * r + 1.398_199_9e-3;
    p = p * r + 8.333_452e-3;
    p = p * r + 4.166_579_6e-2;
    p = p * r + 1.666_666_5e-1;
    p = p * r + 0.5;
    let y = p * (r * r) + r + 1.0;
    // 2^n for n in [-126, 127]: the biased exponent n + 127 read off the bits of
    // n + 127 + 2^23 (an integer-valued float), shifted into the exponent field.
    let biased = (n + (127.0 + 8_388_608.0)).to_bits() - 0x4B00_0000;
    y * f32::from_bits(biased << 23)
}

/// `e^x` in fp32, as the simulated scalar engine computes it.
#[inline]
pub fn exp(x: f32) -> f32 {
    if (LOW..=HIGH).contains(&x) {
        exp_in_range(x)
    } else if x <= ZERO_AT_OR_BELOW {
        0.0
    } else {
        x.exp()
    }
}

/// `out[i] = exp(x[i] · scale + bias)` with the bits of [`exp`], vectorised.
// `max(LOW).min(HIGH)` rather than `clamp`: it vectorises, and maps NaN into the range (the
// element is recomputed from its NaN afterwards) where `clamp` would keep it.
#[allow(clippy::manual_clamp)]
pub fn exp_row(x: &[f32], scale: f32, bias: f32, out: &mut [f32]) {
    crate::wide::wide(
        #[inline(always)]
        || exp_row_inline(x, scale, bias, out),
    );
}

/// [`exp_row`]'s loop, for callers that compile it into their own vector loops.
#[allow(clippy::manual_clamp)]
#[inline(always)]
pub(crate) fn exp_row_inline(x: &[f32], scale: f32, bias: f32, out: &mut [f32]) {
    // Neither in range nor rounding to 0: `expf`'s (NaN compares false, so it is one).
    let by_expf = |t: f32| !((LOW..=HIGH).contains(&t) || t <= ZERO_AT_OR_BELOW);
    let mut outside = false;
    for (o, v) in out.iter_mut().zip(x) {
        let t = *v * scale + bias;
        // max/min (not clamp) vectorise; NaN becomes LOW here and is redone below.
        let e = exp_in_range(t.max(LOW).min(HIGH));
        *o = if t <= ZERO_AT_OR_BELOW { 0.0 } else { e };
        outside |= by_expf(t);
    }
    if !outside {
        return;
    }
    for (o, v) in out.iter_mut().zip(x) {
        let t = *v * scale + bias;
        if by_expf(t) {
            *o = t.exp();
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Distance in units in the last place between `got` and the exact `want`.
    fn ulps(got: f32, want: f64) -> f64 {
        let w = want as f32;
        let ulp = (f32::from_bits(w.to_bits() + 1) - w).abs() as f64;
        (got as f64 - want).abs() / ulp
    }

    #[test]
    fn within_two_ulp_of_the_exact_exponential_and_exact_at_the_edges() {
        let mut worst = 0.0f64;
        let mut x = -87.0f32;
        while x <= 88.0 {
            worst = worst.max(ulps(exp(x), (x as f64).exp()));
            x += 0.000_731;
        }
        assert!(worst <= 2.0, "worst error {worst} ulp");
        assert_eq!(exp(0.0), 1.0);
        assert_eq!(exp(f32::NEG_INFINITY), 0.0);
        assert_eq!(exp(f32::INFINITY), f32::INFINITY);
        assert_eq!(exp(100.0), f32::INFINITY);
        assert!(exp(f32::NAN).is_nan());
        assert_eq!(exp(-100.0), (-100.0f32).exp()); // subnormal, from expf
    }

    #[test]
    fn below_the_range_matches_the_c_library_bit_for_bit() {
        // Subnormal results come from `expf`; from -104 down the result is 0 without it.
        let mut x = -87.0f32;
        while x >= -120.0 {
            assert_eq!(exp(x).to_bits(), x.exp().to_bits(), "{x}");
            x -= 0.003_17;
        }
        for x in [-103.9, -103.97, -103.98, -104.0, -1e30, f32::NEG_INFINITY] {
            assert_eq!(exp(x).to_bits(), x.exp().to_bits(), "{x}");
        }
    }

    #[test]
    fn rows_have_the_bits_of_single_elements() {
        let x: Vec<f32> = (0..1000)
            .map(|i| (i as f32 - 500.0) * 0.37)
            .chain([
                f32::NAN,
                f32::INFINITY,
                f32::NEG_INFINITY,
                88.0,
                -87.0,
                88.5,
                -87.5,
                -103.5,
                -104.0,
                -300.0,
            ])
            .collect();
        let mut out = vec![0.0; x.len()];
        exp_row(&x, 0.5, -1.25, &mut out);
        for (o, v) in out.iter().zip(&x) {
            let want = exp(*v * 0.5 - 1.25);
            assert!(
                o.to_bits() == want.to_bits() || (o.is_nan() && want.is_nan()),
                "{v}"
            );
        }
    }
}
