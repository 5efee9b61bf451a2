//! The conversions of each element format: rounding an fp32 value to the format (and widening
//! it back), and its little-endian bit encoding. Engines compute in fp32, so these are the only
//! places a value narrows.
//!
//! What each does where a value does not fit:
//! - floats round to nearest even; IEEE-style formats (`float8_e4m3`, `float8_e5m2`) overflow to ±infinity,
//!   the finite `fn` formats saturate to their largest finite value (as torch converts
//!   `float8_e4m3fn`), NaN stays NaN (a float8 NaN read from memory carries its bits, so
//!   writing it back writes the same byte: [`nan_carrying`]);
//! - `float8_e8m0fnu` (an unsigned power of two) keeps the exponent of `|v|`, rounding up when
//!   the mantissa is at least one half, as torch converts it: zero and subnormals become 2⁻¹²⁷,
//!   infinities and NaN become NaN;
//! - integers round to nearest even and saturate to their range; NaN becomes 0;
//! - `bool` is 1 for any nonzero value (NaN included), 0 for zero.

/// Rounds an fp32 value to the nearest bf16 (ties to even), returned as fp32. Branch-free on
/// finite values so that loops over tiles vectorise; NaN stays NaN (quiet).
#[inline(always)]
pub fn round_bf16(v: f32) -> f32 {
    let bits = v.to_bits();
    if v.is_nan() {
        return f32::from_bits((bits | 0x0040_0000) & 0xFFFF_0000);
    }
    let rounded = bits.wrapping_add(0x7FFF + ((bits >> 16) & 1));
    f32::from_bits(rounded & 0xFFFF_0000)
}

/// Rounds an fp32 value to tfloat32 (10 mantissa bits, ties to even), returned as fp32.
#[inline]
pub fn round_tf32(v: f32) -> f32 {
    let bits = v.to_bits();
    if v.is_nan() {
        return f32::from_bits((bits | 0x0040_0000) & 0xFFFF_E000);
    }
    let rounded = bits.wrapping_add(0x0FFF + ((bits >> 13) & 1));
    f32::from_bits(rounded & 0xFFFF_E000)
}

/// Rounds to the nearest integer (ties to even) and saturates to `lo..=hi`; NaN becomes 0 (as a
/// float → int conversion does).
#[inline]
pub fn round_int(v: f32, lo: f64, hi: f64) -> f32 {
    if v.is_nan() {
        return 0.0;
    }
    (v as f64).round_ties_even().clamp(lo, hi) as f32
}

/// Rounds an fp32 value to the nearest i32 (ties to even), saturating; NaN becomes 0.
#[inline]
pub fn round_i32(v: f32) -> f32 {
    round_int(v, i32::MIN as f64, i32::MAX as f64)
}

/// The payload marker of [`nan_carrying`]: bits 12..16 of the fraction all set.
const CARRIED_NAN: u32 = 0x7FC0_F000;

/// A float8 NaN's bits `b` widened to fp32: a quiet NaN carrying `b` in the low byte of its
/// payload (under a marker), so that narrowing it back to the same format gives `b` again. A
/// load and a store (and a dtype view's copies) thus move a NaN's bits unchanged, as the DMA
/// engines do; the sign and payload of a NaN the arithmetic makes are not specified.
#[inline]
pub fn nan_carrying(b: u8) -> f32 {
    f32::from_bits(CARRIED_NAN | u32::from(b))
}

/// The float8 bits `v` carries, if it is a NaN [`nan_carrying`] made.
#[inline]
pub fn carried_nan_bits(v: f32) -> Option<u8> {
    let bits = v.to_bits();
    (bits & 0x7FFF_FF00 == CARRIED_NAN).then_some(bits as u8)
}

/// `float8_e4m3fn`'s NaN bits (`S.1111.111`).
#[inline]
fn is_e4m3fn_nan(b: u8) -> bool {
    b & 0x7F == 0x7F
}

/// `float8_e4m3fn` bits `b` as fp32 (a NaN carrying its bits, [`nan_carrying`]).
pub fn decode_e4m3fn(b: u8) -> f32 {
    if is_e4m3fn_nan(b) {
        nan_carrying(b)
    } else {
        float8::F8E4M3::from_bits(b).to_f32()
    }
}

/// The `float8_e4m3fn` bits of `v` (rounded, saturating); a NaN gives the bits it carries
/// when they are a NaN of this format, else `0x7F`.
pub fn encode_e4m3fn(v: f32) -> u8 {
    if v.is_nan() {
        return carried_nan_bits(v)
            .filter(|b| is_e4m3fn_nan(*b))
            .unwrap_or(0x7F);
    }
    float8::F8E4M3::from_f32(v).to_bits()
}

/// `v` rounded to `float8_e4m3fn` and widened back (a NaN keeps bits it carries, as
/// [`encode_e4m3fn`]).
pub fn round_e4m3fn(v: f32) -> f32 {
    decode_e4m3fn(encode_e4m3fn(v))
}

/// An IEEE-style binary float with `mantissa` fraction bits and `exponent` exponent bits
/// (infinities and NaNs in the all-ones exponent): the legacy `float8_e4m3`.
#[derive(Clone, Copy, Debug)]
pub struct IeeeMinifloat {
    /// Exponent bits.
    pub exponent: u32,
    /// Fraction bits.
    pub mantissa: u32,
}

impl IeeeMinifloat {
    fn bias(self) -> i32 {
        (1 << (self.exponent - 1)) - 1
    }

    fn min_normal_exp(self) -> i32 {
        1 - self.bias()
    }

    fn max_finite(self) -> f64 {
        let max_exp = (1 << self.exponent) - 2 - self.bias();
        (2.0 - (-(self.mantissa as f64)).exp2()) * (max_exp as f64).exp2()
    }

    /// `v` rounded to this format (ties to even; overflow to ±infinity).
    pub fn round(self, v: f32) -> f32 {
        if !v.is_finite() || v == 0.0 {
            return v;
        }
        let a = (v as f64).abs();
        let e = (a.log2().floor() as i32).max(self.min_normal_exp());
        // Correct log2's rounding near powers of two.
        let e = if (e as f64).exp2() > a && e > self.min_normal_exp() {
            e - 1
        } else {
            e
        };
        let quantum = ((e - self.mantissa as i32) as f64).exp2();
        let r = (a / quantum).round_ties_even() * quantum;
        let r = if r > self.max_finite() {
            f64::INFINITY
        } else {
            r
        };
        (r as f32).copysign(v)
    }

    /// The bits of `v` (first rounded to this format).
    pub fn encode(self, v: f32) -> u8 {
        let sign = if v.is_sign_negative() { 0x80u8 } else { 0 };
        let all_ones = ((1u32 << self.exponent) - 1) as u8;
        let shift = self.mantissa;
        if v.is_nan() {
            return carried_nan_bits(v)
                .filter(|b| self.decode(*b).is_nan())
                .unwrap_or(0x7F);
        }
        let r = self.round(v);
        if r.is_infinite() {
            return sign | (all_ones << shift);
        }
        let a = (r as f64).abs();
        if a == 0.0 {
            return sign;
        }
        let min_normal = (self.min_normal_exp() as f64).exp2();
        if a < min_normal {
            let step = ((self.min_normal_exp() - self.mantissa as i32) as f64).exp2();
            return sign | (a / step) as u8;
        }
        let e = a.log2().floor() as i32;
        let e = if (e as f64).exp2() > a { e - 1 } else { e };
        let fraction = ((a / (e as f64).exp2() - 1.0) * (1u32 << shift) as f64).round() as u8;
        sign | (((e + self.bias()) as u8) << shift) | fraction
    }

    /// The value of bits `b`.
    pub fn decode(self, b: u8) -> f32 {
        let shift = self.mantissa;
        let sign = if b & 0x80 != 0 { -1.0f64 } else { 1.0 };
        let exp = ((b & 0x7F) >> shift) as i32;
        let fraction = (b & ((1u8 << shift) - 1)) as f64 / (1u32 << shift) as f64;
        let all_ones = (1 << self.exponent) - 1;
        let value = if exp == all_ones {
            if fraction == 0.0 {
                f64::INFINITY
            } else {
                return nan_carrying(b);
            }
        } else if exp == 0 {
            fraction * (self.min_normal_exp() as f64).exp2()
        } else {
            (1.0 + fraction) * ((exp - self.bias()) as f64).exp2()
        };
        (sign * value) as f32
    }
}

/// `float8_e4m3`: 4 exponent bits, 3 mantissa bits, IEEE-style (largest finite 240).
pub const E4M3_IEEE: IeeeMinifloat = IeeeMinifloat {
    exponent: 4,
    mantissa: 3,
};

/// `float8_e5m2` (OCP e5m2, IEEE-style: largest finite 57344, then infinity, as torch
/// converts).
pub const E5M2: IeeeMinifloat = IeeeMinifloat {
    exponent: 5,
    mantissa: 2,
};

/// The `float8_e8m0fnu` bits of `v`: `|v|`'s fp32 exponent, plus one when its mantissa is at
/// least one half (torch's conversion); zero and subnormals are 0 (2⁻¹²⁷), infinities and NaN
/// 0xFF.
pub fn encode_e8m0(v: f32) -> u8 {
    if !v.is_finite() {
        return 0xFF;
    }
    let bits = v.abs().to_bits();
    let exp = bits >> 23;
    if exp == 0 {
        return 0;
    }
    let up = (bits & 0x007F_FFFF) >= 0x0040_0000;
    (exp + up as u32).min(0xFF) as u8
}

/// The value of `float8_e8m0fnu` bits `b`: 2^(b − 127), NaN for 0xFF.
pub fn decode_e8m0(b: u8) -> f32 {
    if b == 0xFF {
        f32::NAN
    } else {
        ((b as i32 - 127) as f64).exp2() as f32
    }
}
