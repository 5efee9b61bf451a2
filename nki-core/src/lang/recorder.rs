//! Tracing driven from outside Rust: a [`Recorder`] owns a program builder and records one call
//! at a time, each with a source location the caller supplies.
//!
//! This is how the NKI Python frontend traces into the same [`Program`] IR as Rust kernels:
//! every `nl.ndarray`, `nisa.*` call and loop iteration in Python becomes one recorder call,
//! which runs the tile-language function Rust kernels use (same checks, same messages) with the
//! Python line as its location. Errors come back from the call that caused them.

use crate::affine::{AffineExpr, LoopVar};
use crate::dtype::DType;
use crate::error::NkiError;
use crate::ir::{HbmId, LoopControl, LoopKind, Program, RegisterId};
use crate::lang::context::{BUILDER, Builder, InputSpec, with_builder};
use crate::lang::hbm::{
    Hbm, HbmView, ViewDim, launch_hbm, private_hbm, shared_constant, shared_hbm,
};
use crate::loc::{SourceLoc, with_location};
use crate::target::Target;

/// A program being traced call by call (see the module doc).
pub struct Recorder {
    name: String,
    builder: Option<Builder>,
    tensors: Vec<Hbm>,
}

impl Recorder {
    /// Starts tracing kernel `name` for `target` with these inputs (tensor ids `0..inputs.len()`).
    pub fn new(name: &str, target: Target, inputs: &[InputSpec]) -> Recorder {
        let (builder, tensors) = Builder::new(target, inputs);
        Recorder {
            name: name.to_string(),
            builder: Some(builder),
            tensors,
        }
    }

    /// Sets the launch grid (`kernel[2, 3]` is `[2, 3]`), before anything is recorded. The
    /// kernel is then traced once per instance, in program-id order, each inside
    /// [`Recorder::open_grid_axis`] loops. A zero-sized axis is a trace error.
    pub fn set_grid(&mut self, grid: &[usize], loc: SourceLoc) -> Result<(), NkiError> {
        if let Some(axis) = grid.iter().position(|&n| n == 0) {
            return Err(NkiError::Trace {
                message: format!(
                    "kernel {}: launch grid {} has no programs along axis {axis}",
                    self.name,
                    crate::lang::grid::grid_text(grid)
                ),
                loc,
            });
        }
        let b = self.builder.as_mut().expect("not inside record");
        b.grid = grid.to_vec();
        b.program_id = vec![AffineExpr::constant(0); grid.len()];
        Ok(())
    }

    /// Opens the one-iteration grid loop of program id `index` along `axis` (a
    /// [`LoopKind::Grid`] loop; close it with [`Recorder::close_loop`]). Opening the last
    /// axis starts a program instance: the `shared_hbm` tensors it allocates are the first
    /// instance's, in the order that one allocated them (one set of outputs, shared by every
    /// instance; see [`crate::lang::instances`]). Axes are opened outermost first, ids in order.
    pub fn open_grid_axis(
        &mut self,
        axis: usize,
        index: usize,
        loc: SourceLoc,
    ) -> Result<(), NkiError> {
        let name = self.name.clone();
        self.builder
            .as_mut()
            .expect("not inside record")
            .open_instance_axis(&name, axis, index, loc)
    }

    /// Keeps a tensor just allocated for [`Recorder::view`], which finds tensors by id (a
    /// tensor handed back to a later grid instance is kept already); returns its id.
    fn keep(&mut self, hbm: Hbm) -> HbmId {
        let id = hbm.id();
        if id.0 as usize == self.tensors.len() {
            self.tensors.push(hbm);
        }
        id
    }

    /// The kernel's name.
    pub fn name(&self) -> &str {
        &self.name
    }

    /// The target being traced for.
    pub fn target(&self) -> Target {
        self.builder().target
    }

    fn builder(&self) -> &Builder {
        self.builder
            .as_ref()
            .expect("the builder is only lent out during `record`")
    }

    /// Runs tile-language code `f` (instructions, tile allocations) as if it were kernel source
    /// at `loc`. The first error it records, or a panic in it, is returned; the recorder stays
    /// usable either way.
    pub fn record<R>(&mut self, loc: SourceLoc, f: impl FnOnce() -> R) -> Result<R, NkiError> {
        let busy = BUILDER.with(|b| b.borrow().is_some());
        if busy {
            return Err(NkiError::Internal(format!(
                "kernel {}: cannot record while another trace is running on this thread",
                self.name
            )));
        }
        let builder = self.builder.take().expect("not re-entered: checked above");
        BUILDER.with(|b| *b.borrow_mut() = Some(builder));
        let result = with_location(loc, || {
            std::panic::catch_unwind(std::panic::AssertUnwindSafe(f))
        });
        let mut builder = BUILDER
            .with(|b| b.borrow_mut().take())
            .expect("f cannot remove the builder");
        let error = builder.take_error(&self.name);
        self.builder = Some(builder);
        match (result, error) {
            (_, Some(e)) => Err(e),
            (Ok(r), None) => Ok(r),
            (Err(panic), None) => Err(NkiError::Internal(format!(
                "kernel {} panicked while tracing at {loc}: {}",
                self.name,
                crate::lang::context::panic_message(panic.as_ref())
            ))),
        }
    }

    /// Starts (`true`) or ends recording into the launch's prologue: what is recorded in
    /// between goes to the top of the program, before every program instance (after what the
    /// prologue holds already), whichever loop or instance is open. The frontend records the
    /// copy of a kernel argument some instance writes there, so that instances traced before
    /// that write, which read the copy too, see it made.
    pub fn set_launch_prologue(&mut self, on: bool) {
        self.builder
            .as_mut()
            .expect("not inside record")
            .set_launch_prologue(on);
    }

    /// Allocates an output tensor in `shared_hbm` (as `nl.ndarray(..., buffer=nl.shared_hbm)`).
    pub fn output(
        &mut self,
        shape: &[usize],
        dtype: DType,
        loc: SourceLoc,
    ) -> Result<HbmId, NkiError> {
        let hbm = self.record(loc, || shared_hbm(shape, dtype))?;
        Ok(self.keep(hbm))
    }

    /// Allocates an output in `shared_hbm` for the whole launch, in whichever program instance
    /// asks first: not one of the tensors every instance must allocate alike (the copy a kernel
    /// argument gets when one instance first writes it, which the others may never do).
    pub fn launch_output(
        &mut self,
        shape: &[usize],
        dtype: DType,
        loc: SourceLoc,
    ) -> Result<HbmId, NkiError> {
        let hbm = self.record(loc, || launch_hbm(shape, dtype, loc))?;
        Ok(self.keep(hbm))
    }

    /// Scratch device memory private to the current program instance (`nl.private_hbm`,
    /// `nl.hbm`); returns its tensor id. Every instance of a launch grid gets its own.
    pub fn scratch(
        &mut self,
        shape: &[usize],
        dtype: DType,
        loc: SourceLoc,
    ) -> Result<HbmId, NkiError> {
        let hbm = self.record(loc, || private_hbm(shape, dtype))?;
        Ok(self.keep(hbm))
    }

    /// A `shared_constant` holding `values` (one per element, row-major); returns its id.
    pub fn constant(
        &mut self,
        shape: &[usize],
        dtype: DType,
        values: &[f32],
        loc: SourceLoc,
    ) -> Result<HbmId, NkiError> {
        let hbm = self.record(loc, || shared_constant(shape, dtype, values))?;
        Ok(self.keep(hbm))
    }

    /// A strided view of tensor `id`: element `[i0, i1, ...]` of the view is flat element
    /// `offset + Σ ik·dims[k].stride` of the tensor. Bounds are checked by validation.
    pub fn view(
        &self,
        id: HbmId,
        offset: AffineExpr,
        dims: Vec<ViewDim>,
    ) -> Result<HbmView, NkiError> {
        let hbm = self.tensors.get(id.0 as usize).ok_or_else(|| {
            NkiError::Internal(format!("kernel {}: no tensor #{}", self.name, id.0))
        })?;
        Ok(hbm.strided_view(offset, dims))
    }

    /// Opens a loop of `trip` iterations; its statements go into the loop's body until
    /// [`Recorder::close_loop`].
    pub fn open_loop(&mut self, trip: usize, kind: LoopKind, loc: SourceLoc) -> LoopVar {
        self.builder
            .as_mut()
            .expect("not inside record")
            .open_loop(trip, kind, loc)
    }

    /// Opens a device loop (`nl.dynamic_range`, `nl.fori_loop`, `nl.while_loop`) at `loc`; its
    /// statements go into its body until [`Recorder::close_loop`]. A counted loop gets a new
    /// index register, returned (`None` for a `while`); the `index` of `control` is ignored.
    /// A register of another trace or a zero step is a trace error.
    pub fn open_device_loop(
        &mut self,
        control: LoopControl,
        loc: SourceLoc,
    ) -> Result<Option<RegisterId>, NkiError> {
        self.record(loc, || {
            with_builder(|b| {
                let (control, index) = match control {
                    LoopControl::Range {
                        start, stop, step, ..
                    } => {
                        let index = b.add_register("", loc);
                        let control = LoopControl::Range {
                            start,
                            stop,
                            step,
                            index,
                        };
                        (control, Some(index))
                    }
                    c @ LoopControl::While { .. } => (c, None),
                };
                crate::lang::loops::open_device_loop(b, control, loc).and(index)
            })
        })
    }

    /// Closes the innermost loop (static or device).
    pub fn close_loop(&mut self) -> Result<(), NkiError> {
        let closed = self
            .builder
            .as_mut()
            .expect("not inside record")
            .close_loop();
        if closed {
            Ok(())
        } else {
            Err(NkiError::Internal(format!(
                "kernel {}: close_loop without an open loop",
                self.name
            )))
        }
    }

    /// The finished program, returning `outputs` (tensors allocated with [`Recorder::output`]).
    /// `loc` is the kernel's (its `def` line): where an error about the returned tensors points
    /// when the tensor has no line of its own.
    pub fn finish(mut self, outputs: &[HbmId], loc: SourceLoc) -> Result<Program, NkiError> {
        let builder = self.builder.take().expect("not inside record");
        builder.finish(&self.name, outputs, loc)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::ir::{Op, Stmt, TileRegion};
    use crate::isa::{dma_copy, tensor_scalar};
    use crate::language::sbuf;
    use crate::loc::intern_file;

    fn at(line: u32) -> SourceLoc {
        SourceLoc {
            file: intern_file("kernel.py"),
            line,
            column: 0,
        }
    }

    fn input(shape: &[usize]) -> InputSpec {
        InputSpec {
            name: "x".into(),
            shape: shape.to_vec(),
            dtype: DType::F32,
        }
    }

    #[test]
    fn records_calls_with_their_locations() {
        let mut r = Recorder::new("k", Target::Trn2, &[input(&[4, 8])]);
        let out = r.output(&[4, 8], DType::F32, at(2)).unwrap();
        let var = r.open_loop(1, LoopKind::Affine, at(3));
        let tile = r.record(at(4), || sbuf([4, 8], DType::F32)).unwrap();
        let src = r
            .view(
                HbmId(0),
                AffineExpr::constant(0),
                vec![
                    ViewDim { size: 4, stride: 8 },
                    ViewDim { size: 8, stride: 1 },
                ],
            )
            .unwrap();
        r.record(at(5), || dma_copy(&tile, src)).unwrap();
        r.record(at(6), || {
            tensor_scalar(&tile, &tile, crate::ir::BinOp::Add, 1.0);
        })
        .unwrap();
        let dst = r
            .view(
                out,
                AffineExpr::constant(0),
                vec![
                    ViewDim { size: 4, stride: 8 },
                    ViewDim { size: 8, stride: 1 },
                ],
            )
            .unwrap();
        r.record(at(7), || dma_copy(dst, &tile)).unwrap();
        r.close_loop().unwrap();
        let p = r.finish(&[out], at(1)).unwrap();
        assert_eq!(p.loops.len(), 1);
        assert_eq!(p.loops[0].loc, at(3));
        let Stmt::Loop { var: v, body } = &p.body[0] else {
            panic!("expected the loop, got {:?}", p.body[0]);
        };
        assert_eq!(*v, var);
        let lines: Vec<u32> = body
            .iter()
            .filter_map(|s| match s {
                Stmt::Inst(i) => Some(i.loc.line),
                _ => None,
            })
            .collect();
        assert_eq!(lines, [5, 6, 7]);
        assert_eq!(p.tiles[0].loc, at(4));
        assert!(matches!(
            body[1],
            Stmt::Inst(crate::ir::Instruction {
                op: Op::DmaCopy { .. },
                ..
            })
        ));
    }

    #[test]
    fn errors_come_back_from_the_call_that_caused_them() {
        let mut r = Recorder::new("k", Target::Trn2, &[input(&[4, 8])]);
        let a = r.record(at(1), || sbuf([4, 8], DType::F32)).unwrap();
        let b = r.record(at(2), || sbuf([4, 4], DType::F32)).unwrap();
        let err = r
            .record(at(3), || crate::isa::tensor_copy(&a, &b))
            .unwrap_err();
        let NkiError::Trace { message, loc } = err else {
            panic!("expected a trace error, got {err:?}");
        };
        assert_eq!(loc, at(3));
        assert!(message.contains("kernel k: tensor_copy"), "{message}");
        // The recorder goes on: a later good call records.
        r.record(at(4), || crate::isa::tensor_copy(&a, &a)).unwrap();
        let panic = r.record(at(5), || panic!("boom")).unwrap_err();
        assert!(panic.to_string().contains("boom"), "{panic}");
        assert!(r.close_loop().is_err());
        assert_eq!(r.finish(&[], at(1)).unwrap().instruction_count(), 1);
    }

    #[test]
    fn tiles_from_another_trace_and_regions_outside_a_tile_are_trace_errors() {
        let mut first = Recorder::new("k", Target::Trn2, &[input(&[4, 8])]);
        let mut second = Recorder::new("k", Target::Trn2, &[input(&[4, 8])]);
        let _own = second.record(at(1), || sbuf([4, 8], DType::F32)).unwrap();
        let a = first.record(at(1), || sbuf([4, 8], DType::F32)).unwrap();
        let b = first.record(at(2), || sbuf([4, 8], DType::F32)).unwrap();
        // `b` is tile #1 of the first trace; the second has only tile #0.
        let err = second
            .record(at(3), || crate::isa::memset(&b, 0.0))
            .unwrap_err();
        let NkiError::Trace { message, loc } = err else {
            panic!("expected a trace error, got {err:?}");
        };
        assert_eq!(loc, at(3));
        assert!(
            message.contains("does not belong to this kernel's trace"),
            "{message}"
        );
        let outside = TileRegion {
            f0: 4,
            ..a.region()
        };
        let err = first
            .record(at(4), || crate::isa::memset(outside, 0.0))
            .unwrap_err()
            .to_string();
        assert!(err.contains("elements 4..+8 reach outside tile"), "{err}");
        let err = first
            .record(at(5), || {
                crate::isa::dma_copy(
                    &a,
                    TileRegion {
                        p0: 3,
                        ..a.region()
                    },
                )
            })
            .unwrap_err()
            .to_string();
        assert!(err.contains("dma_copy src: partitions 3..+4"), "{err}");
    }

    #[test]
    fn unclosed_loops_and_inputs_as_outputs_are_errors() {
        let mut r = Recorder::new("k", Target::Trn2, &[input(&[4, 8])]);
        r.open_loop(2, LoopKind::Sequential, at(1));
        assert!(
            r.finish(&[], at(1))
                .unwrap_err()
                .to_string()
                .contains("still open")
        );
        let r = Recorder::new("k", Target::Trn2, &[input(&[4, 8])]);
        let e = r.finish(&[HbmId(0)], at(9)).unwrap_err();
        assert!(e.to_string().contains("returned input `x`"), "{e}");
        // An input has no line of its own: the error points at the kernel.
        assert!(e.to_string().contains("kernel.py:9"), "{e}");
    }
}
