//! A launch grid traced instance by instance: each program instance of `kernel[2]` is traced
//! with its own concrete program id, inside a one-iteration [`LoopKind::Grid`] loop, so that
//! instances may do different work (a core taking its own share of the rows, the ragged tail
//! included). The frontend traces every grid this way (Python ids are plain ints); Rust kernels
//! use [`trace_instances`] (or [`trace_on_cores`], for a logical NeuronCore), and the library's
//! kernels take their share with [`program_share`].
//!
//! The `shared_hbm` tensors and `shared_constant`s the instances allocate are one set, shared
//! by the whole launch: the first instance allocates them, and every later instance gets the
//! first one's tensors back, in allocation order, after a check that it asked for the same
//! shape and dtype.

use crate::affine::AffineExpr;
use crate::dtype::DType;
use crate::error::NkiError;
use crate::ir::{HbmId, LoopKind, Program};
use crate::lang::context::{
    BUILDER, Builder, InputSpec, ResetOnDrop, check_launch, run_body, with_builder,
};
use crate::lang::grid::grid_text;
use crate::lang::hbm::Hbm;
use crate::loc::SourceLoc;
use crate::target::Target;
use std::ops::Range;

/// The launch-wide HBM tensors of an instance-by-instance trace (see the module doc).
#[derive(Debug, Default)]
pub(crate) struct InstanceHbm {
    /// Program instances opened so far (a grid loop of the last axis opened).
    instances: usize,
    /// The tensors the first instance allocated, in order.
    first: Vec<HbmId>,
    /// How many of those the current instance has allocated.
    next: usize,
}

impl Builder {
    /// Opens the one-iteration grid loop of program id `index` along `axis`; opening the last
    /// axis starts a program instance. Axes are opened outermost first, ids in order.
    pub(crate) fn open_instance_axis(
        &mut self,
        name: &str,
        axis: usize,
        index: usize,
        loc: SourceLoc,
    ) -> Result<(), NkiError> {
        let Some(&size) = self.grid.get(axis) else {
            return Err(NkiError::Internal(format!(
                "kernel {name}: grid axis {axis} opened, but the grid is {:?}",
                self.grid
            )));
        };
        if index >= size {
            return Err(NkiError::Internal(format!(
                "kernel {name}: program id {index} along axis {axis} of a grid {:?}",
                self.grid
            )));
        }
        self.program_id[axis] = AffineExpr::constant(index as i64);
        self.open_loop(1, LoopKind::Grid { axis }, loc);
        if axis + 1 == self.grid.len() {
            self.instance_hbm.instances += 1;
            self.instance_hbm.next = 0;
        }
        Ok(())
    }

    /// In an instance after the first, the next launch-wide tensor the first instance
    /// allocated, checked against what this one asks for (same shape and dtype; a mismatch is a
    /// trace error at `loc`, and `None`); `None` in the first instance or without a grid.
    pub(crate) fn first_instance_hbm(
        &mut self,
        shape: &[usize],
        dtype: DType,
        loc: SourceLoc,
    ) -> Option<HbmId> {
        let state = &mut self.instance_hbm;
        if state.instances <= 1 {
            return None;
        }
        let (n, instance) = (state.next, state.instances - 1);
        state.next += 1;
        let Some(id) = state.first.get(n).copied() else {
            self.fail(
                loc,
                format!(
                    "program instance {instance} allocates shared_hbm tensor #{n} ({shape:?} \
                     {dtype}), but the first instance allocated only {n}; every instance must \
                     allocate the same outputs"
                ),
            );
            return None;
        };
        let d = &self.hbm[id.0 as usize];
        if d.shape == shape && d.dtype == dtype {
            return Some(id);
        }
        let message = format!(
            "program instance {instance} allocates shared_hbm tensor #{n} as {shape:?} {dtype}, \
             but the first instance allocated it as {:?} {}; every instance must allocate the \
             same outputs",
            d.shape, d.dtype
        );
        self.fail(loc, message);
        None
    }

    /// Remembers a launch-wide tensor the first instance allocated.
    pub(crate) fn note_instance_hbm(&mut self, id: HbmId) {
        if self.instance_hbm.instances == 1 {
            self.instance_hbm.first.push(id);
        }
    }

    /// Whether the current trace is one program instance of a grid traced instance by instance
    /// (every program id concrete).
    fn concrete_instance(&self) -> bool {
        !self.grid.is_empty() && self.program_id.iter().all(|id| id.as_constant().is_some())
    }
}

/// Traces a kernel launched on an SPMD `grid`, instance by instance (see the module doc):
/// `kernel` runs once per program instance, in program-id order (row-major over the axes),
/// with [`crate::lang::program_id`] a constant, and must return the same outputs every time. An
/// empty grid is one program, traced as [`crate::lang::trace`] does.
#[track_caller]
pub fn trace_instances(
    name: &str,
    target: Target,
    grid: &[usize],
    inputs: &[InputSpec],
    kernel: impl FnMut(&[Hbm]) -> Vec<Hbm>,
) -> Result<Program, NkiError> {
    instances_at(name, target, grid, inputs, kernel, SourceLoc::caller())
}

/// [`trace_instances`] with the grid loops at `loc`.
fn instances_at(
    name: &str,
    target: Target,
    grid: &[usize],
    inputs: &[InputSpec],
    mut kernel: impl FnMut(&[Hbm]) -> Vec<Hbm>,
    loc: SourceLoc,
) -> Result<Program, NkiError> {
    if grid.is_empty() {
        let traced = crate::lang::context::traced_grid(name, target, &[], inputs, kernel, loc);
        return traced.map(|(program, _)| program);
    }
    check_launch(name, grid, loc)?;
    let (mut builder, handles) = Builder::new(target, inputs);
    builder.grid = grid.to_vec();
    builder.program_id = vec![AffineExpr::constant(0); grid.len()];
    BUILDER.with(|b| *b.borrow_mut() = Some(builder));
    let _reset = ResetOnDrop;
    let mut first: Option<Vec<HbmId>> = None;
    let mut ids = vec![0usize; grid.len()];
    loop {
        with_builder(|b| {
            for (axis, &index) in ids.iter().enumerate() {
                if let Err(e) = b.open_instance_axis(name, axis, index, loc) {
                    b.record_error(e);
                }
            }
        });
        let instance = format!(" program instance {ids:?}");
        let outputs = run_body(name, &instance, || kernel(&handles))?;
        let outputs: Vec<HbmId> = outputs.iter().map(Hbm::id).collect();
        match &first {
            None => first = Some(outputs),
            Some(expected) if *expected != outputs => {
                return Err(NkiError::Trace {
                    message: format!(
                        "kernel {name}: program instance {ids:?} of the launch grid {} returned \
                         other outputs than instance 0; every instance must return the same \
                         shared_hbm tensors",
                        grid_text(grid)
                    ),
                    loc,
                });
            }
            Some(_) => {}
        }
        // The grid loops close unless the kernel left loops of its own open (which `finish`
        // reports).
        let balanced = with_builder(|b| {
            let balanced = b.open_loop_depth() == grid.len();
            if balanced {
                for _ in grid {
                    b.close_loop();
                }
            }
            balanced
        });
        if !balanced {
            break;
        }
        // The next instance in row-major order, or the end of the grid.
        let Some(axis) = (0..grid.len()).rev().find(|&a| ids[a] + 1 < grid[a]) else {
            break;
        };
        ids[axis] += 1;
        ids[axis + 1..].fill(0);
    }
    let builder = BUILDER
        .with(|b| b.borrow_mut().take())
        .expect("the builder lives until the trace ends");
    builder.finish(name, &first.unwrap_or_default(), loc)
}

/// Traces a kernel for a logical NeuronCore of `cores` physical cores: one program, and if the
/// kernel splits its work by program ([`program_share`], [`crate::lang::program_id`]) and
/// `cores > 1`, traced again instance by instance as the launch grid `[cores]`, each core
/// taking its share (the NKI launch `kernel[cores]`). A kernel that does not split stays one
/// program: launched on both cores it would compute the same work twice.
#[track_caller]
pub fn trace_on_cores(
    name: &str,
    target: Target,
    cores: usize,
    inputs: &[InputSpec],
    kernel: impl FnMut(&[Hbm]) -> Vec<Hbm>,
) -> Result<Program, NkiError> {
    trace_on_cores_at(name, target, cores, inputs, kernel, SourceLoc::caller())
}

/// [`trace_on_cores`] with the launch at `loc` (a registered kernel's definition).
pub(crate) fn trace_on_cores_at(
    name: &str,
    target: Target,
    cores: usize,
    inputs: &[InputSpec],
    mut kernel: impl FnMut(&[Hbm]) -> Vec<Hbm>,
    loc: SourceLoc,
) -> Result<Program, NkiError> {
    let (program, splits) =
        crate::lang::context::traced_grid(name, target, &[], inputs, &mut kernel, loc)?;
    if !splits || cores <= 1 {
        return Ok(program);
    }
    instances_at(name, target, &[cores], inputs, kernel, loc)
}

/// The contiguous part of `0..items` this program instance works on when a kernel splits
/// `items` units of work (row tiles, heads) across every program of its launch grid: instance
/// `k` of `n` gets `k·items/n .. (k+1)·items/n` ([`share_of`]), so the shares differ by at most
/// one item and cover `0..items` once. A kernel without a grid, or traced once for every
/// instance ([`crate::lang::trace_grid`]'s symbolic program id, where no Rust integer can depend
/// on the instance), gets all of `0..items`.
pub fn program_share(items: usize) -> Range<usize> {
    match program_instance() {
        Some((k, n)) => share_of(items, k, n),
        None => 0..items,
    }
}

/// Share `k` of `n` of `0..items`: `k·items/n .. (k+1)·items/n`, what [`program_share`] gives
/// program instance `k` of a launch of `n` (empty when `items < n` for some `k`). A kernel that
/// must compute every instance's share on one core, in the order the instances would (partial
/// sums combined in a fixed order), asks for them by number.
pub fn share_of(items: usize, k: usize, n: usize) -> Range<usize> {
    let n = n.max(1) as u128;
    let at = |i: usize| ((i as u128 * items as u128) / n) as usize;
    at(k)..at(k + 1)
}

/// `(k, n)`: this program's instance `k` of the `n` of its launch grid (row-major over the
/// axes), when the grid is traced instance by instance ([`trace_instances`], [`trace_on_cores`]);
/// `None` for one program, or a grid traced once for every instance with a symbolic id. Like
/// [`program_share`], asking marks the kernel as one that splits its work by program.
pub fn program_instance() -> Option<(usize, usize)> {
    with_builder(|b| {
        b.reads_program_id = true;
        if !b.concrete_instance() {
            return None;
        }
        let (mut k, mut n) = (0usize, 1usize);
        for (id, &size) in b.program_id.iter().zip(&b.grid) {
            let id = id.as_constant().unwrap_or(0).max(0) as usize;
            k = k * size + id;
            n *= size;
        }
        Some((k, n))
    })
}
