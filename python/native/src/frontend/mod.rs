//! The native half of the NKI Python frontend (`torch_nki.nki`): a `Tracer` that records one
//! call at a time into the Program IR (through `nki_core::lang::Recorder`, so each call runs the
//! same tile-language function and checks as a Rust kernel, with the Python line as its
//! location), and `Program`, a traced program Python can validate, simulate, cost, emit, and
//! compare with another.
//!
//! Operands arrive as plain tuples the Python package builds:
//! - a tile region: `(tile_id, p0, np, f0, nf)`;
//! - a DMA operand: `("tile", tile_id, p0, np, f0, nf)` or `("hbm", tensor_id, offset,
//!   [(size, stride), ...])` (a strided view in elements);
//! - a scalar operand: a `float` or a tile region;
//! - operators and activation functions by their `nl` names (`"add"`, `"exp"`).

mod program;

pub use program::Program;

use crate::errors::to_py_err;
use nki_core::affine::AffineExpr;
use nki_core::ir::{
    ActFn, BinOp, ElementwiseEngine, HbmId, LoopKind, ScalarOperand, TileId, TileRegion,
};
use nki_core::isa::{self, DmaArg};
use nki_core::lang::{InputSpec, Recorder, ViewDim};
use nki_core::language::{psum, sbuf};
use nki_core::loc::{SourceLoc, intern_file};
use nki_core::{DType, Target};
use pyo3::exceptions::{PyRuntimeError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyTuple;

/// `(tile_id, p0, np, f0, nf)`.
type RegionArg = (u32, usize, usize, usize, usize);

/// The location of a Python call (Python reports no column).
fn python_loc(file: &str, line: u32) -> SourceLoc {
    SourceLoc {
        file: intern_file(file),
        line,
        column: 0,
    }
}

fn region((tile, p0, np, f0, nf): RegionArg) -> TileRegion {
    TileRegion {
        tile: TileId(tile),
        p0,
        np,
        f0,
        nf,
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

fn binop(name: &str) -> PyResult<BinOp> {
    BinOp::from_nki_name(name).ok_or_else(|| {
        let known: Vec<&str> = BinOp::ALL.iter().map(|o| o.nki_name()).collect();
        PyValueError::new_err(format!(
            "nl.{name} is not an arithmetic or comparison operator here (known: {})",
            known.join(", ")
        ))
    })
}

fn actfn(name: &str) -> PyResult<ActFn> {
    ActFn::from_nki_name(name).ok_or_else(|| {
        let known: Vec<&str> = ActFn::ALL.iter().map(|f| f.nki_name()).collect();
        PyValueError::new_err(format!(
            "nl.{name} is not an activation function here (known: {})",
            known.join(", ")
        ))
    })
}

fn scalar(value: &Bound<'_, PyAny>) -> PyResult<ScalarOperand> {
    if let Ok(r) = value.extract::<RegionArg>() {
        return Ok(ScalarOperand::Column { region: region(r) });
    }
    Ok(ScalarOperand::Imm {
        value: value.extract::<f64>()? as f32,
    })
}

/// Records an NKI kernel call by call (see the module doc).
#[pyclass(module = "torch_nki._native", unsendable)]
pub struct Tracer {
    recorder: Option<Recorder>,
}

impl Tracer {
    fn recorder(&mut self) -> PyResult<&mut Recorder> {
        self.recorder
            .as_mut()
            .ok_or_else(|| PyRuntimeError::new_err("this trace has already finished"))
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
            "tile" => {
                let r: RegionArg = arg.get_slice(1, 6).extract()?;
                Ok(DmaArg::Tile(region(r)))
            }
            "hbm" => {
                let (_, id, offset, dims): (String, u32, i64, Vec<(usize, i64)>) = arg.extract()?;
                let dims = dims
                    .into_iter()
                    .map(|(size, stride)| ViewDim { size, stride })
                    .collect();
                let recorder = self.recorder()?;
                let name = recorder.name().to_string();
                recorder
                    .view(HbmId(id), AffineExpr::constant(offset), dims)
                    .map(DmaArg::Hbm)
                    .map_err(|e| to_py_err(e, &name))
            }
            other => Err(PyValueError::new_err(format!(
                "dma operand kind `{other}` (expected tile or hbm)"
            ))),
        }
    }
}

#[pymethods]
impl Tracer {
    /// Starts tracing kernel `name` for `target` with inputs `[(name, shape, dtype), ...]`.
    #[new]
    fn new(
        name: &str,
        target_name: &str,
        inputs: Vec<(String, Vec<usize>, String)>,
    ) -> PyResult<Self> {
        crate::guard::guard("Tracer.__new__", || {
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
            })
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
        crate::guard::guard("Tracer.output", || {
            let loc = python_loc(file, line);
            let recorder = self.recorder()?;
            let name = recorder.name().to_string();
            let d = dtype(&name, dtype_name)?;
            let id = recorder
                .output(&shape, d, loc)
                .map_err(|e| to_py_err(e, &name))?;
            Ok(id.0)
        })
    }

    /// Allocates a `[partitions, free]` tile in `buffer` (`sbuf` or `psum`); returns its id.
    fn tile(
        &mut self,
        partitions: usize,
        free: usize,
        dtype_name: &str,
        buffer: &str,
        file: &str,
        line: u32,
    ) -> PyResult<u32> {
        crate::guard::guard("Tracer.tile", || {
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
            let t = self.at(file, line, || alloc([partitions, free], d))?;
            Ok(t.id().0)
        })
    }

    /// Opens a loop scope of `trip` iterations (`affine` or `sequential`).
    fn open_loop(&mut self, trip: usize, kind: &str, file: &str, line: u32) -> PyResult<u32> {
        crate::guard::guard("Tracer.open_loop", || {
            let kind = match kind {
                "affine" => LoopKind::Affine,
                "sequential" => LoopKind::Sequential,
                other => {
                    return Err(PyValueError::new_err(format!(
                        "loop kind `{other}` (expected affine or sequential)"
                    )));
                }
            };
            let loc = python_loc(file, line);
            Ok(self.recorder()?.open_loop(trip, kind, loc).0)
        })
    }

    /// Closes the innermost loop scope.
    fn close_loop(&mut self) -> PyResult<()> {
        crate::guard::guard("Tracer.close_loop", || {
            let recorder = self.recorder()?;
            let name = recorder.name().to_string();
            recorder.close_loop().map_err(|e| to_py_err(e, &name))
        })
    }

    /// `nisa.dma_copy(dst, src)`.
    fn dma_copy(
        &mut self,
        dst: &Bound<'_, PyTuple>,
        src: &Bound<'_, PyTuple>,
        file: &str,
        line: u32,
    ) -> PyResult<()> {
        crate::guard::guard("Tracer.dma_copy", || {
            let (dst, src) = (self.dma_arg(dst)?, self.dma_arg(src)?);
            self.at(file, line, || isa::dma_copy(dst, src))
        })
    }

    /// `nisa.tensor_tensor(dst, data1, data2, op, engine)`, `engine` `"vector"` or `"gpsimd"`.
    #[allow(clippy::too_many_arguments)]
    fn tensor_tensor(
        &mut self,
        dst: RegionArg,
        data1: RegionArg,
        data2: RegionArg,
        op: &str,
        engine: &str,
        file: &str,
        line: u32,
    ) -> PyResult<()> {
        crate::guard::guard("Tracer.tensor_tensor", || {
            let op = binop(op)?;
            let engine = match engine {
                "vector" => ElementwiseEngine::Vector,
                "gpsimd" => ElementwiseEngine::GpSimd,
                other => {
                    return Err(PyValueError::new_err(format!(
                        "nisa.tensor_tensor: engine must be nisa.engine.vector or nisa.engine.gpsimd, got {other:?}"
                    )));
                }
            };
            self.at(file, line, || {
                isa::tensor_tensor(region(dst), region(data1), region(data2), op).on(engine)
            })
        })
    }

    /// `nisa.tensor_scalar(dst, data, op0, operand0, op1=None, operand1=None)`.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (dst, data, op0, operand0, op1, operand1, file, line))]
    fn tensor_scalar(
        &mut self,
        dst: RegionArg,
        data: RegionArg,
        op0: &str,
        operand0: &Bound<'_, PyAny>,
        op1: Option<&str>,
        operand1: Option<&Bound<'_, PyAny>>,
        file: &str,
        line: u32,
    ) -> PyResult<()> {
        crate::guard::guard("Tracer.tensor_scalar", || {
            let (op0, operand0) = (binop(op0)?, scalar(operand0)?);
            let second = match (op1, operand1) {
                (Some(op), Some(operand)) => Some((binop(op)?, scalar(operand)?)),
                (None, None) => None,
                _ => {
                    return Err(PyValueError::new_err(
                        "tensor_scalar: op1 and operand1 go together",
                    ));
                }
            };
            self.at(file, line, || {
                let recorded = isa::tensor_scalar(region(dst), region(data), op0, operand0);
                if let Some((op1, operand1)) = second {
                    recorded.then(op1, operand1);
                }
            })
        })
    }

    /// `nisa.scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1)`, with
    /// `reduce_op`/`reduce_res` its free-dim reduction.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (dst, data, op0, operand0, op1, operand1, reduce_op, reduce_res, file, line))]
    fn scalar_tensor_tensor(
        &mut self,
        dst: RegionArg,
        data: RegionArg,
        op0: &str,
        operand0: &Bound<'_, PyAny>,
        op1: &str,
        operand1: RegionArg,
        reduce_op: Option<&str>,
        reduce_res: Option<RegionArg>,
        file: &str,
        line: u32,
    ) -> PyResult<()> {
        crate::guard::guard("Tracer.scalar_tensor_tensor", || {
            let (op0, operand0, op1) = (binop(op0)?, scalar(operand0)?, binop(op1)?);
            let reduce = match (reduce_op, reduce_res) {
                (Some(op), Some(res)) => Some((binop(op)?, region(res))),
                (None, None) => None,
                _ => {
                    return Err(PyValueError::new_err(
                        "scalar_tensor_tensor: reduce_op and reduce_res go together",
                    ));
                }
            };
            let (dst, data, operand1) = (region(dst), region(data), region(operand1));
            self.at(file, line, || match reduce {
                Some((op, res)) => isa::scalar_tensor_tensor_reduce(
                    dst, data, op0, operand0, op1, operand1, op, res,
                ),
                None => isa::scalar_tensor_tensor(dst, data, op0, operand0, op1, operand1),
            })
        })
    }

    /// `nisa.activation(dst, op, data, bias, scale)` and, with `reduce_op`/`reduce_res`,
    /// `nisa.activation_reduce`.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (dst, op, data, bias, scale, reduce_op, reduce_res, file, line))]
    fn activation(
        &mut self,
        dst: RegionArg,
        op: &str,
        data: RegionArg,
        bias: Option<RegionArg>,
        scale: &Bound<'_, PyAny>,
        reduce_op: Option<&str>,
        reduce_res: Option<RegionArg>,
        file: &str,
        line: u32,
    ) -> PyResult<()> {
        crate::guard::guard("Tracer.activation", || {
            let (func, scale, bias) = (actfn(op)?, scalar(scale)?, bias.map(region));
            let reduce = match (reduce_op, reduce_res) {
                (Some(op), Some(res)) => Some((binop(op)?, region(res))),
                (None, None) => None,
                _ => {
                    return Err(PyValueError::new_err(
                        "activation_reduce: reduce_op and reduce_res go together",
                    ));
                }
            };
            self.at(file, line, || match reduce {
                Some((op, res)) => {
                    isa::activation_reduce(region(dst), func, region(data), op, res, bias, scale)
                }
                None => isa::activation(region(dst), func, region(data), bias, scale),
            })
        })
    }

    /// `nisa.tensor_reduce(dst, op, data, axis, negate)`.
    #[allow(clippy::too_many_arguments)]
    fn tensor_reduce(
        &mut self,
        dst: RegionArg,
        op: &str,
        data: RegionArg,
        axis: usize,
        negate: bool,
        file: &str,
        line: u32,
    ) -> PyResult<()> {
        crate::guard::guard("Tracer.tensor_reduce", || {
            let op = binop(op)?;
            self.at(file, line, || {
                isa::tensor_reduce(region(dst), op, region(data), axis, negate)
            })
        })
    }

    /// `nisa.bn_stats(dst, data)`.
    fn bn_stats(&mut self, dst: RegionArg, data: RegionArg, file: &str, line: u32) -> PyResult<()> {
        crate::guard::guard("Tracer.bn_stats", || {
            self.at(file, line, || isa::bn_stats(region(dst), region(data)))
        })
    }

    /// `nisa.bn_aggr(dst, data)`.
    fn bn_aggr(&mut self, dst: RegionArg, data: RegionArg, file: &str, line: u32) -> PyResult<()> {
        crate::guard::guard("Tracer.bn_aggr", || {
            self.at(file, line, || isa::bn_aggr(region(dst), region(data)))
        })
    }

    /// `nisa.tensor_copy(dst, src)`.
    fn tensor_copy(
        &mut self,
        dst: RegionArg,
        src: RegionArg,
        file: &str,
        line: u32,
    ) -> PyResult<()> {
        crate::guard::guard("Tracer.tensor_copy", || {
            self.at(file, line, || isa::tensor_copy(region(dst), region(src)))
        })
    }

    /// `nisa.memset(dst, value)`.
    fn memset(&mut self, dst: RegionArg, value: f64, file: &str, line: u32) -> PyResult<()> {
        crate::guard::guard("Tracer.memset", || {
            self.at(file, line, || isa::memset(region(dst), value as f32))
        })
    }

    /// `nisa.iota(dst, pattern=[[step, nf]], offset, channel_multiplier)` (the Python side
    /// reduces the pattern to its one `step`).
    #[allow(clippy::too_many_arguments)]
    fn iota(
        &mut self,
        dst: RegionArg,
        offset: i32,
        channel_multiplier: i32,
        step: i32,
        file: &str,
        line: u32,
    ) -> PyResult<()> {
        crate::guard::guard("Tracer.iota", || {
            self.at(file, line, || {
                isa::iota(region(dst), offset, channel_multiplier, step)
            })
        })
    }

    /// `nisa.range_select(dst, on_true_tile, comp_op0, comp_op1, bound0, bound1,
    /// reduce_cmd=reset_reduce, reduce_res, reduce_op, range_start, on_false_value)`.
    #[allow(clippy::too_many_arguments)]
    #[pyo3(signature = (dst, on_true_tile, comp_op0, comp_op1, bound0, bound1, reduce_res, reduce_op, range_start, on_false_value, file, line))]
    fn range_select(
        &mut self,
        dst: RegionArg,
        on_true_tile: RegionArg,
        comp_op0: &str,
        comp_op1: &str,
        bound0: RegionArg,
        bound1: RegionArg,
        reduce_res: Option<RegionArg>,
        reduce_op: &str,
        range_start: f64,
        on_false_value: f64,
        file: &str,
        line: u32,
    ) -> PyResult<()> {
        crate::guard::guard("Tracer.range_select", || {
            let (comp0, comp1, op) = (binop(comp_op0)?, binop(comp_op1)?, binop(reduce_op)?);
            self.at(file, line, || {
                isa::range_select(
                    region(dst),
                    region(on_true_tile),
                    comp0,
                    comp1,
                    region(bound0),
                    region(bound1),
                    reduce_res.map(region),
                    op,
                    range_start as f32,
                    on_false_value as f32,
                )
            })
        })
    }

    /// `nisa.nc_transpose(dst, data)`.
    fn nc_transpose(
        &mut self,
        dst: RegionArg,
        data: RegionArg,
        file: &str,
        line: u32,
    ) -> PyResult<()> {
        crate::guard::guard("Tracer.nc_transpose", || {
            self.at(file, line, || isa::nc_transpose(region(dst), region(data)))
        })
    }

    /// `nisa.nc_matmul(dst, stationary, moving, accumulate)`.
    #[allow(clippy::too_many_arguments)]
    fn nc_matmul(
        &mut self,
        dst: RegionArg,
        stationary: RegionArg,
        moving: RegionArg,
        accumulate: bool,
        file: &str,
        line: u32,
    ) -> PyResult<()> {
        crate::guard::guard("Tracer.nc_matmul", || {
            self.at(file, line, || {
                isa::nc_matmul(region(dst), region(stationary), region(moving), accumulate)
            })
        })
    }

    /// Ends the trace: the program returning tensors `outputs`.
    fn finish(&mut self, outputs: Vec<u32>) -> PyResult<Program> {
        crate::guard::guard("Tracer.finish", || {
            let recorder = self
                .recorder
                .take()
                .ok_or_else(|| PyRuntimeError::new_err("this trace has already finished"))?;
            let name = recorder.name().to_string();
            let ids: Vec<HbmId> = outputs.into_iter().map(HbmId).collect();
            let program = recorder.finish(&ids).map_err(|e| to_py_err(e, &name))?;
            Ok(Program::new(program))
        })
    }
}
