//! The 18 dtypes of NKI 0.7 (`nki.api.shared.rst`'s table of supported data types, the
//! stub's `nl.<dtype>` names): each one's storage size, its format and its torch counterpart.

use serde::Serialize;

/// How a float format spends its all-ones exponent.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Specials {
    /// IEEE 754: the all-ones exponent holds the infinities and NaNs.
    Ieee,
    /// Finite (`fn`): no infinities; NaN is only the all-ones exponent and mantissa, so the
    /// all-ones exponent also holds finite values (float8_e4m3fn reaches ±448).
    FiniteNan,
    /// Finite without NaN (`fn` for fp4: every encoding is a number).
    Finite,
    /// Finite, unsigned (`fnu`): no sign, no infinities, no zero; all ones is NaN
    /// (float8_e8m0fnu, the power-of-two MX scale).
    FiniteUnsignedNan,
}

/// A floating-point element format.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct FloatFormat {
    /// Sign bits (0 or 1).
    pub sign: u8,
    /// Exponent bits.
    pub exponent: u8,
    /// Mantissa (fraction) bits.
    pub mantissa: u8,
    /// How the all-ones exponent is used.
    pub specials: Specials,
}

impl FloatFormat {
    /// Bits of one element: sign, exponent and mantissa.
    pub const fn bits(self) -> u32 {
        self.sign as u32 + self.exponent as u32 + self.mantissa as u32
    }
}

/// What kind of dtype it is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "class", rename_all = "snake_case")]
pub enum DTypeClass {
    /// A boolean, stored as a byte.
    Bool,
    /// A two's-complement signed integer.
    Signed,
    /// An unsigned integer.
    Unsigned,
    /// A float.
    Float(FloatFormat),
    /// Several small floats packed into one element (the MX data types): `lanes` values of
    /// `element`.
    Packed {
        /// Values per element.
        lanes: u8,
        /// The format of each value.
        element: FloatFormat,
    },
}

/// One `nl` dtype.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct DTypeSpec {
    /// Its name as `nl` spells it (`float8_e4m3fn`, `bool_`).
    pub name: &'static str,
    /// Bits one element occupies in memory (a packed `_x4` element holds four values).
    pub bits: u32,
    /// Its kind and format.
    #[serde(flatten)]
    pub class: DTypeClass,
    /// The `torch` attribute naming the same format (`float8_e4m3fn` for `torch.float8_e4m3fn`),
    /// or `None` where torch has no such dtype.
    pub torch: Option<&'static str>,
    /// What it is, in one line.
    pub summary: &'static str,
}

impl DTypeSpec {
    /// Bytes one element occupies.
    pub const fn bytes(&self) -> u32 {
        self.bits.div_ceil(8)
    }

    /// Whether it is a (scalar or packed) float.
    pub const fn is_float(&self) -> bool {
        matches!(self.class, DTypeClass::Float(_) | DTypeClass::Packed { .. })
    }

    /// Whether it is an integer (signed, unsigned or bool).
    pub const fn is_integer(&self) -> bool {
        !self.is_float()
    }
}

const fn fmt(sign: u8, exponent: u8, mantissa: u8, specials: Specials) -> FloatFormat {
    FloatFormat {
        sign,
        exponent,
        mantissa,
        specials,
    }
}

const fn int(
    name: &'static str,
    bits: u32,
    signed: bool,
    torch: &'static str,
    summary: &'static str,
) -> DTypeSpec {
    DTypeSpec {
        name,
        bits,
        class: if signed {
            DTypeClass::Signed
        } else {
            DTypeClass::Unsigned
        },
        torch: Some(torch),
        summary,
    }
}

const fn float(
    name: &'static str,
    bits: u32,
    format: FloatFormat,
    torch: Option<&'static str>,
    summary: &'static str,
) -> DTypeSpec {
    DTypeSpec {
        name,
        bits,
        class: DTypeClass::Float(format),
        torch,
        summary,
    }
}

const fn packed(
    name: &'static str,
    bits: u32,
    element: FloatFormat,
    summary: &'static str,
) -> DTypeSpec {
    DTypeSpec {
        name,
        bits,
        class: DTypeClass::Packed { lanes: 4, element },
        // The MX docs: the packed types are NKI's own; torch code passes them as uint8 bytes.
        torch: None,
        summary,
    }
}

/// Every `nl` dtype, in the order of `nki.language.rst`.
pub static DTYPES: &[DTypeSpec] = &[
    DTypeSpec {
        name: "bool_",
        bits: 8,
        class: DTypeClass::Bool,
        torch: Some("bool"),
        summary: "A boolean stored as one byte (0 or 1).",
    },
    int("int8", 8, true, "int8", "8-bit signed integer."),
    int("int16", 16, true, "int16", "16-bit signed integer."),
    int("int32", 32, true, "int32", "32-bit signed integer."),
    int("uint8", 8, false, "uint8", "8-bit unsigned integer."),
    int("uint16", 16, false, "uint16", "16-bit unsigned integer."),
    int("uint32", 32, false, "uint32", "32-bit unsigned integer."),
    float(
        "float16",
        16,
        fmt(1, 5, 10, Specials::Ieee),
        Some("float16"),
        "IEEE half precision.",
    ),
    float(
        "float32",
        32,
        fmt(1, 8, 23, Specials::Ieee),
        Some("float32"),
        "IEEE single precision.",
    ),
    float(
        "bfloat16",
        16,
        fmt(1, 8, 7, Specials::Ieee),
        Some("bfloat16"),
        "Brain float: float32's exponent with a 7-bit mantissa.",
    ),
    float(
        "tfloat32",
        32,
        fmt(1, 8, 10, Specials::Ieee),
        // torch's tf32 is a matmul precision mode, not a dtype.
        None,
        "float32's exponent with a 10-bit mantissa, stored in 32 bits.",
    ),
    float(
        "float8_e4m3",
        8,
        fmt(1, 4, 3, Specials::Ieee),
        // Neuron's legacy fp8 is IEEE-style (infinities, largest finite 240); torch's
        // float8_e4m3fn (no infinities, ±448) and float8_e4m3fnuz (another bias) differ.
        None,
        "Neuron's legacy 8-bit float with 4 exponent bits, IEEE-style infinities and NaNs.",
    ),
    float(
        "float8_e5m2",
        8,
        fmt(1, 5, 2, Specials::Ieee),
        Some("float8_e5m2"),
        "8-bit float with 5 exponent and 2 mantissa bits (OCP e5m2).",
    ),
    float(
        "float8_e4m3fn",
        8,
        fmt(1, 4, 3, Specials::FiniteNan),
        Some("float8_e4m3fn"),
        "OCP 8-bit float with 4 exponent bits: no infinities, S.1111.111 is NaN.",
    ),
    float(
        "float8_e8m0fnu",
        8,
        fmt(0, 8, 0, Specials::FiniteUnsignedNan),
        Some("float8_e8m0fnu"),
        "An unsigned power of two (exponent only, 0xFF is NaN): the MX block scale.",
    ),
    packed(
        "float8_e5m2_x4",
        32,
        fmt(1, 5, 2, Specials::Ieee),
        "Four float8_e5m2 values in 32 bits (MX data for quantize_mx / nc_matmul_mx).",
    ),
    packed(
        "float8_e4m3fn_x4",
        32,
        fmt(1, 4, 3, Specials::FiniteNan),
        "Four float8_e4m3fn values in 32 bits (MX data for quantize_mx / nc_matmul_mx).",
    ),
    packed(
        "float4_e2m1fn_x4",
        16,
        fmt(1, 2, 1, Specials::Finite),
        "Four fp4 (e2m1) values in 16 bits (MX data for nc_matmul_mx).",
    ),
];

/// The dtype called `name` (as `nl` spells it).
pub fn dtype(name: &str) -> Option<&'static DTypeSpec> {
    DTYPES.iter().find(|d| d.name == name)
}
