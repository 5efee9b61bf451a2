//! The Program IR: plain, serialisable data produced by tracing a kernel once per signature.
//!
//! A program owns its HBM tensors (inputs and outputs), its on-chip tiles, its loops and a tree
//! of statements. Instructions are destination first, as in `nki.isa`, and each one carries the
//! kernel source line that created it.

use crate::affine::{AffineExpr, LoopVar};
use crate::dtype::DType;
use crate::loc::SourceLoc;
use crate::target::Target;
use serde::Serialize;

mod hoist;
mod math;
mod op;
mod operand;
mod register;
mod unroll;

pub use hoist::hoist_escaping_allocs;
pub use math::{ActFn, BinOp, to_bits32};
pub use op::{DgeMode, ElementwiseEngine, OobMode, Op, ScalarOperand};
pub use operand::{Access, Operand, OperandMap, OperandUse, Param};
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

/// Whether an HBM tensor is a kernel input or an output the kernel allocates (`shared_hbm`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum HbmKind {
    /// A kernel argument (read only).
    Input,
    /// A kernel output in `nl.shared_hbm`.
    Output,
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
    /// Where an output was allocated (`shared_hbm`); `None` for inputs.
    pub loc: Option<SourceLoc>,
    /// The values an integer input must hold ([`crate::lang::hbm::Hbm::require_indices`]),
    /// checked on the data before the program runs.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub domain: Option<IndexDomain>,
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

/// A rectangular region of a tile: partitions `p0..p0+np`, free elements `f0..f0+nf`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct TileRegion {
    /// The tile.
    pub tile: TileId,
    /// First partition.
    pub p0: usize,
    /// Partition count.
    pub np: usize,
    /// First free element.
    pub f0: usize,
    /// Free element count.
    pub nf: usize,
}

impl TileRegion {
    /// Whether the region lies inside a `[partitions, free]` tile (ends computed without
    /// overflow).
    pub fn within(&self, partitions: usize, free: usize) -> bool {
        let inside = |start: usize, len: usize, size: usize| {
            start.checked_add(len).is_some_and(|end| end <= size)
        };
        inside(self.p0, self.np, partitions) && inside(self.f0, self.nf, free)
    }
}

/// A 2-D access pattern into an HBM tensor: element `(p, f)` of the pattern is flat element
/// `offset + p·p_stride + f·f_stride` of the tensor. Covers row and column slices, broadcasts
/// (stride 0), reshapes and transposed views without copies.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct HbmAccess {
    /// The tensor.
    pub tensor: HbmId,
    /// Flat element offset of `(0, 0)`.
    pub offset: AffineExpr,
    /// Rows (maps to tile partitions).
    pub np: usize,
    /// Elements per row (maps to the tile free dim).
    pub nf: usize,
    /// Elements between consecutive rows.
    pub p_stride: i64,
    /// Elements between consecutive columns.
    pub f_stride: i64,
}

impl HbmAccess {
    /// How far the pattern reaches below and above its `(0, 0)` element, in flat elements
    /// (negative strides reach below). A reach past `i64`'s range saturates, so bounds checks
    /// built on it reject the pattern instead of wrapping around into range.
    pub fn extent(&self) -> (i64, i64) {
        let (mut below, mut above) = (0i64, 0i64);
        for (stride, n) in [(self.p_stride, self.np), (self.f_stride, self.nf)] {
            let steps = i64::try_from(n.saturating_sub(1)).unwrap_or(i64::MAX);
            let span = stride.saturating_mul(steps);
            if span > 0 {
                above = above.saturating_add(span);
            } else {
                below = below.saturating_add(span);
            }
        }
        (below, above)
    }
}

impl HbmAccess {
    /// The lowest and highest flat element the pattern touches over every iteration of the
    /// loops (`trips`, indexed by loop variable; a variable without a trip count is taken as
    /// spanning nothing), exactly.
    pub fn reach(&self, trips: &[usize]) -> (i128, i128) {
        let (mut lo, mut hi) = (
            i128::from(self.offset.constant),
            i128::from(self.offset.constant),
        );
        for (k, n) in self.steps(trips) {
            let reach = i128::from(k) * n.saturating_sub(1) as i128;
            if reach > 0 {
                hi += reach;
            } else {
                lo += reach;
            }
        }
        (lo, hi)
    }

    /// Every `(step, count)` the pattern moves by: each loop term's coefficient with its trip
    /// count (1 for a variable `trips` does not cover), then the row and column strides.
    fn steps<'s>(&'s self, trips: &'s [usize]) -> impl Iterator<Item = (i64, usize)> + 's {
        let terms = self
            .offset
            .terms
            .iter()
            .map(|&(v, k)| (k, trips.get(v.0 as usize).copied().unwrap_or(1)));
        terms.chain([(self.p_stride, self.np), (self.f_stride, self.nf)])
    }

    /// Whether the pattern's numbers are small enough for plain `i64` reasoning: the constant
    /// plus every coefficient and stride times its reach (at least one step each), all in
    /// absolute value, stays below 2^60, so sums and differences of any of its partial offsets
    /// cannot overflow. The simulator's analyses that let writes run concurrently only accept
    /// such patterns (a program that skipped validation may hold any numbers).
    pub fn is_modest(&self, trips: &[usize]) -> bool {
        let magnitude = self
            .steps(trips)
            .map(|(k, n)| i128::from(k).abs() * n.saturating_sub(1).max(1) as i128)
            .sum::<i128>()
            + i128::from(self.offset.constant).abs();
        magnitude < 1 << 60
    }
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
    /// The top-level block.
    pub body: Vec<Stmt>,
}

impl Program {
    /// Trip counts indexed by loop variable, for [`AffineExpr::range`].
    pub fn trips(&self) -> Vec<usize> {
        self.loops.iter().map(|l| l.trip).collect()
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
