//! The Program IR: plain, serialisable data produced by tracing a kernel once per signature.
//!
//! A program owns its HBM tensors (inputs and outputs), its on-chip tiles, its loops and a tree
//! of statements. Instructions are destination first, as in `nki.isa`, and each one carries the
//! kernel source line that created it.

use crate::affine::LoopVar;
use crate::dtype::DType;
use crate::loc::SourceLoc;
use crate::target::Target;
use serde::Serialize;

mod access;
mod groups;
mod hoist;
mod math;
mod op;
mod operand;
mod region;
mod register;
mod unroll;

pub use access::{DynamicOffset, HbmAccess};
pub use groups::{AffineRun, affine_runs};
pub use hoist::hoist_escaping_allocs;
pub(crate) use math::gelu_tanh_exponent;
pub use math::{ActFn, BinOp, to_bits32};
pub use op::{
    DgeMode, ElementwiseEngine, IotaDim, MatmulPerfMode, OobMode, Op, ScalarOperand,
    TransposeEngine, iota_offsets,
};
pub use operand::{Access, Operand, OperandMap, OperandUse, Param};
pub use region::{FreeDim, TilePattern, TileRegion, reduced_free_dims};
pub use register::{
    DeviceLoopDecl, DeviceLoopId, LoopControl, RegisterDecl, RegisterId, RegisterValue,
};
pub use unroll::{stream_difference, unroll};

/// Index of an HBM tensor in [`Program::hbm`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct HbmId(pub u32);

/// Index of a tile in [`Program::tiles`].
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize)]
pub struct TileId(pub u32);

/// Whether an HBM tensor is a kernel input, an output the kernel allocates (`shared_hbm`), a
/// constant the program carries (`nl.shared_constant`), or scratch the kernel allocates and does
/// not return.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HbmKind {
    /// A kernel argument (read only).
    Input,
    /// A kernel output in `nl.shared_hbm`.
    Output,
    /// A read-only tensor in shared HBM whose values the program carries
    /// ([`HbmDecl::values`]): `nl.shared_constant`. It is not a kernel parameter: the
    /// simulator fills it from those values.
    Constant,
    /// Device memory private to the program that allocates it (`nl.private_hbm`, `nl.hbm`):
    /// neither a parameter nor a result. The simulator gives it zeroed storage for each call.
    PrivateScratch,
    /// An `nl.shared_hbm` tensor the kernel allocates but does not return: every program
    /// instance sees the one tensor. The simulator gives it zeroed storage for each call.
    SharedScratch,
}

impl HbmKind {
    /// Whether the kernel may write it (outputs and scratch).
    pub fn is_writable(self) -> bool {
        matches!(
            self,
            HbmKind::Output | HbmKind::PrivateScratch | HbmKind::SharedScratch
        )
    }

    /// Whether it is scratch: allocated by the kernel, neither a parameter nor a result.
    pub fn is_scratch(self) -> bool {
        matches!(self, HbmKind::PrivateScratch | HbmKind::SharedScratch)
    }
}

/// A tensor in device memory, row-major.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct HbmDecl {
    /// The parameter name (inputs) or `out{i}` (outputs).
    pub name: String,
    /// Input or output.
    pub kind: HbmKind,
    /// Shape, outermost first.
    pub shape: Vec<usize>,
    /// Element type.
    pub dtype: DType,
    /// Where an output or scratch tensor was allocated; `None` for inputs.
    pub loc: Option<SourceLoc>,
    /// The values an integer input must hold ([`crate::lang::hbm::Hbm::require_indices`]),
    /// checked on the data before the program runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<IndexDomain>,
    /// A constant's values, encoded in its dtype as an input's bytes are (`None` for inputs
    /// and outputs).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub values: Option<Vec<u8>>,
}

/// The values an integer input may hold: indices in `lo..hi`, or the one `except` value (an
/// `ignore_index`).
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct IndexDomain {
    /// Smallest valid index.
    pub lo: i64,
    /// One past the largest valid index.
    pub hi: i64,
    /// A value outside `lo..hi` that is also accepted.
    pub except: Option<i64>,
    /// Where the kernel declared it.
    pub loc: SourceLoc,
}

impl IndexDomain {
    /// Whether `v` is a valid value.
    pub fn admits(&self, v: i64) -> bool {
        (self.lo..self.hi).contains(&v) || self.except == Some(v)
    }
}

impl HbmDecl {
    /// Number of elements (`usize::MAX` when the shape's product overflows, which validation
    /// rejects as `hbm-size`).
    pub fn numel(&self) -> usize {
        self.shape
            .iter()
            .try_fold(1usize, |n, &d| n.checked_mul(d))
            .unwrap_or(usize::MAX)
    }
}

/// On-chip memory a tile lives in.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Buffer {
    /// State buffer: the main on-chip scratchpad.
    Sbuf,
    /// Partial-sum buffer: where the tensor engine writes.
    Psum,
}

impl Buffer {
    /// `sbuf` / `psum`.
    pub const fn name(self) -> &'static str {
        match self {
            Buffer::Sbuf => "sbuf",
            Buffer::Psum => "psum",
        }
    }
}

/// A tile: `[partitions, free]`, allocated where its `Alloc` statement stands.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct TileDecl {
    /// A readable name (`t3`, or the author's name).
    pub name: String,
    /// Partition size (dim 0).
    pub partitions: usize,
    /// Free size (product of the free dims).
    pub free: usize,
    /// Element type.
    pub dtype: DType,
    /// SBUF or PSUM.
    pub buffer: Buffer,
    /// Where the kernel allocated it.
    pub loc: SourceLoc,
    /// The `(partition, free)` address the author placed it at (`nl.ndarray(address=...)`),
    /// or `None` for a tile the compiler places. A placed tile is the author's to fit: the
    /// capacity rules (`sbuf-capacity`, `psum-banks-live`) leave it out.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub address: Option<(usize, usize)>,
}

impl TileDecl {
    /// Bytes per partition (saturating, so an absurd free size fails the capacity checks).
    pub fn bytes_per_partition(&self) -> usize {
        self.free.saturating_mul(self.dtype.size_bytes())
    }
}

/// How a loop's iterations relate.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum LoopKind {
    /// `affine_range`: iterations are independent (may run in parallel).
    Affine,
    /// `sequential_range`: loop-carried state; iterations run in order.
    Sequential,
    /// An axis of the SPMD launch grid ([`Program::grid`]): each iteration is one value of
    /// `nl.program_id(axis)`, and the body is a program instance (its own SBUF and PSUM,
    /// the HBM shared). The simulator runs instances in program-id order (row-major over the
    /// axes). A loop of `grid[axis]` iterations has a symbolic id (Rust kernels); a loop of one
    /// iteration in a larger grid is one instance traced with a concrete id (the frontend, and
    /// unrolled programs), the instances of an axis following each other in id order.
    Grid {
        /// The grid axis (`nl.program_id`'s `axis`).
        axis: usize,
    },
}

impl LoopKind {
    /// The grid axis, for a launch-grid loop.
    pub fn grid_axis(self) -> Option<usize> {
        match self {
            LoopKind::Grid { axis } => Some(axis),
            _ => None,
        }
    }
}

/// A loop's static description.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct LoopDecl {
    /// Trip count: the variable ranges over `0..trip`.
    pub trip: usize,
    /// Affine or sequential.
    pub kind: LoopKind,
    /// Where the kernel opened it.
    pub loc: SourceLoc,
}

/// Either side of a DMA.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum DmaOperand {
    /// Device memory.
    Hbm {
        /// The access pattern.
        access: HbmAccess,
    },
    /// An on-chip tile region.
    Tile {
        /// The region.
        region: TileRegion,
    },
}

/// An instruction and where it came from.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Instruction {
    /// What it does.
    #[serde(flatten)]
    pub op: Op,
    /// The kernel line that created it.
    pub loc: SourceLoc,
}

/// A statement of the program tree.
#[expect(
    clippy::large_enum_variant,
    reason = "instructions are the common case; boxing them would add a pointer chase per instruction in the simulator"
)]
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "stmt", rename_all = "snake_case")]
pub enum Stmt {
    /// A tile comes into existence here (filled with NaN); it dies at the end of the enclosing block.
    Alloc {
        /// The tile.
        tile: TileId,
    },
    /// An engine instruction.
    Inst(Instruction),
    /// A loop with a symbolic index.
    Loop {
        /// The loop variable (also the index into [`Program::loops`]).
        var: LoopVar,
        /// The body, executed once per iteration.
        body: Vec<Stmt>,
    },
    /// A loop the device runs, its iterations decided by registers at run time (see
    /// [`LoopControl`]); the body is traced once.
    DeviceLoop {
        /// The loop (also the index into [`Program::device_loops`]).
        id: DeviceLoopId,
        /// The body, executed once per iteration.
        body: Vec<Stmt>,
    },
}

impl Stmt {
    /// Whether this statement is an instruction at which the cores of a logical NeuronCore
    /// meet ([`Op::synchronises_cores`]).
    pub fn synchronises_cores(&self) -> bool {
        matches!(self, Stmt::Inst(inst) if inst.op.synchronises_cores())
    }

    /// Whether this statement synchronises cores at any depth: it is such an instruction, or a
    /// loop whose body holds one.
    pub fn synchronises_within(&self) -> bool {
        match self {
            Stmt::Inst(_) => self.synchronises_cores(),
            Stmt::Loop { body, .. } | Stmt::DeviceLoop { body, .. } => {
                body.iter().any(Stmt::synchronises_within)
            }
            Stmt::Alloc { .. } => false,
        }
    }
}

/// A traced kernel, specialised to one signature.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct Program {
    /// Kernel name.
    pub name: String,
    /// The target it was traced for.
    pub target: Target,
    /// HBM tensors: inputs first (in parameter order), then outputs.
    pub hbm: Vec<HbmDecl>,
    /// Outputs, in return order.
    pub outputs: Vec<HbmId>,
    /// Every tile.
    pub tiles: Vec<TileDecl>,
    /// Every loop, indexed by its variable.
    pub loops: Vec<LoopDecl>,
    /// Every register, indexed by its id (left out of the JSON when there are none, so that
    /// programs without registers keep their cache keys).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub registers: Vec<RegisterDecl>,
    /// Every device loop, indexed by its id (left out of the JSON when there are none).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub device_loops: Vec<DeviceLoopDecl>,
    /// The SPMD launch grid (`kernel[2, 3]` is `[2, 3]`): empty for a kernel launched without
    /// one (one program, `nl.program_ndim()` 0). Left out of the JSON when empty, so that
    /// programs without a grid keep their cache keys. See [`LoopKind::Grid`].
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub grid: Vec<usize>,
    /// The top-level block.
    pub body: Vec<Stmt>,
}

impl Program {
    /// How many program instances the launch grid has (1 without a grid).
    pub fn program_count(&self) -> usize {
        self.grid.iter().product()
    }

    /// Trip counts indexed by loop variable, for [`AffineExpr::range`].
    pub fn trips(&self) -> Vec<usize> {
        self.loops.iter().map(|l| l.trip).collect()
    }

    /// The constants (`nl.shared_constant`), in the order the kernel made them.
    pub fn constants(&self) -> impl Iterator<Item = (HbmId, &HbmDecl)> {
        self.hbm
            .iter()
            .enumerate()
            .filter(|(_, d)| d.kind == HbmKind::Constant)
            .map(|(i, d)| (HbmId(i as u32), d))
    }

    /// The inputs, in parameter order.
    pub fn inputs(&self) -> impl Iterator<Item = (HbmId, &HbmDecl)> {
        self.hbm
            .iter()
            .enumerate()
            .filter(|(_, d)| d.kind == HbmKind::Input)
            .map(|(i, d)| (HbmId(i as u32), d))
    }

    /// Calls `f` on every instruction in program order, with the loops enclosing it.
    pub fn visit_instructions<'a>(&'a self, f: &mut dyn FnMut(&'a Instruction, &[LoopVar])) {
        fn walk<'a>(
            body: &'a [Stmt],
            stack: &mut Vec<LoopVar>,
            f: &mut dyn FnMut(&'a Instruction, &[LoopVar]),
        ) {
            for s in body {
                match s {
                    Stmt::Alloc { .. } => {}
                    Stmt::Inst(i) => f(i, stack),
                    Stmt::Loop { var, body } => {
                        stack.push(*var);
                        walk(body, stack, f);
                        stack.pop();
                    }
                    Stmt::DeviceLoop { body, .. } => walk(body, stack, f),
                }
            }
        }
        walk(&self.body, &mut Vec::new(), f);
    }

    /// Number of instructions in the tree (each loop body counted once).
    pub fn instruction_count(&self) -> usize {
        let mut n = 0;
        self.visit_instructions(&mut |_, _| n += 1);
        n
    }

    /// Canonical JSON of the program, the basis of cache keys.
    pub fn to_json(&self) -> String {
        serde_json::to_string(self).expect("programs are plain data and always serialise")
    }
}
