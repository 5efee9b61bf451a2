//! Element types of HBM tensors and on-chip tiles, and their round-to-nearest-even conversions.

use serde::{Deserialize, Serialize};
use std::fmt;

/// An element type. Engines compute in fp32; every write to a narrower type rounds to nearest even.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum DType {
    /// IEEE binary32.
    F32,
    /// bfloat16: 8 exponent bits, 7 mantissa bits.
    BF16,
    /// IEEE binary16.
    F16,
    /// fp8 with 4 exponent and 3 mantissa bits (OCP e4m3fn, saturating to ±448).
    F8E4M3,
    /// fp8 with 5 exponent and 2 mantissa bits (OCP e5m2).
    F8E5M2,
    /// 32-bit signed integer (indices, class targets). Engines compute in fp32, so values are
    /// exact up to 2^24 in magnitude; writes round to the nearest integer and saturate.
    I32,
}

impl DType {
    /// Every element type, in declaration order.
    pub const ALL: [DType; 6] = [
        DType::F32,
        DType::BF16,
        DType::F16,
        DType::F8E4M3,
        DType::F8E5M2,
        DType::I32,
    ];

    /// Whether this is a floating-point type.
    pub const fn is_float(self) -> bool {
        !matches!(self, DType::I32)
    }

    /// Bytes per element.
    pub const fn size_bytes(self) -> usize {
        match self {
            DType::F32 | DType::I32 => 4,
            DType::BF16 | DType::F16 => 2,
            DType::F8E4M3 | DType::F8E5M2 => 1,
        }
    }

    /// The short name used in contracts and messages (`f32`, `bf16`, ...).
    pub const fn name(self) -> &'static str {
        match self {
            DType::F32 => "f32",
            DType::BF16 => "bf16",
            DType::F16 => "f16",
            DType::F8E4M3 => "f8e4m3",
            DType::F8E5M2 => "f8e5m2",
            DType::I32 => "i32",
        }
    }

    /// Parses a short name as written in contracts (`f32`, `bf16`, `f16`, `f8e4m3`, `f8e5m2`).
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// The NKI spelling (`nl.float32`, ...), used by code generation.
    pub const fn nki_name(self) -> &'static str {
        match self {
            DType::F32 => "nl.float32",
            DType::BF16 => "nl.bfloat16",
            DType::F16 => "nl.float16",
            DType::F8E4M3 => "nl.float8_e4m3",
            DType::F8E5M2 => "nl.float8_e5m2",
            DType::I32 => "nl.int32",
        }
    }

    /// The torch spelling without `torch.` (`float32`, `bfloat16`, `float8_e4m3fn`, ...): the
    /// torch dtype a tensor of this type is.
    pub const fn torch_name(self) -> &'static str {
        match self {
            DType::F32 => "float32",
            DType::BF16 => "bfloat16",
            DType::F16 => "float16",
            DType::F8E4M3 => "float8_e4m3fn",
            DType::F8E5M2 => "float8_e5m2",
            DType::I32 => "int32",
        }
    }

    /// The dtype whose torch spelling is `name` (`float32` or `torch.float32`).
    pub fn from_torch_name(name: &str) -> Option<DType> {
        let name = name.strip_prefix("torch.").unwrap_or(name);
        DType::ALL.into_iter().find(|d| d.torch_name() == name)
    }

    /// Every name of this type, as the manifest exports it.
    pub fn info(self) -> DTypeInfo {
        DTypeInfo {
            name: self.name(),
            nki: self.nki_name(),
            torch: self.torch_name(),
            float: self.is_float(),
            bytes: self.size_bytes(),
        }
    }

    /// Rounds an fp32 value to this type (round to nearest even) and widens it back to fp32.
    ///
    /// Tiles store fp32 values that are exactly representable in their dtype, so rounding on
    /// write is the only place narrowing happens.
    #[inline]
    pub fn round(self, v: f32) -> f32 {
        match self {
            DType::F32 => v,
            DType::BF16 => round_bf16(v),
            DType::F16 => half::f16::from_f32(v).to_f32(),
            DType::F8E4M3 => float8::F8E4M3::from_f32(v).to_f32(),
            DType::F8E5M2 => float8::F8E5M2::from_f32(v).to_f32(),
            DType::I32 => round_i32(v),
        }
    }

    /// Reads element `index` of a little-endian buffer of this type as fp32.
    #[inline]
    pub fn read(self, bytes: &[u8], index: usize) -> f32 {
        match self {
            DType::F32 => {
                let o = index * 4;
                f32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]])
            }
            DType::BF16 => {
                half::bf16::from_bits(u16::from_le_bytes([bytes[index * 2], bytes[index * 2 + 1]]))
                    .to_f32()
            }
            DType::F16 => {
                half::f16::from_bits(u16::from_le_bytes([bytes[index * 2], bytes[index * 2 + 1]]))
                    .to_f32()
            }
            DType::F8E4M3 => float8::F8E4M3::from_bits(bytes[index]).to_f32(),
            DType::F8E5M2 => float8::F8E5M2::from_bits(bytes[index]).to_f32(),
            DType::I32 => {
                let o = index * 4;
                i32::from_le_bytes([bytes[o], bytes[o + 1], bytes[o + 2], bytes[o + 3]]) as f32
            }
        }
    }

    /// Writes `v` (rounded to nearest even) as element `index` of a little-endian buffer.
    #[inline]
    pub fn write(self, bytes: &mut [u8], index: usize, v: f32) {
        match self {
            DType::F32 => bytes[index * 4..index * 4 + 4].copy_from_slice(&v.to_le_bytes()),
            DType::BF16 => bytes[index * 2..index * 2 + 2]
                .copy_from_slice(&half::bf16::from_f32(v).to_bits().to_le_bytes()),
            DType::F16 => bytes[index * 2..index * 2 + 2]
                .copy_from_slice(&half::f16::from_f32(v).to_bits().to_le_bytes()),
            DType::F8E4M3 => bytes[index] = float8::F8E4M3::from_f32(v).to_bits(),
            DType::F8E5M2 => bytes[index] = float8::F8E5M2::from_f32(v).to_bits(),
            DType::I32 => bytes[index * 4..index * 4 + 4]
                .copy_from_slice(&(round_i32(v) as i32).to_le_bytes()),
        }
    }
}

/// One element type's names and size: the row of the dtype table every layer derives its
/// spellings from (the Python package reads it from the manifest).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DTypeInfo {
    /// The kernel name ([`DType::name`]: `bf16`).
    pub name: &'static str,
    /// The NKI spelling ([`DType::nki_name`]: `nl.bfloat16`).
    pub nki: &'static str,
    /// The torch spelling ([`DType::torch_name`]: `bfloat16`).
    pub torch: &'static str,
    /// Whether it is a floating-point type.
    pub float: bool,
    /// Bytes per element.
    pub bytes: usize,
}

/// A host dtype no kernel takes but a caller may pass: it is computed in a narrower kernel
/// dtype (TorchNeuron's policy). A float one (`f64`) has its `f32` outputs returned in it; an
/// integer one (`i64` indices) is range-checked at the boundary and not widened back.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct HostDType {
    /// The name callers pass to the contract check (`f64`).
    pub name: &'static str,
    /// The torch spelling (`float64`).
    pub torch: &'static str,
    /// The kernel dtype it is computed in.
    pub compute: DType,
}

/// The host dtypes computed in a kernel dtype: `f64` in `f32`, `i64` in `i32`.
pub const HOST_DTYPES: [HostDType; 2] = [
    HostDType {
        name: "f64",
        torch: "float64",
        compute: DType::F32,
    },
    HostDType {
        name: "i64",
        torch: "int64",
        compute: DType::I32,
    },
];

impl HostDType {
    /// The host dtype called `name` (`f64`) or spelled `name` by torch (`float64`,
    /// `torch.float64`).
    pub fn find(name: &str) -> Option<&'static HostDType> {
        let bare = name.strip_prefix("torch.").unwrap_or(name);
        HOST_DTYPES
            .iter()
            .find(|h| h.name == name || h.torch == bare)
    }

    /// Whether it is a floating-point type (its outputs go back widened).
    pub fn is_float(&self) -> bool {
        self.compute.is_float()
    }
}

/// Rounds an fp32 value to the nearest integer (ties to even), saturating to the i32 range; NaN
/// becomes 0 (as a float → int conversion does).
#[inline]
pub fn round_i32(v: f32) -> f32 {
    if v.is_nan() {
        return 0.0;
    }
    v.round_ties_even().clamp(i32::MIN as f32, i32::MAX as f32)
}

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

impl fmt::Display for DType {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bf16_rounds_to_nearest_even() {
        // 1 + 2^-8 lies exactly between two bf16 values (1 and 1 + 2^-7): ties go to even (1).
        assert_eq!(DType::BF16.round(1.0 + 1.0 / 256.0), 1.0);
        // 1 + 3 * 2^-8 is a tie between 1 + 2^-7 (odd) and 1 + 2^-6 (even).
        assert_eq!(DType::BF16.round(1.0 + 3.0 / 256.0), 1.0 + 1.0 / 64.0);
        assert_eq!(DType::F32.round(1.0 + 1.0 / 256.0), 1.0 + 1.0 / 256.0);
    }

    #[test]
    fn fast_bf16_rounding_matches_the_half_crate() {
        let specials = [
            0.0f32,
            -0.0,
            f32::INFINITY,
            f32::NEG_INFINITY,
            f32::MAX,
            f32::MIN_POSITIVE,
            1e-40,
            3.0e38,
        ];
        let sweep = (0..200_000u32).map(|i| f32::from_bits(i.wrapping_mul(2_654_435_761)));
        for v in specials.into_iter().chain(sweep) {
            let want = half::bf16::from_f32(v).to_f32();
            let got = round_bf16(v);
            assert!(
                got.to_bits() == want.to_bits() || (got.is_nan() && want.is_nan()),
                "{v:e}: {got:e} vs {want:e}"
            );
        }
    }

    #[test]
    fn i32_rounds_to_integers_and_saturates() {
        assert_eq!(DType::I32.round(2.5), 2.0);
        assert_eq!(DType::I32.round(-3.7), -4.0);
        assert_eq!(DType::I32.round(1e12), i32::MAX as f32);
        let mut buf = vec![0u8; 8];
        DType::I32.write(&mut buf, 1, 16_777_216.0);
        assert_eq!(DType::I32.read(&buf, 1), 16_777_216.0);
        assert!(!DType::I32.is_float() && DType::BF16.is_float());
    }

    #[test]
    fn read_write_roundtrip() {
        for dt in DType::ALL {
            let mut buf = vec![0u8; dt.size_bytes() * 2];
            dt.write(&mut buf, 1, 0.75);
            assert_eq!(dt.read(&buf, 1), dt.round(0.75), "{dt}");
            assert_eq!(DType::from_name(dt.name()), Some(dt));
        }
    }

    #[test]
    fn every_dtype_has_distinct_names_in_each_spelling() {
        for (i, a) in DType::ALL.iter().enumerate() {
            assert_eq!(DType::from_torch_name(a.torch_name()), Some(*a));
            assert_eq!(
                DType::from_torch_name(&format!("torch.{}", a.torch_name())),
                Some(*a)
            );
            assert_eq!(a.info().nki, a.nki_name());
            for b in &DType::ALL[i + 1..] {
                assert_ne!(a.name(), b.name());
                assert_ne!(a.nki_name(), b.nki_name());
                assert_ne!(a.torch_name(), b.torch_name());
            }
        }
        for h in &HOST_DTYPES {
            assert_eq!(
                DType::from_name(h.name),
                None,
                "{} is a kernel dtype",
                h.name
            );
            assert_eq!(
                DType::from_torch_name(h.torch),
                None,
                "{} is a kernel dtype",
                h.torch
            );
            assert_eq!(HostDType::find(h.name), Some(h));
            assert_eq!(HostDType::find(&format!("torch.{}", h.torch)), Some(h));
        }
    }
}
