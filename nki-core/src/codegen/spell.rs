//! How each field type of an instruction is spelled as the value of its NKI keyword(s): one
//! implementation per type ([`Spell`] for a field that is one keyword, [`SpellMany`] for one
//! that is several), read by the `spell_fields` the `instructions!` declaration derives.
//!
//! A value is `None` where the keyword is not written: an absent optional, or a value NKI's
//! default stands for (the vector engine where the signature's default engine is `unknown`).
//! Whether a written value equals the signature's default is decided later, by [`super::Kwargs`].

use super::{Emitter, float, register_value};
use crate::ir::{
    ActFn, BinOp, DgeMode, DmaOperand, ElementwiseEngine, MatmulPerfMode, OobMode, RegisterId,
    RegisterValue, ScalarOperand, TileRegion, TransposeEngine,
};
use nki_spec::{Default, Kind, Param};

/// A field spelled as one keyword's value.
pub(crate) trait Spell {
    /// The value of keyword `p` (as the instruction's signature declares it) for this field, or
    /// `None` when the keyword is not written.
    fn spell(&self, e: &Emitter<'_>, p: &Param) -> Option<String>;
}

/// A field spelled as several keywords' values (`op1` and `operand1`).
pub(crate) trait SpellMany {
    /// The values of keywords `ps`, one per keyword, in order.
    fn spell_many(&self, e: &Emitter<'_>, ps: &[&Param]) -> Vec<Option<String>>;
}

impl Spell for TileRegion {
    fn spell(&self, e: &Emitter<'_>, _: &Param) -> Option<String> {
        Some(e.region(self))
    }
}

impl Spell for DmaOperand {
    fn spell(&self, e: &Emitter<'_>, _: &Param) -> Option<String> {
        Some(e.dma(self))
    }
}

/// A list of DMA operands (`dma_compute`'s `srcs`): `[a, b, ...]`.
impl Spell for Vec<DmaOperand> {
    fn spell(&self, e: &Emitter<'_>, _: &Param) -> Option<String> {
        let items: Vec<String> = self.iter().map(|d| e.dma(d)).collect();
        Some(format!("[{}]", items.join(", ")))
    }
}

impl Spell for ScalarOperand {
    fn spell(&self, e: &Emitter<'_>, _: &Param) -> Option<String> {
        Some(e.scalar(self))
    }
}

impl Spell for BinOp {
    fn spell(&self, _: &Emitter<'_>, _: &Param) -> Option<String> {
        Some(self.nki_name().into())
    }
}

impl Spell for ActFn {
    fn spell(&self, _: &Emitter<'_>, _: &Param) -> Option<String> {
        Some(self.nki_name().into())
    }
}

/// `nisa.engine.<name>`; `None` for the vector engine where the signature's default is
/// `nisa.engine.unknown`, which the compiler resolves to the vector engine for the elementwise
/// instructions this type belongs to.
impl Spell for ElementwiseEngine {
    fn spell(&self, _: &Emitter<'_>, p: &Param) -> Option<String> {
        let unknown = p.default == Default::Enum("engine", "unknown");
        if unknown && *self == ElementwiseEngine::default() {
            return None;
        }
        Some(format!("nisa.engine.{}", self.nki_name()))
    }
}

impl Spell for TransposeEngine {
    fn spell(&self, _: &Emitter<'_>, _: &Param) -> Option<String> {
        match self {
            TransposeEngine::Tensor => None,
            TransposeEngine::Vector => Some("nisa.engine.vector".into()),
        }
    }
}

/// `nisa.matmul_perf_mode.double_row`; nothing for the default mode.
impl Spell for MatmulPerfMode {
    fn spell(&self, _: &Emitter<'_>, _: &Param) -> Option<String> {
        (!self.is_none()).then(|| format!("nisa.matmul_perf_mode.{}", self.nki_name()))
    }
}

impl Spell for DgeMode {
    fn spell(&self, _: &Emitter<'_>, _: &Param) -> Option<String> {
        Some(format!("nisa.dge_mode.{}", self.nki_name()))
    }
}

impl Spell for OobMode {
    /// Only `skip` is spelled: `error` is NKI's default.
    fn spell(&self, _: &Emitter<'_>, _: &Param) -> Option<String> {
        (*self != OobMode::Error).then(|| format!("nisa.oob_mode.{}", self.nki_name()))
    }
}

impl Spell for bool {
    fn spell(&self, _: &Emitter<'_>, _: &Param) -> Option<String> {
        Some(if *self { "True" } else { "False" }.into())
    }
}

impl Spell for i32 {
    fn spell(&self, _: &Emitter<'_>, _: &Param) -> Option<String> {
        Some(self.to_string())
    }
}

impl Spell for u8 {
    fn spell(&self, _: &Emitter<'_>, _: &Param) -> Option<String> {
        Some(self.to_string())
    }
}

impl Spell for usize {
    fn spell(&self, _: &Emitter<'_>, _: &Param) -> Option<String> {
        Some(self.to_string())
    }
}

/// A float literal that reads back as the same `f32`; an integer literal where the keyword is
/// declared an int and the value is integral (`range_start`).
impl Spell for f32 {
    fn spell(&self, _: &Emitter<'_>, p: &Param) -> Option<String> {
        if p.kind == Kind::Int && self.fract() == 0.0 && self.abs() < 1e9 {
            return Some(format!("{}", *self as i64));
        }
        Some(float(*self))
    }
}

/// A tuple of ints (`tile_position`); `None` when empty (not given).
impl Spell for Vec<usize> {
    fn spell(&self, _: &Emitter<'_>, _: &Param) -> Option<String> {
        if self.is_empty() {
            return None;
        }
        let items: Vec<String> = self.iter().map(usize::to_string).collect();
        Some(super::tuple(&items))
    }
}

/// A list of ints (`shuffle_mask`).
impl Spell for Vec<u8> {
    fn spell(&self, _: &Emitter<'_>, _: &Param) -> Option<String> {
        let items: Vec<String> = self.iter().map(u8::to_string).collect();
        Some(format!("[{}]", items.join(", ")))
    }
}

/// The register `rN`.
impl Spell for RegisterId {
    fn spell(&self, _: &Emitter<'_>, _: &Param) -> Option<String> {
        Some(format!("r{}", self.0))
    }
}

impl Spell for RegisterValue {
    fn spell(&self, _: &Emitter<'_>, _: &Param) -> Option<String> {
        Some(register_value(self))
    }
}

/// The value when given; not written otherwise.
impl<T: Spell> Spell for Option<T> {
    fn spell(&self, e: &Emitter<'_>, p: &Param) -> Option<String> {
        self.as_ref().and_then(|v| v.spell(e, p))
    }
}

/// An operator and its operand (`op1`, `operand1`), or a reduction's operator and result
/// (`reduce_op`, `reduce_res`).
impl<A: Spell, B: Spell> SpellMany for (A, B) {
    fn spell_many(&self, e: &Emitter<'_>, ps: &[&Param]) -> Vec<Option<String>> {
        debug_assert_eq!(ps.len(), 2, "a pair is two keywords");
        vec![self.0.spell(e, ps[0]), self.1.spell(e, ps[1])]
    }
}

impl SpellMany for TileRegion {
    fn spell_many(&self, e: &Emitter<'_>, ps: &[&Param]) -> Vec<Option<String>> {
        ps.iter().map(|p| self.spell(e, p)).collect()
    }
}

impl SpellMany for ScalarOperand {
    fn spell_many(&self, e: &Emitter<'_>, ps: &[&Param]) -> Vec<Option<String>> {
        ps.iter().map(|p| self.spell(e, p)).collect()
    }
}

/// The values when given; none of the keywords written otherwise.
impl<T: SpellMany> SpellMany for Option<T> {
    fn spell_many(&self, e: &Emitter<'_>, ps: &[&Param]) -> Vec<Option<String>> {
        match self {
            Some(v) => v.spell_many(e, ps),
            None => vec![None; ps.len()],
        }
    }
}
