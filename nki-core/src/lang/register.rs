//! Register handles: what `nisa.register_alloc` returns (NKI's `VirtualRegister`), and what a
//! device loop gives its body as the index. A handle names a register of the trace that made it.

use crate::ir::{RegisterId, RegisterValue};

/// A register of the running trace: a runtime int32 scalar (see [`crate::ir::RegisterId`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub struct Register(pub(crate) RegisterId);

impl Register {
    /// Its id in the program.
    pub fn id(&self) -> RegisterId {
        self.0
    }

    /// The handle of register `id` (for tracing driven from outside Rust; a register of another
    /// trace is a trace error where it is used).
    pub fn from_id(id: RegisterId) -> Register {
        Register(id)
    }
}

impl From<Register> for RegisterValue {
    fn from(r: Register) -> Self {
        RegisterValue::Reg { reg: r.0 }
    }
}

impl From<&Register> for RegisterValue {
    fn from(r: &Register) -> Self {
        RegisterValue::Reg { reg: r.0 }
    }
}
