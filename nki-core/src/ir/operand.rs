//! Instruction operands as data: how an instruction uses each field (read, write), and the
//! [`Operand`] trait every operand type implements, so that the IR's accessors (the tiles and HBM
//! ranges an instruction reads and writes, renumbering and substitution) come from the
//! instruction declarations in [`super::op`] instead of being matched by hand per instruction.
//! [`Param`] does the same for the plain fields: which ALU operators an instruction uses.

use super::{
    ActFn, BinOp, DgeMode, DmaOperand, DynamicOffset, ElementwiseEngine, HbmAccess, IotaDim,
    MatmulPerfMode, OobMode, RegisterId, RegisterValue, ScalarOperand, TileRegion, TransposeEngine,
};
use crate::affine::AffineExpr;

/// Whether an instruction reads or writes an operand.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Access {
    /// The instruction reads it.
    Read,
    /// The instruction writes it.
    Write,
}

/// One memory operand of an instruction and how the instruction uses it.
#[derive(Clone, Copy, Debug, PartialEq)]
pub enum OperandUse<'a> {
    /// A tile region in SBUF or PSUM.
    Tile(&'a TileRegion, Access),
    /// An access pattern into an HBM tensor.
    Hbm(&'a HbmAccess, Access),
    /// A register (a runtime int32 scalar of the engine sequencers).
    Register(RegisterId, Access),
}

/// What [`Operand::map`] passes every tile region and HBM offset through.
pub struct OperandMap<'m> {
    /// Maps a tile region (renumbering tiles).
    pub tile: &'m mut dyn FnMut(&TileRegion) -> TileRegion,
    /// Maps an HBM offset (substituting loop indices).
    pub offset: &'m mut dyn FnMut(&AffineExpr) -> AffineExpr,
}

/// A value an instruction field holds that may name memory: visited with the access its field
/// declares, and rebuilt through an [`OperandMap`].
pub trait Operand {
    /// Calls `f` with every memory operand this value names, used as `access`.
    fn visit<'a>(&'a self, access: Access, f: &mut dyn FnMut(OperandUse<'a>));
    /// The same value with its tile regions and HBM offsets mapped.
    fn map(&self, m: &mut OperandMap<'_>) -> Self;
    /// Calls `f` with every ALU operator this value names (none for a memory operand alone).
    fn operators(&self, _f: &mut dyn FnMut(BinOp)) {}
}

/// A plain (`param`) field of an instruction: visited for the ALU operators it names.
pub trait Param {
    /// Calls `f` with every ALU operator this value names.
    fn operators(&self, _f: &mut dyn FnMut(BinOp)) {}
}

impl Param for BinOp {
    fn operators(&self, f: &mut dyn FnMut(BinOp)) {
        f(*self);
    }
}

/// Plain values that name no operator.
macro_rules! no_operators {
    ($($ty:ty),*) => { $( impl Param for $ty {} )* };
}

no_operators!(
    bool,
    f32,
    i32,
    u8,
    usize,
    ActFn,
    ElementwiseEngine,
    TransposeEngine,
    DgeMode,
    OobMode,
    IotaDim,
    MatmulPerfMode
);

/// An optional plain value names what its value names.
impl<T: Param> Param for Option<T> {
    fn operators(&self, f: &mut dyn FnMut(BinOp)) {
        if let Some(v) = self {
            v.operators(f);
        }
    }
}

/// A list of plain values names what each names.
impl<T: Param> Param for Vec<T> {
    fn operators(&self, f: &mut dyn FnMut(BinOp)) {
        self.iter().for_each(|v| v.operators(f));
    }
}

impl Operand for TileRegion {
    fn visit<'a>(&'a self, access: Access, f: &mut dyn FnMut(OperandUse<'a>)) {
        f(OperandUse::Tile(self, access));
    }

    fn map(&self, m: &mut OperandMap<'_>) -> Self {
        (m.tile)(self)
    }
}

impl Operand for DmaOperand {
    fn visit<'a>(&'a self, access: Access, f: &mut dyn FnMut(OperandUse<'a>)) {
        match self {
            DmaOperand::Tile { region } => f(OperandUse::Tile(region, access)),
            DmaOperand::Hbm { access: hbm } => {
                // A runtime offset's indices are read, whichever way the data moves.
                match hbm.dynamic.as_deref() {
                    Some(DynamicOffset::Register { reg, .. }) => {
                        f(OperandUse::Register(*reg, Access::Read))
                    }
                    Some(d) => d.index().into_iter().for_each(|r| {
                        f(OperandUse::Tile(r, Access::Read));
                    }),
                    None => {}
                }
                f(OperandUse::Hbm(hbm, access))
            }
        }
    }

    fn map(&self, m: &mut OperandMap<'_>) -> Self {
        match self {
            DmaOperand::Tile { region } => DmaOperand::Tile {
                region: (m.tile)(region),
            },
            DmaOperand::Hbm { access } => DmaOperand::Hbm {
                access: HbmAccess {
                    offset: (m.offset)(&access.offset),
                    dynamic: access.dynamic.as_ref().map(|d| {
                        Box::new(match d.as_ref() {
                            DynamicOffset::Scalar { index, scale } => DynamicOffset::Scalar {
                                index: (m.tile)(index),
                                scale: *scale,
                            },
                            DynamicOffset::Vector { index, scale } => DynamicOffset::Vector {
                                index: (m.tile)(index),
                                scale: *scale,
                            },
                            DynamicOffset::Register { reg, scale } => DynamicOffset::Register {
                                reg: *reg,
                                scale: *scale,
                            },
                        })
                    }),
                    ..access.clone()
                },
            },
        }
    }
}

/// A register is an operand of its own kind; renumbering and substitution leave it as it is.
impl Operand for RegisterId {
    fn visit<'a>(&'a self, access: Access, f: &mut dyn FnMut(OperandUse<'a>)) {
        f(OperandUse::Register(*self, access));
    }

    fn map(&self, _m: &mut OperandMap<'_>) -> Self {
        *self
    }
}

/// An immediate names nothing; a register value names its register.
impl Operand for RegisterValue {
    fn visit<'a>(&'a self, access: Access, f: &mut dyn FnMut(OperandUse<'a>)) {
        if let RegisterValue::Reg { reg } = self {
            f(OperandUse::Register(*reg, access));
        }
    }

    fn map(&self, _m: &mut OperandMap<'_>) -> Self {
        *self
    }
}

/// A list of operands names what each names, in order (`dma_compute`'s sources).
impl<T: Operand> Operand for Vec<T> {
    fn visit<'a>(&'a self, access: Access, f: &mut dyn FnMut(OperandUse<'a>)) {
        self.iter().for_each(|v| v.visit(access, f));
    }

    fn map(&self, m: &mut OperandMap<'_>) -> Self {
        self.iter().map(|v| v.map(m)).collect()
    }

    fn operators(&self, f: &mut dyn FnMut(BinOp)) {
        self.iter().for_each(|v| v.operators(f));
    }
}

/// An immediate names no memory; a column is a tile region.
impl Operand for ScalarOperand {
    fn visit<'a>(&'a self, access: Access, f: &mut dyn FnMut(OperandUse<'a>)) {
        if let ScalarOperand::Column { region } = self {
            f(OperandUse::Tile(region, access));
        }
    }

    fn map(&self, m: &mut OperandMap<'_>) -> Self {
        match self {
            ScalarOperand::Imm { value } => ScalarOperand::Imm { value: *value },
            ScalarOperand::Column { region } => ScalarOperand::Column {
                region: (m.tile)(region),
            },
        }
    }
}

/// An optional operand: nothing when absent.
impl<T: Operand> Operand for Option<T> {
    fn visit<'a>(&'a self, access: Access, f: &mut dyn FnMut(OperandUse<'a>)) {
        if let Some(v) = self {
            v.visit(access, f);
        }
    }

    fn map(&self, m: &mut OperandMap<'_>) -> Self {
        self.as_ref().map(|v| v.map(m))
    }

    fn operators(&self, f: &mut dyn FnMut(BinOp)) {
        if let Some(v) = self {
            v.operators(f);
        }
    }
}

/// An operand paired with the plain value that goes with it (an operator and its operand, a
/// reduction operator and its destination).
impl<P: Copy + Param, T: Operand> Operand for (P, T) {
    fn visit<'a>(&'a self, access: Access, f: &mut dyn FnMut(OperandUse<'a>)) {
        self.1.visit(access, f);
    }

    fn map(&self, m: &mut OperandMap<'_>) -> Self {
        (self.0, self.1.map(m))
    }

    fn operators(&self, f: &mut dyn FnMut(BinOp)) {
        self.0.operators(f);
        self.1.operators(f);
    }
}
