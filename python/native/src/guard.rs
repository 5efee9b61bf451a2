//! Every native entry point runs inside [`guard`]: a Rust panic becomes a `torch_nki.NkiError`
//! naming the entry point, never an unwinding across the FFI (nor pyo3's `PanicException`,
//! which is not an `Exception`). Tests force a panic through each entry point with
//! `_force_panic(name)` (see [`ENTRY_POINTS`]).

use crate::errors::internal_error;
use pyo3::PyResult;
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};

thread_local! {
    static FORCED: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// The name of every guarded entry point (functions, and `Class.method`).
pub const ENTRY_POINTS: &[&str] = &[
    "versions",
    "huge_pages",
    "set_namespace",
    "manifest",
    "names",
    "check",
    "symbolic",
    "tolerance",
    "run",
    "cost",
    "emit",
    "program",
    "index_domains",
    "nki_api",
    "nki_spec",
    "cache_size",
    "cache_capacity",
    "disk_cache_dir",
    "disk_cache_info",
    "disk_cache_clear",
    "_error_example",
    "_fast_api",
    "_armed",
    "Tracer.__new__",
    "Tracer.output",
    "Tracer.tile",
    "Tracer.open_loop",
    "Tracer.close_loop",
    "Tracer.record",
    "Tracer.finish",
    "Program.validate",
    "Program.simulate",
    "Program.cost",
    "Program.emit",
    "Program.unrolled",
    "Program.difference",
    "Program.to_json",
];

/// The C ABI entry points of the fast path (`fast.rs`). They catch panics too, and answer one
/// with "take the slow path", so a forced panic there is invisible but for the path taken.
pub const FAST_ENTRY_POINTS: &[&str] = &["fast.plan", "fast.execute"];

/// Panics if a forced panic is armed for `entry` on this thread (disarming it).
pub fn panic_if_forced(entry: &'static str) {
    if FORCED.with(|forced| forced.get() == Some(entry)) {
        FORCED.with(|forced| forced.set(None));
        panic!("forced panic (test hook)");
    }
}

/// Runs `f` for entry point `entry`, turning a panic into an `NkiError`.
pub fn guard<R>(entry: &'static str, f: impl FnOnce() -> PyResult<R>) -> PyResult<R> {
    debug_assert!(
        ENTRY_POINTS.contains(&entry),
        "{entry} is not in ENTRY_POINTS"
    );
    let result = catch_unwind(AssertUnwindSafe(|| {
        panic_if_forced(entry);
        f()
    }));
    result.unwrap_or_else(|payload| {
        let message = nki_core::lang::context::panic_message(payload.as_ref());
        Err(internal_error(format!(
            "torch_nki native entry point `{entry}` panicked: {message}"
        )))
    })
}

/// Makes the next call of entry point `entry` on this thread panic inside its guard (for tests).
#[pyo3::pyfunction]
pub fn _force_panic(entry: &str) -> PyResult<()> {
    let all = ENTRY_POINTS.iter().chain(FAST_ENTRY_POINTS);
    let Some(&known) = all.into_iter().find(|e| **e == entry) else {
        return Err(pyo3::exceptions::PyKeyError::new_err(format!(
            "no native entry point `{entry}`"
        )));
    };
    FORCED.with(|forced| forced.set(Some(known)));
    Ok(())
}

/// The entry point a forced panic is armed for on this thread, if any (a test checks that the
/// call it made consumed it).
#[pyo3::pyfunction]
pub fn _armed() -> PyResult<Option<&'static str>> {
    guard("_armed", || Ok(FORCED.with(Cell::get)))
}

/// Every guarded entry point's name.
#[pyo3::pyfunction]
pub fn _entry_points() -> Vec<&'static str> {
    ENTRY_POINTS.to_vec()
}
