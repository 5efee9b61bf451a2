//! The ALU operators NKI instructions take as `op=` / `op0=` / `reduce_op=` values
//! (`nki.api.shared.rst`'s "Supported Math Operators" table), declared once with their `nl`
//! names. Their class (arithmetic, comparison or bitvec), arity and per-target availability are
//! the `nki_spec` operator table's; their semantics are here.
//!
//! Arithmetic operators compute in fp32. Bitvec operators work on 32-bit patterns: an integer
//! input value is read as its 32-bit two's complement pattern (narrower signed integers sign-,
//! unsigned ones zero-extended), and the result keeps the low bits of the destination dtype,
//! read in its signedness ([`crate::dtype::DType::from_bits32`]); the docs do not say how
//! narrower dtypes are widened, this is what the simulator does. A shift by 32 or more gives 0.

nl_enum! {
    /// An ALU operator: NKI's `op=` values (`nl.add`, `nl.greater`, `nl.bitwise_and`,
    /// `nl.abs`, ...). Unary operators (`nl.abs`, `nl.invert`, ...) ignore their second
    /// operand.
    ///
    /// Comparisons compute in fp32 and produce `1.0` when true and `0.0` when false, with IEEE
    /// semantics for NaN: every comparison with a NaN is false except [`BinOp::NotEqual`], which
    /// is true. Logical operators count any nonzero value (NaN too) as true.
    pub enum BinOp {
    /// `~a` (bitvec, unary).
    Invert = "invert",
    /// `a & b` (bitvec).
    BitwiseAnd = "bitwise_and",
    /// `a | b` (bitvec).
    BitwiseOr = "bitwise_or",
    /// `a ^ b` (bitvec).
    BitwiseXor = "bitwise_xor",
    /// `a << b` (bitvec; arithmetic and logical left shifts are the same).
    LeftShift = "left_shift",
    /// `a >> b`, logical: zeros shifted in (bitvec).
    RightShift = "right_shift",
    /// `a + b`
    Add = "add",
    /// `a - b`
    Subtract = "subtract",
    /// `a * b`
    Multiply = "multiply",
    /// `max(a, b)`
    Maximum = "maximum",
    /// `min(a, b)`
    Minimum = "minimum",
    /// `a == b` (1.0 or 0.0)
    Equal = "equal",
    /// `a != b` (1.0 or 0.0; true when either side is NaN)
    NotEqual = "not_equal",
    /// `a >= b` (1.0 or 0.0)
    GreaterEqual = "greater_equal",
    /// `a > b` (1.0 or 0.0)
    Greater = "greater",
    /// `a <= b` (1.0 or 0.0)
    LessEqual = "less_equal",
    /// `a < b` (1.0 or 0.0)
    Less = "less",
    /// `a and b` (1.0 or 0.0)
    LogicalAnd = "logical_and",
    /// `a or b` (1.0 or 0.0)
    LogicalOr = "logical_or",
    /// `a xor b` (1.0 or 0.0)
    LogicalXor = "logical_xor",
    /// `a ** b` (fp32 `powf`; NaN for a negative base with a non-integer exponent)
    Power = "power",
    /// `max(|a|, |b|)` (NeuronCore-v4)
    AbsMax = "abs_max",
    /// `min(|a|, |b|)` (NeuronCore-v4)
    AbsMin = "abs_min",
    /// `|a|` (unary)
    Abs = "abs",
    /// `a²` (unary; an ALU operator on NeuronCore-v4)
    Square = "square",
    /// `max(a, 0)` (unary; an ALU operator on NeuronCore-v4)
    Relu = "relu",
    /// `1/√a` (unary)
    Rsqrt = "rsqrt",
    /// `1/a` (unary)
    Reciprocal = "reciprocal",
    /// `a / b` (exact division; NKI 0.7's operator table lacks it and kernels usually multiply
    /// by a reciprocal instead)
    Divide = "divide",
    }
}

/// 1.0 for true, 0.0 for false.
#[inline(always)]
fn truth(b: bool) -> f32 {
    f32::from(u8::from(b))
}

/// The 32-bit two's complement pattern of an integer value held in fp32 (the value is
/// truncated toward zero first, and wraps modulo 2^32).
#[inline]
pub fn to_bits32(v: f32) -> u32 {
    (v as i64) as u32
}

impl BinOp {
    /// Its entry in the `nki_spec` operator table (`None` for [`BinOp::Divide`]).
    pub fn spec(self) -> Option<&'static nki_spec::OperatorSpec> {
        nki_spec::operator(self.nl_name())
    }

    /// Whether it works on bit patterns (integer dtypes only, no conversion).
    pub fn is_bitvec(self) -> bool {
        self.spec()
            .is_some_and(|s| s.class == nki_spec::OpClass::Bitvec)
    }

    /// Whether it takes one operand (the instruction's scalar operand must be `None` or 0).
    pub fn is_unary(self) -> bool {
        self.spec()
            .is_some_and(|s| s.arity == nki_spec::language::Arity::Unary)
    }

    /// Whether the operator is a comparison (`Equal` ... `LessEqual`), producing 1.0 or 0.0.
    pub fn is_comparison(self) -> bool {
        self.spec()
            .is_some_and(|s| s.class == nki_spec::OpClass::Comparison)
    }

    /// Applies the operator in fp32. A bitvec operator applies to the inputs' 32-bit patterns
    /// ([`BinOp::apply_bits`]) and gives the result read as an int32.
    #[inline]
    pub fn apply(self, a: f32, b: f32) -> f32 {
        match self {
            BinOp::Add => a + b,
            BinOp::Subtract => a - b,
            BinOp::Multiply => a * b,
            BinOp::Maximum => a.max(b),
            BinOp::Minimum => a.min(b),
            BinOp::Divide => a / b,
            BinOp::Equal => truth(a == b),
            BinOp::NotEqual => truth(a != b),
            BinOp::Greater => truth(a > b),
            BinOp::GreaterEqual => truth(a >= b),
            BinOp::Less => truth(a < b),
            BinOp::LessEqual => truth(a <= b),
            BinOp::LogicalAnd => truth(a != 0.0 && b != 0.0),
            BinOp::LogicalOr => truth(a != 0.0 || b != 0.0),
            BinOp::LogicalXor => truth((a != 0.0) != (b != 0.0)),
            BinOp::Power => a.powf(b),
            BinOp::AbsMax => a.abs().max(b.abs()),
            BinOp::AbsMin => a.abs().min(b.abs()),
            BinOp::Abs => a.abs(),
            BinOp::Square => a * a,
            BinOp::Relu => a.max(0.0),
            BinOp::Rsqrt => 1.0 / a.sqrt(),
            BinOp::Reciprocal => 1.0 / a,
            BinOp::Invert
            | BinOp::BitwiseAnd
            | BinOp::BitwiseOr
            | BinOp::BitwiseXor
            | BinOp::LeftShift
            | BinOp::RightShift => {
                let bits = self.apply_bits(to_bits32(a), to_bits32(b)).unwrap_or(0);
                bits as i32 as f32
            }
        }
    }

    /// Applies a bitvec operator to 32-bit patterns (`None` for the other operators).
    #[inline]
    pub fn apply_bits(self, a: u32, b: u32) -> Option<u32> {
        Some(match self {
            BinOp::Invert => !a,
            BinOp::BitwiseAnd => a & b,
            BinOp::BitwiseOr => a | b,
            BinOp::BitwiseXor => a ^ b,
            BinOp::LeftShift => a.checked_shl(b).unwrap_or(0),
            BinOp::RightShift => a.checked_shr(b).unwrap_or(0),
            _ => return None,
        })
    }

    /// The identity element when used as a reduction (`Add` → 0, `Maximum` → -inf, ...; a
    /// bitvec operator's as an int32 value: `BitwiseAnd` → -1, all bits set). `None` for the
    /// operators that are not reductions, and for `Subtract`, which the docs list as a
    /// reduction without saying what it folds (not implemented as one).
    pub fn reduce_identity(self) -> Option<f32> {
        match self {
            BinOp::Add | BinOp::BitwiseOr | BinOp::BitwiseXor => Some(0.0),
            BinOp::LogicalOr | BinOp::LogicalXor => Some(0.0),
            BinOp::Multiply | BinOp::LogicalAnd => Some(1.0),
            BinOp::BitwiseAnd => Some(-1.0),
            BinOp::Maximum => Some(f32::NEG_INFINITY),
            BinOp::Minimum => Some(f32::INFINITY),
            _ => None,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_round_trip_and_are_distinct() {
        for op in BinOp::ALL {
            assert_eq!(BinOp::from_nki_name(op.nl_name()), Some(*op));
            assert_eq!(&op.nki_name()[3..], op.nl_name());
        }
        assert_eq!(BinOp::from_nki_name("nope"), None);
    }

    #[test]
    fn bitvec_operators_work_on_two_s_complement_patterns() {
        assert_eq!(BinOp::Invert.apply(0.0, 0.0), -1.0);
        assert_eq!(BinOp::Invert.apply(-1.0, 0.0), 0.0);
        assert_eq!(BinOp::BitwiseAnd.apply(-1.0, 12.0), 12.0);
        assert_eq!(BinOp::BitwiseOr.apply(5.0, 10.0), 15.0);
        assert_eq!(BinOp::BitwiseXor.apply(6.0, 3.0), 5.0);
        assert_eq!(BinOp::LeftShift.apply(3.0, 4.0), 48.0);
        assert_eq!(BinOp::LeftShift.apply(1.0, 32.0), 0.0);
        // Logical: zeros come in, so -2 >> 1 is 0x7FFF_FFFF.
        assert_eq!(
            BinOp::RightShift.apply_bits(to_bits32(-2.0), 1),
            Some(0x7FFF_FFFF)
        );
        assert_eq!(BinOp::Add.apply_bits(1, 2), None);
        assert!(BinOp::Invert.is_bitvec() && BinOp::Invert.is_unary());
        assert!(!BinOp::Add.is_bitvec() && !BinOp::Divide.is_unary());
    }

    #[test]
    fn arithmetic_and_logical_operators() {
        assert_eq!(BinOp::Power.apply(2.0, 10.0), 1024.0);
        assert_eq!(BinOp::AbsMax.apply(-3.0, 2.0), 3.0);
        assert_eq!(BinOp::AbsMin.apply(-3.0, 2.0), 2.0);
        assert_eq!(BinOp::LogicalAnd.apply(2.0, 0.0), 0.0);
        assert_eq!(BinOp::LogicalOr.apply(f32::NAN, 0.0), 1.0);
        assert_eq!(BinOp::LogicalXor.apply(1.0, -1.0), 0.0);
        assert_eq!(BinOp::Abs.apply(-2.5, 7.0), 2.5);
        assert_eq!(BinOp::Rsqrt.apply(4.0, 0.0), 0.5);
        assert!(BinOp::Less.is_comparison() && !BinOp::LogicalAnd.is_comparison());
    }

    #[test]
    fn reductions_start_from_their_identity() {
        for op in BinOp::ALL {
            if let Some(id) = op.reduce_identity() {
                for x in [-3.0f32, 0.0, 1.0, 7.0] {
                    assert_eq!(op.apply(id, x), op.apply(x, id), "{op:?} commutes with {x}");
                    let expect = if op.is_comparison()
                        || matches!(op, BinOp::LogicalAnd | BinOp::LogicalOr | BinOp::LogicalXor)
                    {
                        f32::from(u8::from(x != 0.0))
                    } else {
                        x
                    };
                    assert_eq!(op.apply(id, x), expect, "{op:?} identity with {x}");
                }
            }
        }
        assert_eq!(BinOp::Subtract.reduce_identity(), None);
    }
}
