//! `Signature`: one call of one op (its tensors' shapes and dtypes and its scalars), parsed and
//! checked against the op's contract once, then run, costed, emitted or traced as often as
//! wanted without parsing or checking it again.
//!
//! `Signature(name, shapes, dtypes, scalars)` takes the dtypes as the caller passed them (kernel
//! dtypes, `f64` computed in `f32`, or any other name, which the contract rejects in words) and
//! raises the contract's violation when it does not hold. The handle keeps the checked
//! signature and, per target, a weak reference to the program the compile cache holds for it:
//! a later call on the same target skips the cache lookup while the program is cached, and the
//! cache's bound still decides what stays in memory (an evicted program is compiled again
//! through the cache).

use crate::errors::{self, to_py_err};
use crate::frontend;
use crate::guard::entry_point;
use crate::{args, run};
use nki_core::compile::CheckedSignature;
use nki_core::contract::Qualified;
use nki_core::{Compiled, KernelDef, NkiError, Target};
use nki_registry::CompileCache;
use pyo3::prelude::*;
use pyo3::types::PyTuple;
use std::sync::{Arc, Mutex, Weak};

/// A checked call signature of one op (see the module documentation).
#[pyclass(module = "torch_nki._native", frozen)]
pub struct Signature {
    checked: CheckedSignature<'static>,
    /// Whether a host dtype was computed in a narrower kernel dtype (`f64` → `f32`), so `f32`
    /// outputs are returned as `f64`.
    widened: bool,
    /// The program of each target this handle compiled, as the compile cache holds it.
    compiled: Mutex<Vec<(Target, Weak<Compiled>)>>,
}

impl Signature {
    fn def(&self) -> &'static KernelDef {
        self.checked.kernel()
    }

    /// The program for `target`, from this handle while the compile cache keeps it, else
    /// through the cache (compiling it on a miss). Called without the GIL.
    fn compiled(&self, target: Target) -> Result<Arc<Compiled>, NkiError> {
        let known = self
            .lock()
            .iter()
            .find(|(t, _)| *t == target)
            .map(|(_, w)| w.upgrade());
        if let Some(Some(compiled)) = known {
            return Ok(compiled);
        }
        let mut sig = self.checked.signature().clone();
        sig.target = target;
        let compiled = CompileCache::global().get_or_compile(self.def(), &sig)?;
        let mut held = self.lock();
        held.retain(|(t, _)| *t != target);
        held.push((target, Arc::downgrade(&compiled)));
        Ok(compiled)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Vec<(Target, Weak<Compiled>)>> {
        self.compiled.lock().unwrap_or_else(|p| p.into_inner())
    }

    /// `target` by name, or a `ValueError` naming the known ones.
    fn target(&self, target: &str) -> PyResult<Target> {
        Target::from_name(target).ok_or_else(|| {
            pyo3::exceptions::PyValueError::new_err(format!(
                "{}: unknown target `{target}` (known: trn1, trn2, trn3)",
                Qualified(self.def().name)
            ))
        })
    }

    /// Compiles for `target` (without the GIL) and hands the program to `f`.
    fn with_program<R: Send>(
        &self,
        py: Python<'_>,
        target: &str,
        f: impl FnOnce(&nki_core::ir::Program) -> R + Send,
    ) -> PyResult<R> {
        let target = self.target(target)?;
        py.detach(|| self.compiled(target).map(|c| f(c.program())))
            .map_err(|e| to_py_err(e, self.def().name))
    }
}

#[entry_point]
impl Signature {
    /// Checks a call of op `name` against its contract: `shapes` and `dtypes` per tensor
    /// parameter (`None` for an optional tensor left out), `scalars` per scalar parameter, in
    /// parameter order. Nothing is traced or run.
    #[new]
    fn new(
        name: &str,
        shapes: Vec<Option<Vec<u64>>>,
        dtypes: Vec<Option<String>>,
        scalars: Vec<Bound<'_, PyAny>>,
    ) -> PyResult<Self> {
        let def = errors::registry()?
            .get(name)
            .map_err(errors::registry_err)?;
        let call = args::caller_signature(def, &shapes, &dtypes, &scalars)?;
        let checked = def
            .check(&call.sig)
            .map_err(|e| errors::to_py_err(e, def.name))?;
        Ok(Signature {
            checked,
            widened: call.widened,
            compiled: Mutex::new(Vec::new()),
        })
    }

    /// The op's name in its module.
    #[getter]
    fn name(&self) -> &'static str {
        self.def().name
    }

    /// Each output's `(shape, dtype_name)` in return order, as the call returns it: kernel
    /// dtype names, and `f64` for the `f32` outputs of a call given `f64` tensors.
    fn outputs<'py>(&self, py: Python<'py>) -> PyResult<Vec<(Bound<'py, PyTuple>, &'static str)>> {
        self.checked
            .outputs()
            .iter()
            .map(|o| {
                let dtype = args::returned_name(o.dtype, self.widened);
                Ok((PyTuple::new(py, &o.shape)?, dtype))
            })
            .collect()
    }

    /// The `(rtol, atol)` each output is held to against the op's reference (the kernel's
    /// tolerance class, evaluated on the contract's bindings); `None` for an output dtype
    /// without a rule (fp8).
    fn tolerance(&self) -> PyResult<Vec<Option<(f64, f64)>>> {
        let def = self.def();
        let sig = self.checked.signature();
        let metas = sig.metas();
        let bindings = def
            .contract
            .bind_call(def.name, &metas, &def.choices(&sig.scalars))
            .map_err(|v| errors::violation_err(&v))?;
        Ok(self
            .checked
            .outputs()
            .iter()
            .map(|o| {
                def.tolerance
                    .tolerance(o.dtype, &bindings)
                    .map(|t| (t.rtol, t.atol))
            })
            .collect())
    }

    /// Runs the op on tensors of this signature: `inputs` the tensor arguments in parameter
    /// order (`None` for one left out), of the signature's shapes and kernel dtypes (`f64`
    /// tensors narrowed to `f32` by the caller); `outputs` fresh contiguous CPU tensors in
    /// return order, written in place. Compiled for `trn2` once (through the compile cache) and
    /// simulated with the GIL released.
    fn run(
        &self,
        py: Python<'_>,
        inputs: Vec<Option<Bound<'_, PyAny>>>,
        outputs: Vec<Bound<'_, PyAny>>,
    ) -> PyResult<()> {
        let expected = &self.checked.signature().tensors;
        run::run_tensors(py, self.def(), expected, &inputs, &outputs, || {
            self.compiled(Target::Trn2)
        })
    }

    /// Estimates the op on `target` (`trn1`, `trn2`, `trn3`) with the cost model. Returns
    /// `(text, summary_json, chrome_trace_json)`: the readable report, its figures as JSON (no
    /// per-instruction slices), and the timeline.
    fn cost(&self, py: Python<'_>, target: &str) -> PyResult<(String, String, String)> {
        let report = self.with_program(py, target, nki_core::cost::estimate)?;
        Ok(crate::cost_outputs(&report))
    }

    /// The op's NKI Python source on `target` (see `nki_core::codegen`), through the
    /// persistent cache. Returns `(source, status)`: status is `hit`, `miss` (generated and
    /// stored), `rebuilt <path>: <reason>` when a stored entry was truncated or corrupted and
    /// has been replaced, or `uncached <dir>: <error>` when the cache could not be read or
    /// written (the source is generated all the same).
    fn emit(&self, py: Python<'_>, target: &str) -> PyResult<(String, String)> {
        self.with_program(py, target, crate::emit_cached)
    }

    /// The op's program on `target`, as its Rust kernel traces it (through the compile
    /// cache): for comparing with what the NKI frontend traces from generated source.
    fn program(&self, py: Python<'_>, target: &str) -> PyResult<frontend::Program> {
        self.with_program(py, target, |p| frontend::Program::new(p.clone()))
    }

    /// The size of a run on the simulator (tile elements read and written, each instruction
    /// once per loop iteration: `ExecPlan::work`), which `split_min_work()` is compared with.
    fn work(&self, py: Python<'_>) -> PyResult<u64> {
        py.detach(|| self.compiled(Target::Trn2).map(|c| c.plan().work()))
            .map_err(|e| to_py_err(e, self.def().name))
    }

    /// The index range each tensor parameter declares (`Hbm::require_indices`), traced for
    /// `trn2`: per tensor parameter `(lo, hi, except)`, or `None` (no declaration, or a tensor
    /// left out). Test inputs are drawn from it.
    #[allow(clippy::type_complexity)]
    fn index_domains(&self, py: Python<'_>) -> PyResult<Vec<Option<(i64, i64, Option<i64>)>>> {
        let domains = self.with_program(py, "trn2", |p| {
            p.inputs()
                .map(|(_, d)| d.domain.as_ref().map(|d| (d.lo, d.hi, d.except)))
                .collect::<Vec<_>>()
        })?;
        let mut given = domains.into_iter();
        Ok(self
            .checked
            .signature()
            .tensors
            .iter()
            .map(|t| t.as_ref().and_then(|_| given.next().flatten()))
            .collect())
    }
}
