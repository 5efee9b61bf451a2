//! # nki-python
//!
//! The body of a torch-nki native module: the functions the `torch_nki` Python package calls to
//! list, check, run, cost and emit the kernels of the binary the module is built into. The
//! package's own `torch_nki._native` is this module around the library kernels; an out-of-tree
//! kernel crate builds it around its own (`nki_python::nki_module!(my_kernels);` in a `cdylib`)
//! and `torch_nki.load` registers it. Every module holds only the kernels `inventory` collected
//! in its own binary.
//!
//! - `manifest() -> str`: the registry manifest as JSON (names, schemas, contracts, docs).
//! - `Signature(name, shapes, dtypes, scalars)`: one call's signature, parsed and checked against
//!   the op's contract once (see [`signature`]); its methods return the outputs' shapes and
//!   dtypes (what the fake kernel and the CPU kernel allocate), run the kernel on tensors
//!   (compiled once, simulated on the tensors' memory with the GIL released), and give the
//!   tolerances, cost estimate, NKI source, traced `Program` and index domains.
//! - `cache_size()`, `cache_capacity(n=None)`: the compile cache.
//! - `symbolic(name, shapes, dtypes, scalars)`: the contract on symbolic shapes, as expressions
//!   for the fake kernel to evaluate on `SymInt`s.
//! - `Tracer`, `Program`, `nki_api()`, `nki_spec_json()`: the NKI Python frontend's native half (see
//!   [`frontend`]).
//! - `versions()`: the module protocol and nki-core versions, which must match the host's.
//! - `peaks(target)`: the target's peak tensor-engine FLOP/s and HBM bandwidth, read from the
//!   cost model's table (the profile's roofline estimates of ATen ops use them).
//!
//! Each function (and each class's methods) is declared once, with `#[entry_point]` (see
//! [`guard`]): that adds the panic guard, the registration [`init_module`] performs and its name
//! in `_entry_points()`; `torch_nki/_native.pyi` types them, checked against the module by
//! `tests/python/test_native_stub.py`.
//!
//! Errors are the exceptions of `torch_nki.errors` (see [`errors`]): contract violations are
//! `ContractShapeError` (a `ValueError`) or `ContractDtypeError` (a `TypeError`), every other
//! failure a `torch_nki.NkiError` subclass. A Rust panic never crosses into Python.

#![warn(missing_docs)]

pub mod args;
pub mod errors;
pub mod fast;
pub mod frontend;
pub mod guard;
pub mod marker;
pub mod pages;
pub mod run;
pub mod signature;

pub use pyo3;

/// The version of the module protocol (the functions and their arguments the `torch_nki`
/// package calls). A module built against another protocol is refused by `torch_nki.load`.
/// 2: `check`, `run`, `tolerance`, `cost`, `emit`, `program` and `index_domains` became the
/// methods of `Signature`.
pub const PROTOCOL_VERSION: u32 = 2;

/// Names this module's ops in `torch.ops.<ns>` in every message (`neuron` by default). Set
/// once, when the module is registered; another namespace later is a `ValueError`.
#[entry_point]
fn set_namespace(ns: &str) -> PyResult<()> {
    nki_core::contract::set_namespace(ns).map_err(pyo3::exceptions::PyValueError::new_err)
}

/// Whether this module advises its large outputs into transparent huge pages (on unless
/// `TORCH_NKI_HUGE_PAGES=0`; see [`pages`]).
#[entry_point]
fn huge_pages() -> PyResult<bool> {
    Ok(crate::pages::enabled())
}

/// `(protocol version, nki-core version)` of this module.
#[entry_point]
fn versions() -> PyResult<(u32, &'static str)> {
    Ok((PROTOCOL_VERSION, nki_core::VERSION))
}

/// The peak rates of `target`'s logical NeuronCore in its default configuration (each physical
/// core's rates from the cost model's table, nothing here changes it, times
/// `Target::default_lnc`: two cores on Trn2/Trn3): `(tensor-engine FLOP/s for 16-bit operands,
/// tensor-engine FLOP/s for fp32, HBM bytes/s over every DMA queue)`. The profile's roofline
/// estimates of ATen ops use them, next to kernels that split across both cores. An unknown
/// target is a `ValueError` naming the known ones.
#[entry_point]
fn peaks(target: &str) -> PyResult<(f64, f64, f64)> {
    let t = nki_core::Target::from_name(target).ok_or_else(|| {
        pyo3::exceptions::PyValueError::new_err(format!(
            "unknown target `{target}` (known: trn1, trn2, trn3)"
        ))
    })?;
    let table = nki_core::cost::CostTable::for_target(t);
    let cores = t.default_lnc() as f64;
    Ok((
        cores * table.tensor_peak_flops(DType::BF16),
        cores * table.tensor_peak_flops(DType::F32),
        cores * table.dma_peak_bytes_per_s(),
    ))
}

use guard::entry_point;
use pyo3::prelude::*;
use pyo3::types::PyInt;

use nki_core::DType;
use nki_core::contract::symbolic::SymInput;

/// The registry manifest as pretty-printed JSON.
#[entry_point]
fn manifest() -> PyResult<String> {
    Ok(errors::registry()?.manifest().to_json())
}

/// Registered op names, sorted.
#[entry_point]
fn names() -> PyResult<Vec<&'static str>> {
    Ok(errors::registry()?.names())
}

/// The contract on symbolic shapes (the fake kernel under `torch.compile(dynamic=True)`):
/// `shapes` hold ints and, for unknown sizes, their names (`"s0"`). Returns JSON with each
/// output's shape as expressions over input dimensions (`{"kind": "dim", "tensor": t, "axis":
/// a}`, constants, binary operations), the output dtypes, and the equalities between unknown
/// sizes to assert, each with its violation message. Violations the known sizes already decide
/// raise here.
#[entry_point]
fn symbolic(
    name: &str,
    shapes: Vec<Option<Vec<Bound<'_, PyAny>>>>,
    dtypes: Vec<Option<String>>,
    scalars: Vec<Bound<'_, PyAny>>,
) -> PyResult<String> {
    let def = errors::registry()?
        .get(name)
        .map_err(errors::registry_err)?;
    let dims = shapes
        .iter()
        .map(|shape| {
            let Some(shape) = shape else {
                return Ok(None);
            };
            shape
                .iter()
                .map(|d| {
                    // Only a plain `int` is a known size: converting a `SymInt` to an integer
                    // would specialise the graph on its current value.
                    if d.is_exact_instance_of::<PyInt>() {
                        Ok(SymInput::Known(d.extract::<u64>()?))
                    } else {
                        Ok(SymInput::Named(d.str()?.to_string()))
                    }
                })
                .collect::<PyResult<Vec<_>>>()
                .map(Some)
        })
        .collect::<PyResult<Vec<_>>>()?;
    let names: Vec<Option<&str>> = dtypes.iter().map(|d| d.as_deref()).collect();
    let compute: Vec<DType> = def
        .contract
        .check_optional_dtypes(def.name, &names)
        .map_err(|v| errors::violation_err(&v))?
        .into_iter()
        .map(|d| d.unwrap_or(DType::F32))
        .collect();
    let out = def
        .contract
        .bind_symbolic(def.name, &dims, &args::choices(def, &scalars)?)
        .map_err(|v| errors::violation_err(&v))?;
    let widened = args::widened(&names.iter().flatten().copied().collect::<Vec<_>>());
    let out_dtypes: Vec<&str> = def
        .contract
        .output_dtypes(&compute)
        .into_iter()
        .map(|d| args::returned_name(d, widened))
        .collect();
    let doc = serde_json::json!({
        "shapes": out.shapes,
        "dtypes": out_dtypes,
        "checks": out.checks,
    });
    Ok(doc.to_string())
}

/// A cost report as `(text, summary_json, chrome_trace_json)`: the readable report, its figures
/// as JSON (no per-instruction slices), and the timeline.
pub(crate) fn cost_outputs(report: &nki_core::cost::CostReport) -> (String, String, String) {
    let mut summary = serde_json::json!({
        "kernel": report.kernel,
        "target": report.target.name(),
        "total_ns": report.total_ns,
        "engines": report.engines,
        "hbm_read_bytes": report.hbm_read_bytes,
        "hbm_write_bytes": report.hbm_write_bytes,
        "flops": report.flops,
        "min_ns": report.min_ns,
        "bound": report.bound,
        "roofline_fraction": report.roofline_fraction,
        "hbm_compulsory_bytes": report.hbm_compulsory_bytes,
        "hbm_roofline_fraction": report.hbm_roofline_fraction,
        "critical_path": report.critical_path.len(),
        "critical_path_by_constant": report.critical_path_by_constant(),
        "instructions": report.slices.len(),
        "dma_transfers": report.slices.iter().filter(|s| s.dma_engines != 0).count(),
        "dma_peak_bytes_per_s": nki_core::cost::CostTable::for_target(report.target).dma_peak_bytes_per_s(),
    });
    if !report.core_ns.is_empty() {
        // A launch grid over several physical cores: each core's time (the estimate is the
        // largest).
        summary["core_ns"] = serde_json::json!(report.core_ns);
    }
    (
        report.to_string(),
        summary.to_string(),
        report.chrome_trace(),
    )
}

/// Every `nki` / `nl` / `nisa` name codegen may emit: `[(name, keywords, doc_url), ...]`.
#[entry_point]
fn nki_api() -> PyResult<Vec<(String, Vec<&'static str>, String)>> {
    Ok(nki_core::codegen::emitted()
        .into_iter()
        .map(|n| (n.name.into_owned(), n.keywords, n.doc.into_owned()))
        .collect())
}

/// The NKI Python source of `program` (see `nki_core::codegen`), through the persistent cache.
/// Returns `(source, status)`: status is `hit`, `miss` (generated and stored), `rebuilt <path>:
/// <reason>` when a stored entry was truncated or corrupted and has been replaced, or `uncached
/// <dir>: <error>` when the cache could not be read or written (the source is generated all the
/// same).
pub(crate) fn emit_cached(program: &nki_core::ir::Program) -> (String, String) {
    use nki_registry::{CacheEntry, DiskCache, Lookup};
    let cache = DiskCache::from_env();
    let key = DiskCache::key(program);
    let uncached = |e: std::io::Error| format!("uncached {}: {e}", cache.dir().display());
    let status = match cache.get(&key) {
        Ok(Lookup::Hit(entry)) => return (entry.source, "hit".to_string()),
        Ok(Lookup::Miss) => "miss".to_string(),
        Ok(Lookup::Corrupt { path, reason }) => {
            format!("rebuilt {}: {reason}", path.display())
        }
        Err(e) => uncached(e),
    };
    let entry = CacheEntry {
        key,
        source: nki_core::codegen::emit_nki(program),
        validated: true,
    };
    match cache.put(&entry) {
        Ok(()) => (entry.source, status),
        Err(e) => (entry.source, uncached(e)),
    }
}

/// The persistent cache's directory.
#[entry_point]
fn disk_cache_dir() -> PyResult<String> {
    Ok(nki_registry::DiskCache::from_env()
        .dir()
        .display()
        .to_string())
}

/// `(entries, bytes)` in the persistent cache.
#[entry_point]
fn disk_cache_info() -> PyResult<(usize, u64)> {
    let info = nki_registry::DiskCache::from_env()
        .info()
        .map_err(|e| pyo3::exceptions::PyOSError::new_err(e.to_string()))?;
    Ok((info.entries, info.bytes))
}

/// Removes every entry of the persistent cache; returns how many there were.
#[entry_point]
fn disk_cache_clear() -> PyResult<usize> {
    nki_registry::DiskCache::from_env()
        .clear()
        .map_err(|e| pyo3::exceptions::PyOSError::new_err(e.to_string()))
}

/// The smallest run (tile elements read and written, `ExecPlan::work`) the simulator hands to
/// its threads; smaller ones run on the calling thread. With `min`, sets it first (`0`: every
/// run that has parallel work). Default `$TORCH_NKI_SPLIT_MIN_WORK`, else
/// `nki_core::sim::HOST_SPLIT_MIN_WORK` while the fast path lends the simulator ATen's threads
/// and `nki_core::sim::SPLIT_MIN_WORK` otherwise.
#[entry_point]
#[pyo3(signature = (min=None))]
fn split_min_work(min: Option<u64>) -> PyResult<u64> {
    if let Some(min) = min {
        nki_core::sim::set_split_min_work(min);
    }
    Ok(nki_core::sim::split_min_work())
}

/// Number of compiled programs in the process-wide compile cache.
#[entry_point]
fn cache_size() -> PyResult<usize> {
    Ok(nki_registry::CompileCache::global().len())
}

/// The compile cache's capacity (most programs it holds); with `capacity`, sets it first
/// (least recently used programs are evicted to fit).
#[entry_point]
#[pyo3(signature = (capacity=None))]
fn cache_capacity(capacity: Option<usize>) -> PyResult<usize> {
    let cache = nki_registry::CompileCache::global();
    if let Some(n) = capacity {
        if n == 0 {
            return Err(pyo3::exceptions::PyValueError::new_err(
                "the compile cache capacity must be at least 1",
            ));
        }
        cache.set_capacity(n);
    }
    Ok(cache.capacity())
}

/// Defines the Python module `$name` (a `#[pymodule]`, so the `cdylib` exports `PyInit_$name`)
/// with every function of this crate, for the kernels linked into the binary.
#[macro_export]
macro_rules! nki_module {
    ($name:ident) => {
        /// The module marker `torch_nki.load` reads before loading the library.
        #[doc(hidden)]
        #[unsafe(no_mangle)]
        pub static TORCH_NKI_MODULE: [u8; $crate::marker::LEN] = $crate::marker::MARKER;

        #[$crate::pyo3::pymodule]
        #[pyo3(crate = "nki_python::pyo3")]
        fn $name(
            m: &$crate::pyo3::Bound<'_, $crate::pyo3::types::PyModule>,
        ) -> $crate::pyo3::PyResult<()> {
            $crate::init_module(m)
        }
    };
}

/// Adds every function and class of the module to `m` (what [`nki_module!`] calls): each
/// [`guard::Export`] that `#[entry_point]` declared, the panic test hook and the constants.
pub fn init_module(m: &Bound<'_, PyModule>) -> PyResult<()> {
    for export in guard::exports() {
        (export.add)(m)?;
    }
    m.add_function(wrap_pyfunction!(guard::_force_panic, m)?)?;
    m.add("HUGE_PAGES_MIN_BYTES", crate::pages::MIN_BYTES)?;
    m.add("FAST_ABI_VERSION", fast::FAST_ABI_VERSION)?;
    Ok(())
}
