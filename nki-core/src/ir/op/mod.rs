//! Engine instructions of the IR: what each computes (`Op`), their operands, and the tiles
//! and HBM ranges they read and write (the arithmetic they apply is in `math`).
//!
//! [`Op`] is declared once, by instruction family: `dma`, `registers`, `elementwise`,
//! `activation`, `reduce`, `select`, `index`, `random`, `tensor` and `multicore` each declare their
//! instructions (fields, operand roles, NKI keywords); `declare` holds the `instructions!`
//! macro that assembles them and derives the names, the operand and operator visitors, operand
//! mapping and the keyword spelling codegen uses. `params` holds the parameter types the
//! declarations use that are not operands of their own module.

use super::operand::{Access, Operand, OperandMap, OperandUse, Param};
use super::{ActFn, BinOp, DmaOperand, HbmAccess, RegisterId, RegisterValue, TileRegion};
use crate::affine::AffineExpr;
use serde::Serialize;

#[macro_use]
mod declare;
mod activation;
mod dma;
mod elementwise;
mod index;
mod multicore;
mod params;
mod random;
mod reduce;
mod registers;
mod select;
mod tensor;

use activation::activation_instructions;
use dma::dma_instructions;
use elementwise::elementwise_instructions;
use index::index_instructions;
use multicore::multicore_instructions;
use random::random_instructions;
use reduce::reduce_instructions;
use registers::registers_instructions;
use select::select_instructions;
use tensor::tensor_instructions;

pub use params::{
    DgeMode, ElementwiseEngine, IotaDim, MatmulPerfMode, OobMode, ScalarOperand, TransposeEngine,
    iota_offsets,
};

dma_instructions! {
    [
        elementwise_instructions,
        activation_instructions,
        reduce_instructions,
        select_instructions,
        index_instructions,
        random_instructions,
        tensor_instructions,
        registers_instructions,
        multicore_instructions,
        instructions
    ]
    /// One engine instruction, destination first. Each variant is one `nki.isa` instruction:
    /// its NKI name, then its fields, each declared as an operand the instruction `read`s or
    /// `write`s, or a `param`eter naming no memory, with the NKI keyword(s) it is spelled as.
    pub enum Op;
}

impl Op {
    /// Tile regions the instruction writes.
    pub fn tile_writes(&self) -> Vec<&TileRegion> {
        self.tiles(Access::Write)
    }

    /// Tile regions the instruction reads.
    pub fn tile_reads(&self) -> Vec<&TileRegion> {
        self.tiles(Access::Read)
    }

    fn tiles(&self, want: Access) -> Vec<&TileRegion> {
        let mut v = Vec::new();
        self.visit_operands(&mut |u| match u {
            OperandUse::Tile(r, access) if access == want => v.push(r),
            _ => {}
        });
        v
    }

    /// Registers the instruction reads.
    pub fn register_reads(&self) -> Vec<RegisterId> {
        self.registers(Access::Read)
    }

    /// Registers the instruction writes.
    pub fn register_writes(&self) -> Vec<RegisterId> {
        self.registers(Access::Write)
    }

    fn registers(&self, want: Access) -> Vec<RegisterId> {
        let mut v = Vec::new();
        self.visit_operands(&mut |u| match u {
            OperandUse::Register(r, access) if access == want => v.push(r),
            _ => {}
        });
        v
    }

    /// Whether the instruction reads or writes a register (such instructions run in program
    /// order: the simulator never runs them in parallel or band by band).
    pub fn uses_registers(&self) -> bool {
        let mut any = false;
        self.visit_operands(&mut |u| any |= matches!(u, OperandUse::Register(..)));
        any
    }

    /// Whether the cores of a logical NeuronCore meet at this instruction: a `core_barrier`
    /// across more than one core, or a `sendrecv`.
    pub fn synchronises_cores(&self) -> bool {
        match self {
            Op::CoreBarrier { cores, .. } => cores.len() > 1,
            Op::SendRecv { .. } => true,
            _ => false,
        }
    }

    /// HBM accesses the instruction reads and writes, as `(access, is_write)`.
    pub fn hbm_accesses(&self) -> Vec<(&HbmAccess, bool)> {
        let mut v = Vec::new();
        self.visit_operands(&mut |u| {
            if let OperandUse::Hbm(a, access) = u {
                v.push((a, access == Access::Write));
            }
        });
        v
    }
}
