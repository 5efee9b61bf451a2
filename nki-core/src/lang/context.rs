//! The tracing context: a thread-local program builder that the tile language records into.
//!
//! Kernels are ordinary Rust functions. While [`trace`] runs one, every instruction, tile and
//! loop it creates is appended to the builder; the first error is kept (with its source line)
//! and reported when the trace ends, so kernel code needs no `?` on every instruction.

use crate::affine::{AffineExpr, LoopVar};
use crate::dtype::DType;
use crate::error::NkiError;
use crate::ir::{
    DeviceLoopDecl, DeviceLoopId, HbmDecl, HbmId, HbmKind, Instruction, LoopControl, LoopDecl,
    LoopKind, Op, Program, RegisterDecl, RegisterId, Stmt, TileDecl, TileRegion,
};
use crate::lang::hbm::Hbm;
use crate::loc::SourceLoc;
use crate::target::Target;
use std::cell::RefCell;

/// Where a statement was recorded: its block's depth and its index in the block.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StmtRef {
    depth: usize,
    index: usize,
}

/// A loop whose body is being recorded.
#[derive(Clone, Copy, Debug)]
enum OpenLoop {
    /// A static loop.
    Static(LoopVar),
    /// A device loop.
    Device(DeviceLoopId),
}

pub(crate) struct Builder {
    pub(crate) target: Target,
    pub(crate) hbm: Vec<HbmDecl>,
    pub(crate) tiles: Vec<TileDecl>,
    pub(crate) loops: Vec<LoopDecl>,
    pub(crate) registers: Vec<RegisterDecl>,
    pub(crate) device_loops: Vec<DeviceLoopDecl>,
    /// The launch grid (empty without one).
    pub(crate) grid: Vec<usize>,
    /// The program id: per grid axis, the symbolic loop variable of a Rust kernel traced once
    /// for every instance ([`trace_grid`]), or the concrete id of the instance being traced
    /// (the frontend). Empty without a grid.
    pub(crate) program_id: Vec<AffineExpr>,
    /// The launch-wide HBM tensors of a grid traced instance by instance.
    pub(crate) instance_hbm: crate::lang::instances::InstanceHbm,
    /// Whether the kernel asked for its concrete program id (`program_id` or
    /// [`crate::lang::program_share`] in a grid traced instance by instance): whether its
    /// instances may differ.
    pub(crate) reads_program_id: bool,
    blocks: Vec<Vec<Stmt>>,
    /// While set, statements go to the launch's prologue: the top-level block, before every
    /// program instance and anything else recorded, at this index (the prologue's length so
    /// far). See [`Builder::set_launch_prologue`].
    prologue: Option<usize>,
    /// The prologue's length: the statements inserted at the top of the top-level block.
    prologue_len: usize,
    /// Loops whose bodies are being recorded, innermost last (`blocks` has one more entry).
    open_loops: Vec<OpenLoop>,
    error: Option<NkiError>,
}

thread_local! {
    pub(crate) static BUILDER: RefCell<Option<Builder>> = const { RefCell::new(None) };
}

/// Runs `f` with the active builder. Using the tile language outside a trace is a bug in the
/// calling code, so it panics with a message saying so.
pub(crate) fn with_builder<R>(f: impl FnOnce(&mut Builder) -> R) -> R {
    BUILDER.with(|b| {
        let mut guard = b.borrow_mut();
        let builder = guard
            .as_mut()
            .expect("nki tile-language call outside a trace: call kernels through nki_core::trace or a registered op");
        f(builder)
    })
}

impl Builder {
    /// Records the first error; later ones are usually consequences of it.
    pub(crate) fn fail(&mut self, loc: SourceLoc, message: String) {
        if self.error.is_none() {
            self.error = Some(NkiError::Trace { message, loc });
        }
    }

    /// Records `e` as the trace's error unless one is recorded already.
    pub(crate) fn record_error(&mut self, e: NkiError) {
        if self.error.is_none() {
            self.error = Some(e);
        }
    }

    pub(crate) fn push_stmt(&mut self, s: Stmt) {
        if let Some(at) = self.prologue {
            self.blocks[0].insert(at, s);
            self.prologue = Some(at + 1);
            self.prologue_len = at + 1;
            return;
        }
        self.blocks
            .last_mut()
            .expect("a block is always open while tracing")
            .push(s);
    }

    /// Starts (`true`) or ends recording into the launch's prologue: statements recorded in
    /// between go to the top of the program, after earlier prologue statements and before
    /// everything else, whichever loop or program instance is open. What the whole launch
    /// must see before any instance runs goes there (the frontend's copy of a kernel argument
    /// that one instance writes: an instance traced before the write reads the copy too).
    pub(crate) fn set_launch_prologue(&mut self, on: bool) {
        self.prologue = on.then_some(self.prologue_len);
    }

    /// Records an instruction; returns where it sits, for amending it right after. A tile
    /// operand that names no tile of this trace (a tile kept from another one) or reaches
    /// outside its tile is a trace error at `loc`.
    pub(crate) fn push_op(&mut self, op: Op, loc: SourceLoc) -> StmtRef {
        let mut regions = op.tile_reads().into_iter().chain(op.tile_writes());
        if let Some(message) = regions.find_map(|r| self.region_problem(r)) {
            self.fail(loc, format!("{}: {message}", op.name()));
        } else if let Some(message) = crate::isa::operators::operator_problem(&self.tiles, &op) {
            self.fail(loc, message);
        }
        self.push_stmt(Stmt::Inst(Instruction { op, loc }));
        if let Some(at) = self.prologue {
            return StmtRef {
                depth: 0,
                index: at - 1,
            };
        }
        let depth = self.blocks.len() - 1;
        StmtRef {
            depth,
            index: self.blocks[depth].len() - 1,
        }
    }

    /// The element type of a DMA side of this trace.
    pub(crate) fn operand_dtype(&self, o: &crate::ir::DmaOperand) -> DType {
        match o {
            crate::ir::DmaOperand::Tile { region } => self.tiles[region.tile.0 as usize].dtype,
            crate::ir::DmaOperand::Hbm { access } => self.hbm[access.tensor.0 as usize].dtype,
        }
    }

    /// What is wrong with `r` as an operand of this trace, if anything.
    pub(crate) fn region_problem(&self, r: &TileRegion) -> Option<String> {
        let Some(t) = self.tiles.get(r.tile.0 as usize) else {
            return Some(format!(
                "tile #{} does not belong to this kernel's trace (a tile kept from another one?)",
                r.tile.0
            ));
        };
        (!r.within(t.partitions, t.free)).then(|| {
            format!(
                "partitions {}..+{} and elements {}..+{} reach outside tile {} [{}, {}]",
                r.p0, r.np, r.f0, r.nf, t.name, t.partitions, t.free
            )
        })
    }

    /// The statement recorded at `at`, if its block is still open.
    pub(crate) fn stmt_mut(&mut self, at: StmtRef) -> Option<&mut Stmt> {
        self.blocks.get_mut(at.depth)?.get_mut(at.index)
    }

    pub(crate) fn trips(&self) -> Vec<usize> {
        self.loops.iter().map(|l| l.trip).collect()
    }

    pub(crate) fn add_hbm(&mut self, decl: HbmDecl) -> HbmId {
        self.hbm.push(decl);
        HbmId(self.hbm.len() as u32 - 1)
    }

    /// A builder for `inputs`, with the top-level block open, and the inputs' handles.
    pub(crate) fn new(target: Target, inputs: &[InputSpec]) -> (Builder, Vec<Hbm>) {
        let mut b = Builder {
            target,
            hbm: Vec::new(),
            tiles: Vec::new(),
            loops: Vec::new(),
            registers: Vec::new(),
            device_loops: Vec::new(),
            grid: Vec::new(),
            program_id: Vec::new(),
            instance_hbm: Default::default(),
            reads_program_id: false,
            blocks: vec![Vec::new()],
            prologue: None,
            prologue_len: 0,
            open_loops: Vec::new(),
            error: None,
        };
        let handles = inputs
            .iter()
            .map(|i| {
                let id = b.add_hbm(HbmDecl {
                    name: i.name.clone(),
                    kind: HbmKind::Input,
                    shape: i.shape.clone(),
                    dtype: i.dtype,
                    loc: None,
                    domain: None,
                    values: None,
                });
                Hbm::new(id, i.shape.clone(), i.dtype)
            })
            .collect();
        (b, handles)
    }

    /// Declares a loop and opens its body; returns its variable.
    pub(crate) fn open_loop(&mut self, trip: usize, kind: LoopKind, loc: SourceLoc) -> LoopVar {
        self.loops.push(LoopDecl { trip, kind, loc });
        self.blocks.push(Vec::new());
        let var = LoopVar(self.loops.len() as u32 - 1);
        self.open_loops.push(OpenLoop::Static(var));
        var
    }

    /// A new register named `name` (`r{id}` when empty), allocated at `loc`.
    pub(crate) fn add_register(&mut self, name: &str, loc: SourceLoc) -> RegisterId {
        let id = RegisterId(self.registers.len() as u32);
        let name = if name.is_empty() {
            format!("r{}", id.0)
        } else {
            name.to_string()
        };
        self.registers.push(RegisterDecl { name, loc });
        id
    }

    /// Whether `reg` is a register of this trace.
    pub(crate) fn has_register(&self, reg: RegisterId) -> bool {
        (reg.0 as usize) < self.registers.len()
    }

    /// Declares a device loop and opens its body; returns its id.
    pub(crate) fn open_device_loop(
        &mut self,
        control: LoopControl,
        loc: SourceLoc,
    ) -> DeviceLoopId {
        self.device_loops.push(DeviceLoopDecl { control, loc });
        self.blocks.push(Vec::new());
        let id = DeviceLoopId(self.device_loops.len() as u32 - 1);
        self.open_loops.push(OpenLoop::Device(id));
        id
    }

    /// Closes the innermost open loop (static or device); `false` when no loop is open.
    /// How many loops are open.
    pub(crate) fn open_loop_depth(&self) -> usize {
        self.open_loops.len()
    }

    pub(crate) fn close_loop(&mut self) -> bool {
        let Some(open) = self.open_loops.pop() else {
            return false;
        };
        let body = self.blocks.pop().expect("each open loop has its block");
        self.push_stmt(match open {
            OpenLoop::Static(var) => Stmt::Loop { var, body },
            OpenLoop::Device(id) => Stmt::DeviceLoop { id, body },
        });
        true
    }

    /// The first recorded error, taken (prefixed with the kernel's name).
    pub(crate) fn take_error(&mut self, name: &str) -> Option<NkiError> {
        self.error.take().map(|e| e.in_kernel(name))
    }

    /// The finished program: `outputs` must be `shared_hbm` tensors; every loop must be closed.
    /// `loc` is the kernel's: where an error about its outputs points when the tensor has no
    /// line of its own (an input).
    pub(crate) fn finish(
        mut self,
        name: &str,
        outputs: &[HbmId],
        loc: SourceLoc,
    ) -> Result<Program, NkiError> {
        if let Some(e) = self.take_error(name) {
            return Err(e);
        }
        let author_error = |message: String, loc: SourceLoc| NkiError::Trace { message, loc };
        for (i, o) in outputs.iter().enumerate() {
            let Some(decl) = self.hbm.get(o.0 as usize) else {
                return Err(NkiError::Internal(format!(
                    "kernel {name} returned an unknown tensor #{}",
                    o.0
                )));
            };
            if decl.kind != HbmKind::Output {
                let what = match decl.kind {
                    HbmKind::Input => "input",
                    HbmKind::Constant => "shared_constant",
                    _ => "private_hbm tensor",
                };
                return Err(author_error(
                    format!(
                        "kernel {name} returned {what} `{}`; outputs must be allocated with \
                         shared_hbm",
                        decl.name
                    ),
                    decl.loc.unwrap_or(loc),
                ));
            }
            if outputs[..i].contains(o) {
                return Err(author_error(
                    format!(
                        "kernel {name} returns `{}` as output {} and again as output {i}; each \
                         output must be a shared_hbm tensor of its own",
                        decl.name,
                        outputs[..i].iter().position(|p| p == o).unwrap_or(0)
                    ),
                    decl.loc.unwrap_or(loc),
                ));
            }
        }
        if let Some(innermost) = self.open_loops.last() {
            let loc = match innermost {
                OpenLoop::Static(var) => self.loops[var.0 as usize].loc,
                OpenLoop::Device(id) => self.device_loops[id.0 as usize].loc,
            };
            return Err(author_error(
                format!(
                    "kernel {name} finished with {} loop(s) still open",
                    self.open_loops.len()
                ),
                loc,
            ));
        }
        // A shared_hbm tensor the kernel does not return is scratch every instance sees.
        for (i, decl) in self.hbm.iter_mut().enumerate() {
            if decl.kind == HbmKind::Output && !outputs.contains(&HbmId(i as u32)) {
                decl.kind = HbmKind::SharedScratch;
            }
        }
        let mut body = self.blocks.pop().expect("the top-level block is open");
        crate::ir::hoist_escaping_allocs(&mut body, &self.loops);
        Ok(Program {
            name: name.to_string(),
            target: self.target,
            hbm: self.hbm,
            outputs: outputs.to_vec(),
            tiles: self.tiles,
            loops: self.loops,
            registers: self.registers,
            device_loops: self.device_loops,
            grid: self.grid,
            body,
        })
    }
}

/// The target the running trace specialises for (kernels may choose tile sizes by it).
pub fn current_target() -> Target {
    with_builder(|b| b.target)
}

/// Opens a loop, traces `body` once with the symbolic index, and closes it.
pub(crate) fn record_loop(trip: usize, kind: LoopKind, loc: SourceLoc, body: impl FnOnce(LoopVar)) {
    let var = with_builder(|b| b.open_loop(trip, kind, loc));
    body(var);
    with_builder(|b| {
        b.close_loop();
    });
}

/// An input tensor's name, shape and dtype, as [`trace`] receives it.
#[derive(Clone, Debug)]
pub struct InputSpec {
    /// Parameter name.
    pub name: String,
    /// Shape.
    pub shape: Vec<usize>,
    /// Element type.
    pub dtype: DType,
}

pub(crate) struct ResetOnDrop;

impl Drop for ResetOnDrop {
    fn drop(&mut self) {
        BUILDER.with(|b| *b.borrow_mut() = None);
    }
}

/// Traces a kernel body once into a [`Program`].
///
/// `kernel` receives one [`Hbm`] handle per input and returns the output handles it allocated
/// with [`crate::lang::shared_hbm`]. Trace errors (and panics in kernel code) come back as
/// [`NkiError`] naming the kernel source line.
#[track_caller]
pub fn trace(
    name: &str,
    target: Target,
    inputs: &[InputSpec],
    kernel: impl FnOnce(&[Hbm]) -> Vec<Hbm>,
) -> Result<Program, NkiError> {
    trace_grid(name, target, &[], inputs, kernel)
}

/// Traces a kernel launched on an SPMD grid (`kernel[2, 3]` is `grid = [2, 3]`; empty is a
/// launch without a grid, as [`trace`]).
///
/// The body is traced once: [`crate::lang::program_id`] is a symbolic index (an
/// [`AffineExpr`] over one [`LoopKind::Grid`] loop per axis, wrapped around the body, outermost
/// axis first), so the program keeps one copy of the body, as loops keep theirs; the simulator
/// runs it once per instance, in program-id order. A zero-sized axis is a trace error. The grid
/// loops carry the caller's source line.
#[track_caller]
pub fn trace_grid(
    name: &str,
    target: Target,
    grid: &[usize],
    inputs: &[InputSpec],
    kernel: impl FnOnce(&[Hbm]) -> Vec<Hbm>,
) -> Result<Program, NkiError> {
    traced_grid(name, target, grid, inputs, kernel, SourceLoc::caller()).map(|(p, _)| p)
}

/// [`trace_grid`], also saying whether the kernel asked for its program id or its share of the
/// work ([`crate::lang::program_share`]).
pub(crate) fn traced_grid(
    name: &str,
    target: Target,
    grid: &[usize],
    inputs: &[InputSpec],
    kernel: impl FnOnce(&[Hbm]) -> Vec<Hbm>,
    loc: SourceLoc,
) -> Result<(Program, bool), NkiError> {
    check_launch(name, grid, loc)?;
    let (mut builder, handles) = Builder::new(target, inputs);
    builder.grid = grid.to_vec();
    for (axis, &n) in grid.iter().enumerate() {
        let var = builder.open_loop(n, LoopKind::Grid { axis }, loc);
        builder.program_id.push(AffineExpr::var(var));
    }
    BUILDER.with(|b| *b.borrow_mut() = Some(builder));
    let _reset = ResetOnDrop;
    let outputs = run_body(name, "", || kernel(&handles))?;
    let mut builder = BUILDER
        .with(|b| b.borrow_mut().take())
        .expect("the builder lives until the trace ends");
    // The grid loops close unless the kernel left loops of its own open (which `finish`
    // reports).
    if builder.open_loops.len() == grid.len() {
        for _ in grid {
            builder.close_loop();
        }
    }
    let ids: Vec<HbmId> = outputs.iter().map(Hbm::id).collect();
    let reads_program_id = builder.reads_program_id;
    Ok((builder.finish(name, &ids, loc)?, reads_program_id))
}

/// Whether a launch of kernel `name` on `grid` can be traced here: every axis has a program,
/// and no other trace is running on this thread.
pub(crate) fn check_launch(name: &str, grid: &[usize], loc: SourceLoc) -> Result<(), NkiError> {
    if let Some(axis) = grid.iter().position(|&n| n == 0) {
        return Err(NkiError::Trace {
            message: format!(
                "kernel {name}: launch grid {grid:?} has no programs along axis {axis}; every \
                 axis needs at least one"
            ),
            loc,
        });
    }
    if BUILDER.with(|b| b.borrow().is_some()) {
        return Err(NkiError::Internal(format!(
            "kernel {name}: trace called while another trace is running on this thread"
        )));
    }
    Ok(())
}

/// Runs a kernel body (the builder installed); a panic in it comes back as an internal error
/// naming the kernel, with `what` (e.g. the program instance) after "while tracing".
pub(crate) fn run_body(
    name: &str,
    what: &str,
    body: impl FnOnce() -> Vec<Hbm>,
) -> Result<Vec<Hbm>, NkiError> {
    std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)).map_err(|p| {
        NkiError::Internal(format!(
            "kernel {name} panicked while tracing{what}: {}",
            panic_message(p.as_ref())
        ))
    })
}

/// The message of a caught panic payload.
pub fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    payload
        .downcast_ref::<String>()
        .cloned()
        .or_else(|| payload.downcast_ref::<&str>().map(|s| s.to_string()))
        .unwrap_or_else(|| "unknown panic".into())
}
