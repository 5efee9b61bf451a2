//! The native half of the NKI Python frontend (`torch_nki.nki`): a `Tracer` that records one
//! call at a time into the Program IR (through `nki_core::lang::Recorder`, so each call runs the
//! same tile-language function and checks as a Rust kernel, with the Python line as its
//! location), and `Program`, a traced program Python can validate, simulate, cost, emit, and
//! compare with another.
//!
//! Each `nisa.<name>(...)` call arrives through one entry point, [`Tracer::record`]: the
//! Python side builds every `nisa` function from the instruction declarations of `nki_spec`
//! ([`nki_spec_json()`]) and encodes the arguments uniformly ([`args`]); [`instructions`] maps each
//! implemented instruction onto its tile-language function.

mod args;
mod instructions;
mod program;
mod registers;
mod written;

pub use program::Program;

use crate::errors::to_py_err;
use crate::guard::entry_point;
use args::Args;
use nki_core::affine::AffineExpr;
use nki_core::ir::{ActFn, BinOp, HbmId, LoopControl, LoopKind, RegisterId, RegisterValue};
use nki_core::isa::DmaArg;
use nki_core::lang::{InputSpec, Recorder, ViewDim};
use nki_core::language::{psum, sbuf};
use nki_core::loc::{SourceLoc, intern_file};
use nki_core::{DType, Target};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::{PyDict, PyTuple};

/// The location of a Python call (Python reports no column).
fn python_loc(file: &str, line: u32) -> SourceLoc {
    SourceLoc {
        file: intern_file(file),
        line,
        column: 0,
    }
}

fn target(name: &str) -> PyResult<Target> {
    Target::from_name(name).ok_or_else(|| {
        PyValueError::new_err(format!("unknown target `{name}` (known: trn1, trn2, trn3)"))
    })
}

fn dtype(kernel: &str, name: &str) -> PyResult<DType> {
    crate::args::dtype(kernel, name)
}

/// The NKI 0.7 API as declared in `nki_spec`, as JSON: `{"instructions", "enums",
/// "functions", "dtypes", "buffers", "tile_sizes", "operators", "activations", "other_names"}`,
/// plus the `nl` names of the operators and activation functions the simulator implements
/// (`"implemented_operators"`, `"implemented_activations"`) and each target's NeuronCore
/// version (`"targets"`).
/// The frontend builds `nki.isa` from it, and the coverage table lists it.
#[entry_point]
pub fn nki_spec_json() -> PyResult<String> {
    let spec = serde_json::json!({
        "instructions": ::nki_spec::INSTRUCTIONS,
        "enums": ::nki_spec::ENUMS,
        "functions": ::nki_spec::FUNCTIONS,
        "dtypes": ::nki_spec::DTYPES,
        "buffers": ::nki_spec::BUFFERS,
        "tile_sizes": ::nki_spec::TILE_SIZES,
        "operators": ::nki_spec::OPERATORS,
        "activations": ::nki_spec::ACTIVATIONS,
        "other_names": ::nki_spec::OTHER_NAMES,
        // What the simulator implements, by `nl` name: operators and activation functions
        // the instructions above accept (`nl.divide` is an operator here though NKI 0.7's
        // operator table lacks it; docs/nki-coverage.md says so).
        // The destinations each instruction also reads (`Op::READS_DESTINATION`).
        "reads_destination": nki_core::ir::Op::READS_DESTINATION
            .iter()
            .filter(|(_, fields)| !fields.is_empty())
            .map(|(name, fields)| (*name, *fields))
            .collect::<std::collections::BTreeMap<_, _>>(),
        "implemented_operators": BinOp::ALL.iter().map(|o| o.nl_name()).collect::<Vec<_>>(),
        "implemented_activations": ActFn::ALL.iter().map(|f| f.nl_name()).collect::<Vec<_>>(),
        // Each target with its NeuronCore version (`nisa.get_nc_version()`).
        "targets": Target::ALL.map(|t| (t.name(), t.nc_version().name())),
    });
    Ok(spec.to_string())
}

/// Records an NKI kernel call by call (see the module doc).
#[pyclass(module = "torch_nki._native", unsendable)]
pub struct Tracer {
    recorder: Option<Recorder>,
    /// The tile elements recorded instructions have written (`nc_matmul(accumulate=None)`
    /// decides by them).
    written: written::Written,
}

impl Tracer {
    fn recorder(&mut self) -> PyResult<&mut Recorder> {
        self.recorder
            .as_mut()
            .ok_or_else(|| PyRuntimeError::new_err("this trace has already finished"))
    }

    /// An HBM tensor of `shape` allocated by `allocate` (an output or scratch) at `file:line`;
    /// its id.
    fn allocate_hbm(
        &mut self,
        shape: &[usize],
        dtype_name: &str,
        (file, line): (&str, u32),
        allocate: fn(
            &mut Recorder,
            &[usize],
            DType,
            SourceLoc,
        ) -> Result<HbmId, nki_core::NkiError>,
    ) -> PyResult<u32> {
        let loc = python_loc(file, line);
        let recorder = self.recorder()?;
        let name = recorder.name().to_string();
        let d = dtype(&name, dtype_name)?;
        let id = allocate(recorder, shape, d, loc).map_err(|e| to_py_err(e, &name))?;
        Ok(id.0)
    }

    /// Runs `f` as kernel source at `file:line`, mapping its error to the Python exception.
    fn at<R>(&mut self, file: &str, line: u32, f: impl FnOnce() -> R) -> PyResult<R> {
        let loc = python_loc(file, line);
        let recorder = self.recorder()?;
        let name = recorder.name().to_string();
        recorder.record(loc, f).map_err(|e| to_py_err(e, &name))
    }

    fn dma_arg(&mut self, arg: &Bound<'_, PyTuple>) -> PyResult<DmaArg> {
        let kind: String = arg.get_item(0)?.extract()?;
        match kind.as_str() {
            "tile" => Ok(DmaArg::Tile(args::decode_region(arg)?)),
            "hbm" => {
                let (id, offset, dims): (u32, i64, Vec<(usize, i64)>) =
                    arg.get_slice(1, 4).extract()?;
                let dims = dims
                    .into_iter()
                    .map(|(size, stride)| ViewDim { size, stride })
                    .collect();
                // A runtime offset: `(kind, index tile operand, scale)` (see `_values.HbmView`).
                let indirect = match arg.len() > 4 {
                    true => arg.get_item(4)?,
                    false => arg.py().None().into_bound(arg.py()),
                };
                let recorder = self.recorder()?;
                let name = recorder.name().to_string();
                let view = recorder
                    .view(HbmId(id), AffineExpr::constant(offset), dims)
                    .map_err(|e| to_py_err(e, &name))?;
                if indirect.is_none() {
                    return Ok(DmaArg::Hbm(view));
                }
                let (kind, index, scale): (String, Bound<'_, PyAny>, i64) = indirect.extract()?;
                if kind == "register" {
                    let (_, reg): (String, u32) = index.extract()?;
                    return Ok(DmaArg::Hbm(view.register_offset(RegisterId(reg), scale)));
                }
                let index = args::decode_region(&index)?;
                Ok(DmaArg::Hbm(match kind.as_str() {
                    "scalar" => view.scalar_offset(index, scale),
                    _ => view.vector_offset(index, scale),
                }))
            }
            other => Err(PyValueError::new_err(format!(
                "dma operand kind `{other}` (expected tile or hbm)"
            ))),
        }
    }
}

#[entry_point]
impl Tracer {
    /// Starts tracing kernel `name` for `target` with inputs `[(name, shape, dtype), ...]`.
    #[new]
    fn new(
        name: &str,
        target_name: &str,
        inputs: Vec<(String, Vec<usize>, String)>,
    ) -> PyResult<Self> {
        let inputs = inputs
            .into_iter()
            .map(|(param, shape, d)| {
                Ok(InputSpec {
                    name: param,
                    shape,
                    dtype: dtype(name, &d)?,
                })
            })
            .collect::<PyResult<Vec<_>>>()?;
        Ok(Tracer {
            recorder: Some(Recorder::new(name, target(target_name)?, &inputs)),
            written: written::Written::default(),
        })
    }

    /// Allocates an output in `shared_hbm`; returns its tensor id.
    fn output(
        &mut self,
        shape: Vec<usize>,
        dtype_name: &str,
        file: &str,
        line: u32,
    ) -> PyResult<u32> {
        self.allocate_hbm(&shape, dtype_name, (file, line), Recorder::output)
    }

    /// An output in `shared_hbm` for the whole launch (the copy of a kernel argument some
    /// program instance writes: `Recorder::launch_output`); returns its tensor id.
    fn launch_output(
        &mut self,
        shape: Vec<usize>,
        dtype_name: &str,
        file: &str,
        line: u32,
    ) -> PyResult<u32> {
        self.allocate_hbm(&shape, dtype_name, (file, line), Recorder::launch_output)
    }

    /// Starts (`True`) or ends recording into the launch's prologue, the top of the program
    /// before every program instance (`Recorder::set_launch_prologue`).
    fn launch_prologue(&mut self, on: bool) -> PyResult<()> {
        self.recorder()?.set_launch_prologue(on);
        Ok(())
    }

    /// Records the copy that keeps a dtype view in step with the memory it views (`dst`'s
    /// bytes become `src`'s, read as `dst`'s dtype; `isa::DmaCopyArgs::reinterpret`): `dst`
    /// and `src` are DMA operand tuples, tiles or HBM views, with the same rows and bytes per
    /// row. The device runs nothing for it (the view is that memory).
    fn reinterpret_copy(
        &mut self,
        dst: Bound<'_, PyTuple>,
        src: Bound<'_, PyTuple>,
        file: &str,
        line: u32,
    ) -> PyResult<()> {
        let (dst, src) = (self.dma_arg(&dst)?, self.dma_arg(&src)?);
        if let DmaArg::Tile(region) = &dst {
            self.written.mark(region);
        }
        let args = nki_core::isa::DmaCopyArgs {
            reinterpret: true,
            ..nki_core::isa::DmaCopyArgs::default()
        };
        self.at(file, line, || nki_core::isa::dma_copy_with(dst, src, args))
    }

    /// Scratch device memory private to the current program instance (`nl.private_hbm`,
    /// `nl.hbm`) of `shape`; returns its tensor id.
    fn scratch(
        &mut self,
        shape: Vec<usize>,
        dtype_name: &str,
        file: &str,
        line: u32,
    ) -> PyResult<u32> {
        self.allocate_hbm(&shape, dtype_name, (file, line), Recorder::scratch)
    }

    /// A `shared_constant` of `shape` holding `values` (row-major, rounded to the dtype);
    /// returns its tensor id.
    fn constant(
        &mut self,
        shape: Vec<usize>,
        dtype_name: &str,
        values: Vec<f64>,
        file: &str,
        line: u32,
    ) -> PyResult<u32> {
        let loc = python_loc(file, line);
        let recorder = self.recorder()?;
        let name = recorder.name().to_string();
        let d = dtype(&name, dtype_name)?;
        let values: Vec<f32> = values.into_iter().map(|v| v as f32).collect();
        let id = recorder
            .constant(&shape, d, &values, loc)
            .map_err(|e| to_py_err(e, &name))?;
        Ok(id.0)
    }

    /// Allocates a `[partitions, free]` tile in `buffer` (`sbuf` or `psum`); returns its id.
    #[pyo3(signature = (partitions, free, dtype_name, buffer, file, line, address=None))]
    #[allow(clippy::too_many_arguments)]
    fn tile(
        &mut self,
        partitions: usize,
        free: usize,
        dtype_name: &str,
        buffer: &str,
        file: &str,
        line: u32,
        address: Option<(usize, usize)>,
    ) -> PyResult<u32> {
        let name = self.recorder()?.name().to_string();
        let d = dtype(&name, dtype_name)?;
        let alloc = match buffer {
            "sbuf" => sbuf,
            "psum" => psum,
            other => {
                return Err(PyValueError::new_err(format!(
                    "tile buffer `{other}` (expected sbuf or psum)"
                )));
            }
        };
        let t = self.at(file, line, || {
            let t = alloc([partitions, free], d);
            if let Some(at) = address {
                t.place(at);
            }
            t
        })?;
        Ok(t.id().0)
    }

    /// Opens a loop scope of `trip` iterations (`affine` or `sequential`). `invocation` tells
    /// apart the loops opened at one line: the frontend opens every iteration of an
    /// `affine_range` as a scope of its own, and `nki_core::ir::affine_runs` takes consecutive
    /// scopes of one location as one loop, so back-to-back invocations must differ (it becomes
    /// the location's column, which messages do not print).
    #[pyo3(signature = (trip, kind, file, line, invocation = 0))]
    fn open_loop(
        &mut self,
        trip: usize,
        kind: &str,
        file: &str,
        line: u32,
        invocation: u32,
    ) -> PyResult<u32> {
        let kind = match kind {
            "affine" => LoopKind::Affine,
            "sequential" => LoopKind::Sequential,
            other => {
                return Err(PyValueError::new_err(format!(
                    "loop kind `{other}` (expected affine or sequential)"
                )));
            }
        };
        let loc = SourceLoc {
            column: invocation,
            ..python_loc(file, line)
        };
        Ok(self.recorder()?.open_loop(trip, kind, loc).0)
    }

    /// Sets the launch grid (`kernel[2, 3]` is `[2, 3]`) before anything is recorded; the
    /// kernel is then traced once per program instance inside `open_grid_axis` scopes.
    fn set_grid(&mut self, grid: Vec<usize>, file: &str, line: u32) -> PyResult<()> {
        let recorder = self.recorder()?;
        let name = recorder.name().to_string();
        recorder
            .set_grid(&grid, python_loc(file, line))
            .map_err(|e| to_py_err(e, &name))
    }

    /// Opens the scope of program id `index` along grid `axis` (closed by `close_loop`); the
    /// last axis's scope is one program instance.
    fn open_grid_axis(&mut self, axis: usize, index: usize, file: &str, line: u32) -> PyResult<()> {
        let recorder = self.recorder()?;
        let name = recorder.name().to_string();
        recorder
            .open_grid_axis(axis, index, python_loc(file, line))
            .map_err(|e| to_py_err(e, &name))
    }

    /// Closes the innermost loop scope.
    fn close_loop(&mut self) -> PyResult<()> {
        let recorder = self.recorder()?;
        let name = recorder.name().to_string();
        recorder.close_loop().map_err(|e| to_py_err(e, &name))
    }

    /// Records `nisa.<name>(**values)` called at `file:line`: `values` holds every keyword of
    /// the instruction's declaration (defaults applied), encoded as `args` describes. Returns
    /// the id of the register `register_alloc` allocates (`None` for other instructions).
    fn record(
        &mut self,
        name: &str,
        values: Bound<'_, PyDict>,
        file: &str,
        line: u32,
    ) -> PyResult<Option<u32>> {
        let spec = ::nki_spec::instruction(name).ok_or_else(|| {
            PyValueError::new_err(format!("nisa.{name} is not an NKI instruction"))
        })?;
        let a = Args::new(spec, values, format!("{file}:{line}"))?;
        let written = a.written_regions()?;
        let register = if registers::NAMES.contains(&name) {
            registers::record(self, &a, name, file, line)?
        } else {
            instructions::record(self, &a, file, line)?;
            None
        };
        for region in &written {
            self.written.mark(region);
        }
        Ok(register)
    }

    /// Opens a device loop at `file:line`: `kind` `range` (`nl.dynamic_range` /
    /// `nl.fori_loop`: `start` and `stop` registers `("reg", id)` or int32s, `step` a positive
    /// int) or `while` (`nl.while_loop`: `start` the condition register). Returns the index
    /// register of a range (`None` for a while); [`Tracer::close_loop`] closes it.
    fn open_device_loop(
        &mut self,
        kind: &str,
        start: Bound<'_, PyAny>,
        stop: Bound<'_, PyAny>,
        step: i64,
        file: &str,
        line: u32,
    ) -> PyResult<Option<u32>> {
        let bound = |v: &Bound<'_, PyAny>, what: &str| -> PyResult<RegisterValue> {
            registers::decode_register(v, true).ok_or_else(|| {
                pyo3::exceptions::PyTypeError::new_err(format!(
                    "{what} must be a VirtualRegister or an int32 ({file}:{line})"
                ))
            })
        };
        let control = match kind {
            "range" => {
                let step = u32::try_from(step).ok().filter(|s| *s > 0).ok_or_else(|| {
                    PyValueError::new_err(format!(
                        "the step of a device loop must be a positive int, got {step} \
                         ({file}:{line})"
                    ))
                })?;
                LoopControl::Range {
                    start: bound(&start, "start")?,
                    stop: bound(&stop, "stop")?,
                    step,
                    index: RegisterId(0),
                }
            }
            "while" => match bound(&start, "the condition")? {
                RegisterValue::Reg { reg } => LoopControl::While { cond: reg },
                RegisterValue::Imm { .. } => {
                    return Err(pyo3::exceptions::PyTypeError::new_err(format!(
                        "the condition of a while loop must be a VirtualRegister \
                         ({file}:{line})"
                    )));
                }
            },
            other => {
                return Err(PyValueError::new_err(format!(
                    "device loop kind `{other}` (expected range or while)"
                )));
            }
        };
        let loc = python_loc(file, line);
        let recorder = self.recorder()?;
        let name = recorder.name().to_string();
        let index = recorder
            .open_device_loop(control, loc)
            .map_err(|e| to_py_err(e, &name))?;
        Ok(index.map(|r| r.0))
    }

    /// Ends the trace: the program returning tensors `outputs`; `file:line` is the kernel's
    /// `def`, where an error about what it returned points.
    fn finish(&mut self, outputs: Vec<u32>, file: &str, line: u32) -> PyResult<Program> {
        let recorder = self
            .recorder
            .take()
            .ok_or_else(|| PyRuntimeError::new_err("this trace has already finished"))?;
        let name = recorder.name().to_string();
        let ids: Vec<HbmId> = outputs.into_iter().map(HbmId).collect();
        let program = recorder
            .finish(&ids, python_loc(file, line))
            .map_err(|e| to_py_err(e, &name))?;
        // Every element of every output stored (docs/design-notes.md, "Output coverage").
        nki_core::coverage::check_traced_output_coverage(&program, python_loc("<kernel>", 0))
            .map_err(|e| to_py_err(e, &name))?;
        Ok(Program::new(program))
    }
}
