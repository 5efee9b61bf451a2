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
}

impl HbmDecl {
    /// Number of elements.
    pub fn numel(&self) -> usize {
        self.shape.iter().product()
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
    /// Bytes per partition.
    pub fn bytes_per_partition(&self) -> usize {
        self.free * self.dtype.size_bytes()
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
    /// (negative strides reach below).
    pub fn extent(&self) -> (i64, i64) {
        let (mut below, mut above) = (0, 0);
        for (stride, n) in [(self.p_stride, self.np), (self.f_stride, self.nf)] {
            let span = stride * (n as i64 - 1);
            if span > 0 {
                above += span;
            } else {
                below += span;
            }
        }
        (below, above)
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

/// Binary arithmetic of the vector engine (`nl.add`, ...).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum BinOp {
    /// `a + b`
    Add,
    /// `a - b`
    Subtract,
    /// `a * b`
    Multiply,
    /// `max(a, b)`
    Maximum,
    /// `min(a, b)`
    Minimum,
    /// `a / b` (exact division; NKI kernels usually multiply by a reciprocal instead)
    Divide,
}

impl BinOp {
    /// Applies the operator in fp32.
    #[inline]
    pub fn apply(self, a: f32, b: f32) -> f32 {
        match self {
            BinOp::Add => a + b,
            BinOp::Subtract => a - b,
            BinOp::Multiply => a * b,
            BinOp::Maximum => a.max(b),
            BinOp::Minimum => a.min(b),
            BinOp::Divide => a / b,
        }
    }

    /// The identity element when used as a reduction (`Add` → 0, `Maximum` → -inf, ...).
    pub fn reduce_identity(self) -> Option<f32> {
        match self {
            BinOp::Add => Some(0.0),
            BinOp::Multiply => Some(1.0),
            BinOp::Maximum => Some(f32::NEG_INFINITY),
            BinOp::Minimum => Some(f32::INFINITY),
            BinOp::Subtract | BinOp::Divide => None,
        }
    }

    /// The `nl.*` spelling used by code generation.
    pub const fn nki_name(self) -> &'static str {
        match self {
            BinOp::Add => "nl.add",
            BinOp::Subtract => "nl.subtract",
            BinOp::Multiply => "nl.multiply",
            BinOp::Maximum => "nl.maximum",
            BinOp::Minimum => "nl.minimum",
            BinOp::Divide => "nl.divide",
        }
    }
}

/// Scalar-engine activation functions.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum ActFn {
    /// `x`
    Identity,
    /// `eˣ`
    Exp,
    /// `1/√x`
    Rsqrt,
    /// `√x`
    Sqrt,
    /// `x·σ(x)`
    Silu,
    /// `x²`
    Square,
    /// `max(x, 0)`
    Relu,
    /// `tanh x`
    Tanh,
    /// `σ(x)`
    Sigmoid,
    /// `1/x`
    Reciprocal,
    /// GELU, tanh approximation.
    GeluTanh,
}

impl ActFn {
    /// Applies the function in fp32.
    #[inline]
    pub fn apply(self, x: f32) -> f32 {
        match self {
            ActFn::Identity => x,
            ActFn::Exp => x.exp(),
            ActFn::Rsqrt => 1.0 / x.sqrt(),
            ActFn::Sqrt => x.sqrt(),
            ActFn::Silu => x / (1.0 + (-x).exp()),
            ActFn::Square => x * x,
            ActFn::Relu => x.max(0.0),
            ActFn::Tanh => x.tanh(),
            ActFn::Sigmoid => 1.0 / (1.0 + (-x).exp()),
            ActFn::Reciprocal => 1.0 / x,
            ActFn::GeluTanh => {
                let c = (2.0f32 / std::f32::consts::PI).sqrt();
                0.5 * x * (1.0 + (c * (x + 0.044_715 * x * x * x)).tanh())
            }
        }
    }

    /// The `nl.*` spelling used by code generation.
    pub const fn nki_name(self) -> &'static str {
        match self {
            ActFn::Identity => "nl.copy",
            ActFn::Exp => "nl.exp",
            ActFn::Rsqrt => "nl.rsqrt",
            ActFn::Sqrt => "nl.sqrt",
            ActFn::Silu => "nl.silu",
            ActFn::Square => "nl.square",
            ActFn::Relu => "nl.relu",
            ActFn::Tanh => "nl.tanh",
            ActFn::Sigmoid => "nl.sigmoid",
            ActFn::Reciprocal => "nl.reciprocal",
            ActFn::GeluTanh => "nl.gelu_apprx_tanh",
        }
    }
}

/// A per-partition operand: an immediate scalar, or a `(P, 1)` tile column.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum ScalarOperand {
    /// The same value for every element.
    Imm {
        /// The value.
        value: f32,
    },
    /// One value per partition, broadcast along the free dim.
    Column {
        /// A region with `nf == 1`.
        region: TileRegion,
    },
}

/// One engine instruction, destination first.
#[derive(Clone, Debug, PartialEq, Serialize)]
#[serde(tag = "inst", rename_all = "snake_case")]
pub enum Op {
    /// DMA between HBM and SBUF.
    DmaCopy {
        /// Destination.
        dst: DmaOperand,
        /// Source.
        src: DmaOperand,
    },
    /// Vector engine: `dst = a <op> b` elementwise.
    TensorTensor {
        /// Destination.
        dst: TileRegion,
        /// First input.
        a: TileRegion,
        /// Second input.
        b: TileRegion,
        /// Operator.
        op: BinOp,
    },
    /// Vector engine: `dst = (data <op0> operand0) <op1> operand1`.
    TensorScalar {
        /// Destination.
        dst: TileRegion,
        /// Input.
        data: TileRegion,
        /// First operator and operand.
        op0: BinOp,
        /// First operand.
        operand0: ScalarOperand,
        /// Optional second operator and operand.
        op1: Option<(BinOp, ScalarOperand)>,
    },
    /// Scalar engine: `dst = f(data·scale + bias)`, optionally reducing each row into `reduce_res`.
    Activation {
        /// Destination.
        dst: TileRegion,
        /// Function.
        func: ActFn,
        /// Input.
        data: TileRegion,
        /// Multiplier applied before the function.
        scale: ScalarOperand,
        /// Optional `(P, 1)` bias added before the function.
        bias: Option<TileRegion>,
        /// Optional free-dim reduction of the result: operator and `(P, 1)` destination.
        reduce: Option<(BinOp, TileRegion)>,
    },
    /// Vector engine: reduce the free dim of `data` into a `(P, 1)` destination.
    TensorReduce {
        /// Destination, `nf == 1`.
        dst: TileRegion,
        /// Operator.
        op: BinOp,
        /// Input.
        data: TileRegion,
        /// Negate the result.
        negate: bool,
    },
    /// Copy with a dtype cast (e.g. PSUM fp32 → SBUF bf16).
    TensorCopy {
        /// Destination.
        dst: TileRegion,
        /// Source.
        src: TileRegion,
    },
    /// Fill with a constant.
    Memset {
        /// Destination.
        dst: TileRegion,
        /// The value.
        value: f32,
    },
    /// Tensor engine: `dst (+)= stationaryᵀ · moving`, contraction over partitions.
    NcMatmul {
        /// PSUM destination `[M, N]`.
        dst: TileRegion,
        /// `[K, M]` in SBUF.
        stationary: TileRegion,
        /// `[K, N]` in SBUF.
        moving: TileRegion,
        /// Add into `dst` instead of overwriting it.
        accumulate: bool,
    },
}

impl Op {
    /// The `nki.isa` instruction name.
    pub const fn name(&self) -> &'static str {
        match self {
            Op::DmaCopy { .. } => "dma_copy",
            Op::TensorTensor { .. } => "tensor_tensor",
            Op::TensorScalar { .. } => "tensor_scalar",
            Op::Activation { .. } => "activation",
            Op::TensorReduce { .. } => "tensor_reduce",
            Op::TensorCopy { .. } => "tensor_copy",
            Op::Memset { .. } => "memset",
            Op::NcMatmul { .. } => "nc_matmul",
        }
    }

    /// Tile regions the instruction writes.
    pub fn tile_writes(&self) -> Vec<&TileRegion> {
        match self {
            Op::DmaCopy {
                dst: DmaOperand::Tile { region },
                ..
            } => vec![region],
            Op::DmaCopy { .. } => vec![],
            Op::TensorTensor { dst, .. }
            | Op::TensorScalar { dst, .. }
            | Op::TensorReduce { dst, .. }
            | Op::TensorCopy { dst, .. }
            | Op::Memset { dst, .. }
            | Op::NcMatmul { dst, .. } => vec![dst],
            Op::Activation { dst, reduce, .. } => {
                let mut v = vec![dst];
                if let Some((_, r)) = reduce {
                    v.push(r);
                }
                v
            }
        }
    }

    /// Tile regions the instruction reads.
    pub fn tile_reads(&self) -> Vec<&TileRegion> {
        fn column(s: &ScalarOperand) -> Option<&TileRegion> {
            match s {
                ScalarOperand::Column { region } => Some(region),
                ScalarOperand::Imm { .. } => None,
            }
        }
        match self {
            Op::DmaCopy {
                src: DmaOperand::Tile { region },
                ..
            } => vec![region],
            Op::DmaCopy { .. } | Op::Memset { .. } => vec![],
            Op::TensorTensor { a, b, .. } => vec![a, b],
            Op::TensorScalar {
                data,
                operand0,
                op1,
                ..
            } => {
                let mut v = vec![data];
                v.extend(column(operand0));
                if let Some((_, o)) = op1 {
                    v.extend(column(o));
                }
                v
            }
            Op::Activation {
                data, scale, bias, ..
            } => {
                let mut v = vec![data];
                v.extend(column(scale));
                v.extend(bias.as_ref());
                v
            }
            Op::TensorReduce { data, .. } => vec![data],
            Op::TensorCopy { src, .. } => vec![src],
            Op::NcMatmul {
                dst,
                stationary,
                moving,
                accumulate,
            } => {
                let mut v = vec![stationary, moving];
                if *accumulate {
                    v.push(dst);
                }
                v
            }
        }
    }

    /// HBM accesses the instruction reads and writes, as `(access, is_write)`.
    pub fn hbm_accesses(&self) -> Vec<(&HbmAccess, bool)> {
        let mut v = Vec::new();
        if let Op::DmaCopy { dst, src } = self {
            if let DmaOperand::Hbm { access } = dst {
                v.push((access, true));
            }
            if let DmaOperand::Hbm { access } = src {
                v.push((access, false));
            }
        }
        v
    }
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
