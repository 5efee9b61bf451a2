//! `Program`: a traced program Python can validate, simulate, cost, emit and compare.

use crate::errors::to_py_err;
use crate::guard::entry_point;
use nki_core::NkiError;
use nki_core::sim::{IterationOrder, SimOptions};
use pyo3::exceptions::{PyMemoryError, PyValueError};
use pyo3::prelude::*;
use pyo3::types::PyBytes;
use std::sync::Arc;

/// A traced program (from the frontend, or a registry op's Rust kernel).
#[pyclass(module = "torch_nki._native", frozen)]
pub struct Program {
    program: Arc<nki_core::ir::Program>,
}

impl Program {
    /// Wraps a program.
    pub fn new(program: nki_core::ir::Program) -> Program {
        Program {
            program: Arc::new(program),
        }
    }

    fn err(&self, e: NkiError) -> PyErr {
        to_py_err(e, &self.program.name)
    }
}

#[entry_point]
impl Program {
    /// The kernel's name.
    #[getter]
    fn name(&self) -> String {
        self.program.name.clone()
    }

    /// The target it was traced for.
    #[getter]
    fn target(&self) -> &'static str {
        self.program.target.name()
    }

    /// The launch grid (`()` without one).
    #[getter]
    fn grid(&self) -> Vec<usize> {
        self.program.grid.clone()
    }

    /// `[(name, shape, dtype), ...]` of the inputs, in parameter order.
    fn inputs(&self) -> Vec<(String, Vec<usize>, &'static str)> {
        self.program
            .inputs()
            .map(|(_, d)| (d.name.clone(), d.shape.clone(), d.dtype.name()))
            .collect()
    }

    /// `[(shape, dtype), ...]` of the outputs, in return order.
    fn outputs(&self) -> Vec<(Vec<usize>, &'static str)> {
        self.program
            .outputs
            .iter()
            .map(|o| {
                let d = &self.program.hbm[o.0 as usize];
                (d.shape.clone(), d.dtype.name())
            })
            .collect()
    }

    /// Instructions in the program tree (each loop body counted once).
    fn instruction_count(&self) -> usize {
        self.program.instruction_count()
    }

    /// Checks every hardware constraint of the target (`ValidationError` naming the rule and
    /// the kernel line); returns the warnings of what a rule could not decide either way
    /// (`nki_core::validate::validate_with_warnings`), as text.
    fn validate(&self, py: Python<'_>) -> PyResult<Vec<String>> {
        let program = Arc::clone(&self.program);
        let warnings = py
            .detach(move || nki_core::validate::validate_with_warnings(&program))
            .map_err(|e| self.err(e))?;
        Ok(warnings.iter().map(ToString::to_string).collect())
    }

    /// Runs the program on the simulator: `inputs` are little-endian buffers of the input
    /// dtypes (in parameter order); returns the outputs as `bytes`. `order` is the order of
    /// `affine_range` iterations: `program` (the default), `reversed`, `shuffled` or
    /// `shuffled:SEED` (`ValueError` otherwise). With `trap_nonfinite`, the run stops at the
    /// first instruction that makes a finite tile element NaN or infinite (a
    /// `SimulationError` naming it and what it read).
    #[pyo3(signature = (inputs, order = "program", trap_nonfinite = false))]
    fn simulate<'py>(
        &self,
        py: Python<'py>,
        inputs: Vec<Bound<'py, PyBytes>>,
        order: &str,
        trap_nonfinite: bool,
    ) -> PyResult<Vec<Bound<'py, PyBytes>>> {
        let order = IterationOrder::parse(order).map_err(PyValueError::new_err)?;
        // Copied for the detached run; a copy the host cannot allocate is a MemoryError, not
        // an abort.
        let inputs = inputs
            .iter()
            .map(|b| {
                let bytes = b.as_bytes();
                let mut copy = Vec::new();
                copy.try_reserve_exact(bytes.len()).map_err(|_| {
                    PyMemoryError::new_err(format!(
                        "kernel {}: cannot copy a {}-byte input for the simulator",
                        self.program.name,
                        bytes.len()
                    ))
                })?;
                copy.extend_from_slice(bytes);
                Ok(copy)
            })
            .collect::<PyResult<Vec<Vec<u8>>>>()?;
        let program = Arc::clone(&self.program);
        let result = py.detach(move || {
            let inputs: Vec<&[u8]> = inputs.iter().map(Vec::as_slice).collect();
            let opts = SimOptions {
                order,
                trap_nonfinite,
                ..SimOptions::default()
            };
            nki_core::sim::simulate_to_vecs(&program, &inputs, opts)
        });
        let bufs = result.map_err(|e| self.err(e))?;
        // An output Python cannot allocate is a MemoryError naming it (`PyBytes::new` would
        // panic on the null pointer).
        bufs.iter()
            .enumerate()
            .map(|(i, b)| {
                PyBytes::new_with(py, b.len(), |dst| {
                    dst.copy_from_slice(b);
                    Ok(())
                })
                .map_err(|_| {
                    PyMemoryError::new_err(format!(
                        "kernel {}: cannot allocate output {i} ({} bytes) in Python",
                        self.program.name,
                        b.len()
                    ))
                })
            })
            .collect()
    }

    /// The cost model's estimate: `(text, summary_json, chrome_trace_json)`.
    fn cost(&self, py: Python<'_>) -> PyResult<(String, String, String)> {
        Ok({
            let program = Arc::clone(&self.program);
            let report = py.detach(move || nki_core::cost::estimate(&program));
            crate::cost_outputs(&report)
        })
    }

    /// This program as NKI Python source.
    fn emit(&self) -> PyResult<String> {
        Ok(nki_core::codegen::emit_nki(&self.program))
    }

    /// The program with every loop unrolled (as the frontend traces).
    fn unrolled(&self) -> PyResult<Program> {
        Ok(Program::new(nki_core::ir::unroll(&self.program)))
    }

    /// Where the unrolled instruction streams of this program and `other` first differ, or
    /// `None` when they are the same (locations and names are not compared).
    fn difference(&self, other: &Program) -> PyResult<Option<String>> {
        Ok(nki_core::ir::stream_difference(
            &self.program,
            &other.program,
        ))
    }

    /// The program as JSON.
    fn to_json(&self) -> PyResult<String> {
        Ok(self.program.to_json())
    }

    fn __repr__(&self) -> String {
        format!(
            "<Program {} for {}: {} instructions>",
            self.program.name,
            self.program.target.name(),
            self.program.instruction_count()
        )
    }
}
