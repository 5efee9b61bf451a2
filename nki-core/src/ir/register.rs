//! Registers and device loops: NKI's runtime scalars (`nisa.register_alloc`, a
//! `nki.isa.VirtualRegister`) and the loops the device runs with them (`nl.dynamic_range`,
//! `nl.fori_loop`, `nl.while_loop`).
//!
//! A register holds one int32 value that exists only while the kernel runs: a kernel loads it
//! from a one-element tensor, moves it, stores it back, and uses it as a loop bound or a loop
//! condition. In the IR a register is a [`RegisterId`], an index into [`super::Program::registers`]
//! that the recorder hands out; instructions name registers as operands they read or write (see
//! [`super::OperandUse::Register`]).
//!
//! An access pattern can name one as a runtime offset (NKI's `.ap(..., scalar_offset=reg)`, not
//! implemented yet): the pattern holds a `RegisterId`, its [`super::Operand`] visit reports it as
//! a register read (so the instruction counts as [`super::Op::uses_registers`] and runs in program
//! order: never in a parallel iteration or a band), and the simulator reads its value from the
//! register file the register instructions use (`sim/register.rs`).
//!
//! A device loop ([`super::Stmt::DeviceLoop`]) is traced once: its body is one copy, run by the
//! device as many times as the registers say at run time (the simulator iterates it). Unlike a
//! static loop, its index is not a [`crate::affine::LoopVar`] (nothing affine can be said of it at
//! trace time): a counted loop writes its index into a register at the start of every
//! iteration.

use crate::loc::SourceLoc;
use serde::Serialize;

/// Index of a register in [`super::Program::registers`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct RegisterId(pub u32);

/// A register's declaration: a readable name and where the kernel allocated it.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RegisterDecl {
    /// `r3`, or the loop index's name.
    pub name: String,
    /// Where the kernel allocated it (`nisa.register_alloc`, or the loop it indexes).
    pub loc: SourceLoc,
}

/// A compile-time integer or a register's value at run time: a loop bound, or the source of
/// `nisa.register_move`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum RegisterValue {
    /// An immediate.
    Imm {
        /// The value.
        value: i32,
    },
    /// The value a register holds when it is read.
    Reg {
        /// The register.
        reg: RegisterId,
    },
}

impl RegisterValue {
    /// The register it reads, if any.
    pub fn register(&self) -> Option<RegisterId> {
        match self {
            RegisterValue::Imm { .. } => None,
            RegisterValue::Reg { reg } => Some(*reg),
        }
    }

    /// The immediate, if it is one.
    pub fn immediate(&self) -> Option<i32> {
        match self {
            RegisterValue::Imm { value } => Some(*value),
            RegisterValue::Reg { .. } => None,
        }
    }
}

impl From<i32> for RegisterValue {
    fn from(value: i32) -> Self {
        RegisterValue::Imm { value }
    }
}

impl From<RegisterId> for RegisterValue {
    fn from(reg: RegisterId) -> Self {
        RegisterValue::Reg { reg }
    }
}

/// What decides how often a device loop's body runs.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum LoopControl {
    /// `nl.dynamic_range(start, stop, step)` / `nl.fori_loop`: the index runs from `start`
    /// (inclusive) to `stop` (exclusive) by `step`, both bounds read once, when the loop starts.
    /// Before every iteration the index is written into `index`; writing `index` in the body
    /// does not change the iterations.
    Range {
        /// First value.
        start: RegisterValue,
        /// Bound (exclusive).
        stop: RegisterValue,
        /// Positive step, a compile-time constant.
        step: u32,
        /// The register the body reads the index from.
        index: RegisterId,
    },
    /// `nl.while_loop` / `while reg:`: the body runs while `cond` is nonzero, tested before each
    /// iteration (so not at all when it starts at zero).
    While {
        /// The condition register (the body updates it).
        cond: RegisterId,
    },
}

impl LoopControl {
    /// The registers the loop reads to decide its iterations.
    pub fn reads(&self) -> Vec<RegisterId> {
        match self {
            LoopControl::Range { start, stop, .. } => [start.register(), stop.register()]
                .into_iter()
                .flatten()
                .collect(),
            LoopControl::While { cond } => vec![*cond],
        }
    }

    /// The trip count when it is known at trace time (a range with immediate bounds).
    pub fn static_trip(&self) -> Option<usize> {
        match self {
            LoopControl::Range {
                start: RegisterValue::Imm { value: a },
                stop: RegisterValue::Imm { value: b },
                step,
                ..
            } => {
                let span = i64::from(*b) - i64::from(*a);
                Some(if span <= 0 {
                    0
                } else {
                    (span as u64).div_ceil(u64::from((*step).max(1))) as usize
                })
            }
            _ => None,
        }
    }
}

/// Index of a device loop in [`super::Program::device_loops`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct DeviceLoopId(pub u32);

/// A device loop's static description.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct DeviceLoopDecl {
    /// What decides its iterations.
    pub control: LoopControl,
    /// Where the kernel opened it.
    pub loc: SourceLoc,
}
