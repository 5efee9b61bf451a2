//! Element types of HBM tensors and on-chip tiles, and their conversions.
//!
//! One [`DType`] per scalar dtype of NKI 0.7. Each is declared once below as its kernel name
//! and its `nl` name; its size, its format and its torch counterpart come from that dtype's
//! declaration in `nki_spec` (the NKI 0.7 API as data), and its conversions from [`codec`].
//! The packed MX types (`float8_e4m3fn_x4`, ...) are here too, as storage for `quantize_mx` /
//! `nc_matmul_mx` (not element types of arithmetic): [`packed`] says how an element holds its
//! four values and how tiles store it.

use serde::{Deserialize, Serialize};
use std::fmt;

pub mod codec;
pub mod packed;

pub use codec::{round_bf16, round_i32};

/// Declares [`DType`]: each variant with its kernel name (contracts, messages, the serialised
/// IR) and the `nl` dtype it is.
macro_rules! dtypes {
    ($( $(#[$doc:meta])* $variant:ident = $name:literal, $nl:literal; )*) => {
        /// An element type. Engines compute in fp32; every write to a narrower type converts as
        /// [`codec`] documents.
        #[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize)]
        #[serde(rename_all = "lowercase")]
        pub enum DType {
            $( $(#[$doc])* $variant, )*
        }

        impl DType {
            /// Every element type, in declaration order.
            pub const ALL: [DType; [$($name),*].len()] = [$(DType::$variant),*];

            /// The short name used in contracts and messages (`f32`, `bf16`, ...).
            pub const fn name(self) -> &'static str {
                match self {
                    $( DType::$variant => $name, )*
                }
            }

            /// The `nl` name without `nl.` (`float32`, `float8_e4m3fn`, `bool_`).
            pub const fn nl_name(self) -> &'static str {
                match self {
                    $( DType::$variant => $nl, )*
                }
            }
        }
    };
}

dtypes! {
    /// IEEE binary32.
    F32 = "f32", "float32";
    /// bfloat16: 8 exponent bits, 7 mantissa bits.
    BF16 = "bf16", "bfloat16";
    /// IEEE binary16.
    F16 = "f16", "float16";
    /// tfloat32: float32's exponent, 10 mantissa bits, stored in 32 bits.
    TF32 = "tf32", "tfloat32";
    /// Neuron's legacy fp8: 4 exponent and 3 mantissa bits, IEEE-style (infinities, NaNs,
    /// largest finite 240). torch has no such dtype.
    F8E4M3 = "f8e4m3", "float8_e4m3";
    /// OCP fp8 e4m3fn: no infinities, saturating to ±448 (torch's `float8_e4m3fn`).
    F8E4M3FN = "f8e4m3fn", "float8_e4m3fn";
    /// OCP fp8 e5m2 (torch's `float8_e5m2`).
    F8E5M2 = "f8e5m2", "float8_e5m2";
    /// An unsigned power of two, 2^(e − 127) (the MX scale; torch's `float8_e8m0fnu`).
    F8E8M0 = "f8e8m0", "float8_e8m0fnu";
    /// 8-bit signed integer.
    I8 = "i8", "int8";
    /// 16-bit signed integer.
    I16 = "i16", "int16";
    /// 32-bit signed integer (indices, class targets). Engines compute in fp32, so values are
    /// exact up to 2^24 in magnitude; writes round to the nearest integer and saturate.
    I32 = "i32", "int32";
    /// 8-bit unsigned integer.
    U8 = "u8", "uint8";
    /// 16-bit unsigned integer.
    U16 = "u16", "uint16";
    /// 32-bit unsigned integer (exact up to 2^24, as `I32`).
    U32 = "u32", "uint32";
    /// A boolean stored as one byte (0 or 1).
    Bool = "bool", "bool_";
    /// Four OCP fp8 e5m2 values in 32 bits (MX data; [`packed`]).
    F8E5M2X4 = "f8e5m2x4", "float8_e5m2_x4";
    /// Four OCP fp8 e4m3fn values in 32 bits (MX data; [`packed`]).
    F8E4M3FNX4 = "f8e4m3fnx4", "float8_e4m3fn_x4";
    /// Four OCP fp4 e2m1 values in 16 bits (MX data; [`packed`]).
    F4E2M1FNX4 = "f4e2m1fnx4", "float4_e2m1fn_x4";
}

impl DType {
    /// This dtype's declaration in `nki_spec`: its size, format and torch counterpart. Found
    /// by name once per process (the simulator asks for sizes on every instruction).
    #[inline]
    pub fn spec(self) -> &'static nki_spec::DTypeSpec {
        static SPECS: std::sync::OnceLock<[&'static nki_spec::DTypeSpec; DType::ALL.len()]> =
            std::sync::OnceLock::new();
        SPECS.get_or_init(|| {
            DType::ALL.map(|d| {
                nki_spec::dtype(d.nl_name()).expect("every DType names a dtype nki_spec declares")
            })
        })[self as usize]
    }

    /// Whether this is a floating-point type.
    #[inline]
    pub fn is_float(self) -> bool {
        self.spec().is_float()
    }

    /// Bytes per element.
    #[inline]
    pub fn size_bytes(self) -> usize {
        self.spec().bytes() as usize
    }

    /// Parses a short name as written in contracts (`f32`, `bf16`, ...).
    pub fn from_name(name: &str) -> Option<DType> {
        DType::ALL.into_iter().find(|d| d.name() == name)
    }

    /// The dtype `nl` calls `name` (`float32`, with or without `nl.`).
    pub fn from_nl_name(name: &str) -> Option<DType> {
        let name = name.strip_prefix("nl.").unwrap_or(name);
        DType::ALL.into_iter().find(|d| d.nl_name() == name)
    }

    /// The NKI spelling (`nl.float32`, ...), used by code generation.
    pub fn nki_name(self) -> String {
        format!("nl.{}", self.nl_name())
    }

    /// The torch spelling without `torch.` (`float32`, `float8_e4m3fn`, ...), or `None` where
    /// torch has no such dtype (`float8_e4m3`, `tfloat32`): such tensors exist only inside
    /// kernels and NKI programs, not at the torch boundary.
    pub fn torch_name(self) -> Option<&'static str> {
        self.spec().torch
    }

    /// The dtype whose torch spelling is `name` (`float32` or `torch.float32`).
    pub fn from_torch_name(name: &str) -> Option<DType> {
        let name = name.strip_prefix("torch.").unwrap_or(name);
        DType::ALL
            .into_iter()
            .find(|d| d.torch_name() == Some(name))
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

    /// Rounds an fp32 value to this type and widens it back to fp32 (see [`codec`]).
    ///
    /// Tiles store fp32 values that are exactly representable in their dtype, so rounding on
    /// write is the only place narrowing happens.
    #[inline]
    pub fn round(self, v: f32) -> f32 {
        match self {
            DType::F32 => v,
            DType::BF16 => round_bf16(v),
            DType::F16 => half::f16::from_f32(v).to_f32(),
            DType::TF32 => codec::round_tf32(v),
            DType::F8E4M3 => codec::E4M3_IEEE.round(v),
            DType::F8E4M3FN => codec::round_e4m3fn(v),
            DType::F8E5M2 => codec::E5M2.round(v),
            DType::F8E8M0 => codec::decode_e8m0(codec::encode_e8m0(v)),
            DType::I8 => codec::round_int(v, i8::MIN as f64, i8::MAX as f64),
            DType::I16 => codec::round_int(v, i16::MIN as f64, i16::MAX as f64),
            DType::I32 => round_i32(v),
            DType::U8 => codec::round_int(v, 0.0, u8::MAX as f64),
            DType::U16 => codec::round_int(v, 0.0, u16::MAX as f64),
            DType::U32 => codec::round_int(v, 0.0, u32::MAX as f64),
            DType::Bool => (v != 0.0) as u8 as f32,
            // A packed element is its bit pattern, stored as is ([`packed`]; fp4's 16 bits).
            DType::F8E5M2X4 | DType::F8E4M3FNX4 => v,
            DType::F4E2M1FNX4 => f32::from_bits(v.to_bits() & 0xFFFF),
        }
    }

    /// The value a bitvec result's 32-bit pattern has in this dtype when written to it: its
    /// low 8, 16 or 32 bits read signed or unsigned (no saturation: bit patterns are not
    /// converted), 1 for a nonzero pattern in `Bool`; a float dtype (which bitvec instructions
    /// reject) gets the pattern's int32 value, rounded. 32-bit values are exact up to 2^24, as
    /// every value in a tile.
    pub fn from_bits32(self, bits: u32) -> f32 {
        match self {
            DType::I8 => f32::from(bits as u8 as i8),
            DType::I16 => f32::from(bits as u16 as i16),
            DType::I32 => bits as i32 as f32,
            DType::U8 => f32::from(bits as u8),
            DType::U16 => f32::from(bits as u16),
            DType::U32 => bits as f32,
            DType::Bool => f32::from(u8::from(bits != 0)),
            DType::F4E2M1FNX4 => f32::from_bits(bits & 0xFFFF),
            DType::F8E5M2X4 | DType::F8E4M3FNX4 => f32::from_bits(bits),
            float => float.round(bits as i32 as f32),
        }
    }

    /// Reads element `index` of a little-endian buffer of this type as fp32.
    #[inline]
    pub fn read(self, bytes: &[u8], index: usize) -> f32 {
        let w = self.size_bytes();
        let b = &bytes[index * w..index * w + w];
        match self {
            DType::F32 | DType::TF32 => f32::from_le_bytes([b[0], b[1], b[2], b[3]]),
            DType::BF16 => half::bf16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32(),
            DType::F16 => half::f16::from_bits(u16::from_le_bytes([b[0], b[1]])).to_f32(),
            DType::F8E4M3 => codec::E4M3_IEEE.decode(b[0]),
            DType::F8E4M3FN => codec::decode_e4m3fn(b[0]),
            DType::F8E5M2 => codec::E5M2.decode(b[0]),
            DType::F8E8M0 => codec::decode_e8m0(b[0]),
            DType::I8 => b[0] as i8 as f32,
            DType::I16 => i16::from_le_bytes([b[0], b[1]]) as f32,
            DType::I32 => i32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f32,
            DType::U8 => b[0] as f32,
            DType::U16 => u16::from_le_bytes([b[0], b[1]]) as f32,
            DType::U32 => u32::from_le_bytes([b[0], b[1], b[2], b[3]]) as f32,
            DType::Bool => (b[0] != 0) as u8 as f32,
            DType::F8E5M2X4 | DType::F8E4M3FNX4 | DType::F4E2M1FNX4 => packed::read_word(b),
        }
    }

    /// Writes `v` (converted to this type, as [`DType::round`]) as element `index` of a
    /// little-endian buffer.
    #[inline]
    pub fn write(self, bytes: &mut [u8], index: usize, v: f32) {
        let w = self.size_bytes();
        let out = &mut bytes[index * w..index * w + w];
        match self {
            DType::F32 => out.copy_from_slice(&v.to_le_bytes()),
            DType::TF32 => out.copy_from_slice(&codec::round_tf32(v).to_le_bytes()),
            DType::BF16 => out.copy_from_slice(&half::bf16::from_f32(v).to_bits().to_le_bytes()),
            DType::F16 => out.copy_from_slice(&half::f16::from_f32(v).to_bits().to_le_bytes()),
            DType::F8E4M3 => out[0] = codec::E4M3_IEEE.encode(v),
            DType::F8E4M3FN => out[0] = codec::encode_e4m3fn(v),
            DType::F8E5M2 => out[0] = codec::E5M2.encode(v),
            DType::F8E8M0 => out[0] = codec::encode_e8m0(v),
            DType::I8 => out[0] = self.round(v) as i8 as u8,
            DType::I16 => out.copy_from_slice(&(self.round(v) as i16).to_le_bytes()),
            DType::I32 => out.copy_from_slice(&(self.round(v) as i32).to_le_bytes()),
            DType::U8 => out[0] = self.round(v) as u8,
            DType::U16 => out.copy_from_slice(&(self.round(v) as u16).to_le_bytes()),
            DType::U32 => out.copy_from_slice(&(self.round(v) as u32).to_le_bytes()),
            DType::Bool => out[0] = (v != 0.0) as u8,
            DType::F8E5M2X4 | DType::F8E4M3FNX4 | DType::F4E2M1FNX4 => packed::write_word(out, v),
        }
    }
}

/// One element type's names and size: the row of the dtype table every layer derives its
/// spellings from (the Python package reads it from the manifest).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct DTypeInfo {
    /// The kernel name ([`DType::name`]: `bf16`).
    pub name: &'static str,
    /// The NKI spelling ([`DType::nki_name`]: `nl.bfloat16`).
    pub nki: String,
    /// The torch spelling ([`DType::torch_name`]: `bfloat16`), if torch has the dtype.
    pub torch: Option<&'static str>,
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
    fn bit_patterns_keep_the_low_bits_in_the_dtype_s_signedness() {
        assert_eq!(DType::U8.from_bits32(0xFFFF_FF00), 0.0);
        assert_eq!(DType::U8.from_bits32(0x1F0), 240.0);
        assert_eq!(DType::I8.from_bits32(0xFFFF_FFF0), -16.0);
        assert_eq!(DType::I16.from_bits32(0x0001_8000), -32768.0);
        assert_eq!(DType::U16.from_bits32(0x0001_8000), 32768.0);
        assert_eq!(DType::I32.from_bits32(u32::MAX), -1.0);
        assert_eq!(DType::U32.from_bits32(7), 7.0);
        assert_eq!(DType::Bool.from_bits32(2), 1.0);
        assert_eq!(DType::BF16.from_bits32(3), 3.0);
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
            if let Some(torch) = a.torch_name() {
                assert_eq!(DType::from_torch_name(torch), Some(*a));
                assert_eq!(DType::from_torch_name(&format!("torch.{torch}")), Some(*a));
            }
            assert_eq!(DType::from_nl_name(&a.nki_name()), Some(*a));
            assert_eq!(a.info().nki, a.nki_name());
            for b in &DType::ALL[i + 1..] {
                assert_ne!(a.name(), b.name());
                assert_ne!(a.nl_name(), b.nl_name());
                assert!(a.torch_name().is_none() || a.torch_name() != b.torch_name());
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

    #[test]
    fn every_nl_dtype_is_a_dtype_and_sizes_come_from_its_declaration() {
        let ours: Vec<&str> = DType::ALL.iter().map(|d| d.nl_name()).collect();
        assert_eq!(ours.len(), nki_spec::DTYPES.len());
        for spec in nki_spec::DTYPES {
            let d = DType::from_nl_name(spec.name)
                .unwrap_or_else(|| panic!("no DType for nl.{}", spec.name));
            assert!(
                std::ptr::eq(d.spec(), spec),
                "{d}: the table found another declaration"
            );
            assert_eq!(d.size_bytes() as u32 * 8, d.spec().bits, "{d}");
            assert_eq!(
                d.is_packed(),
                matches!(spec.class, nki_spec::DTypeClass::Packed { .. }),
                "{d}"
            );
        }
    }

    #[test]
    fn ieee_e4m3_has_infinities_and_tops_out_at_240() {
        let e4m3 = DType::F8E4M3;
        assert_eq!(e4m3.round(240.0), 240.0);
        assert_eq!(e4m3.round(247.0), 240.0);
        assert_eq!(
            e4m3.round(248.0),
            f32::INFINITY,
            "the tie rounds to even: past 240"
        );
        assert_eq!(e4m3.round(-1e6), f32::NEG_INFINITY);
        assert_eq!(
            e4m3.round(2f32.powi(-9)),
            2f32.powi(-9),
            "smallest subnormal"
        );
        assert_eq!(e4m3.round(2f32.powi(-11)), 0.0);
        assert_eq!(e4m3.round(1.0625), 1.0, "1 + 2^-4 ties to the even 1.0");
        assert_eq!(e4m3.round(1.1875), 1.25);
        assert!(e4m3.round(f32::NAN).is_nan());
        // Every encoding decodes to a value that encodes back to it (NaNs aside), in both
        // IEEE-style fp8 formats; e5m2 agrees with the float8 crate's decoding.
        for format in [codec::E4M3_IEEE, codec::E5M2] {
            for b in 0..=255u8 {
                let v = format.decode(b);
                if v.is_nan() {
                    continue;
                }
                assert_eq!(format.encode(v), b, "{format:?} {b:#04x} = {v}");
                assert_eq!(format.round(v), v);
            }
        }
        for b in 0..=255u8 {
            let (ours, crate_) = (codec::E5M2.decode(b), float8::F8E5M2::from_bits(b).to_f32());
            assert!(
                ours == crate_ || ours.is_nan() && crate_.is_nan(),
                "{b:#04x}"
            );
        }
        assert_eq!(DType::F8E5M2.round(57344.0), 57344.0);
        assert_eq!(DType::F8E5M2.round(65504.0), f32::INFINITY);
        let mut buf = [0u8; 1];
        e4m3.write(&mut buf, 0, 300.0);
        assert_eq!(e4m3.read(&buf, 0), f32::INFINITY);
    }

    /// Every byte of every float8 format reads and writes back to itself, NaNs included (a
    /// load then a store moves a NaN's bits unchanged), and rounding keeps a loaded NaN's bits.
    #[test]
    fn float8_bytes_round_trip_nans_included() {
        for dt in [DType::F8E4M3, DType::F8E4M3FN, DType::F8E5M2] {
            let mut nans = 0;
            for b in 0..=255u8 {
                let v = dt.read(&[b], 0);
                nans += usize::from(v.is_nan());
                let mut out = [0u8; 1];
                dt.write(&mut out, 0, dt.round(v));
                assert_eq!(out[0], b, "{dt:?} {b:#04x} = {v}");
            }
            assert!(nans >= 2, "{dt:?} has NaN bytes");
        }
        // A NaN made elsewhere (or carrying another format's NaN) is the canonical NaN.
        let mut out = [0u8; 1];
        DType::F8E4M3FN.write(&mut out, 0, DType::F8E4M3.read(&[0x7A], 0));
        assert_eq!(out[0], 0x7F);
        DType::F8E5M2.write(&mut out, 0, f32::NAN);
        assert_eq!(out[0], 0x7F);
    }

    #[test]
    fn e4m3fn_saturates_at_448() {
        assert_eq!(DType::F8E4M3FN.round(448.0), 448.0);
        assert_eq!(DType::F8E4M3FN.round(500.0), 448.0);
    }

    #[test]
    fn tf32_keeps_ten_mantissa_bits() {
        let one_ulp = 2f32.powi(-10);
        assert_eq!(DType::TF32.round(1.0 + one_ulp), 1.0 + one_ulp);
        assert_eq!(DType::TF32.round(1.0 + one_ulp / 2.0), 1.0, "ties to even");
        assert_eq!(DType::TF32.round(1.0 + 1.5 * one_ulp), 1.0 + 2.0 * one_ulp);
        assert!(DType::TF32.round(f32::NAN).is_nan());
    }

    #[test]
    fn e8m0_keeps_the_power_of_two_as_torch_converts() {
        let cases = [
            (1.5, 2.0),
            (1.4, 1.0),
            (3.0, 4.0),
            (2.9, 2.0),
            (-2.0, 2.0),
            (6.0, 8.0),
            (0.0, 2f32.powi(-127)),
        ];
        for (v, want) in cases {
            assert_eq!(DType::F8E8M0.round(v), want, "{v}");
        }
        assert!(DType::F8E8M0.round(f32::INFINITY).is_nan());
        assert!(DType::F8E8M0.round(f32::NAN).is_nan());
    }

    #[test]
    fn integers_round_to_nearest_even_and_saturate() {
        assert_eq!(DType::I8.round(300.0), 127.0);
        assert_eq!(DType::I8.round(-129.0), -128.0);
        assert_eq!(DType::I8.round(2.5), 2.0);
        assert_eq!(DType::U8.round(-3.0), 0.0);
        assert_eq!(DType::U8.round(255.4), 255.0);
        assert_eq!(DType::U16.round(70_000.0), 65_535.0);
        assert_eq!(DType::I16.round(f32::NAN), 0.0);
        assert_eq!(DType::U32.round(5e9), u32::MAX as f32);
        assert_eq!(DType::Bool.round(-0.5), 1.0);
        assert_eq!(DType::Bool.round(0.0), 0.0);
        assert_eq!(DType::Bool.round(f32::NAN), 1.0);
        for dt in [
            DType::I8,
            DType::I16,
            DType::U8,
            DType::U16,
            DType::U32,
            DType::Bool,
        ] {
            let mut buf = vec![0u8; dt.size_bytes() * 2];
            dt.write(&mut buf, 1, 1.0);
            assert_eq!(dt.read(&buf, 1), 1.0, "{dt}");
            assert!(!dt.is_float());
        }
        let mut buf = [0u8; 1];
        DType::I8.write(&mut buf, 0, -5.0);
        assert_eq!(buf[0], (-5i8) as u8);
        assert_eq!(DType::I8.read(&buf, 0), -5.0);
    }
}
