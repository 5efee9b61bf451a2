//! Every native entry point runs inside [`guard`]: a Rust panic becomes a `torch_nki.NkiError`
//! naming the entry point, never an unwinding across the FFI (nor pyo3's `PanicException`,
//! which is not an `Exception`).
//!
//! Entry points are declared once, with `#[entry_point]` (crate `nki-python-macros`) on the
//! function or on a class's impl block: that wraps each body in [`guard`] under its name
//! (`name`, `Class.method`), and submits an [`Export`] which adds it to the module and lists
//! it. The module's functions, [`entry_points`], the names [`_force_panic`] accepts and the
//! list the panic test iterates (`_entry_points()`) all come from those submissions.

use crate::errors::internal_error;
use pyo3::prelude::*;
use pyo3::types::PyModule;
use std::cell::Cell;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::OnceLock;

pub use nki_python_macros::entry_point;

thread_local! {
    static FORCED: Cell<Option<&'static str>> = const { Cell::new(None) };
}

/// One thing the native module exports, submitted by `#[entry_point]`: a guarded function, or a
/// class whose methods are guarded.
///
/// Submissions are linked into every binary that links this crate, test binaries included, and
/// they reference pyo3: a test binary links only where libpython is linked, that is without
/// pyo3's `extension-module` feature (the module itself is built with
/// `PYO3_BUILD_EXTENSION_MODULE`, which maturin sets).
pub struct Export {
    /// Adds it to the module.
    pub add: fn(&Bound<'_, PyModule>) -> PyResult<()>,
    /// Its guarded entry points: the function's name, or `Class.method` for each method.
    pub entry_points: &'static [&'static str],
}

inventory::collect!(Export);

/// Every export of this module, as `#[entry_point]` declared them.
pub fn exports() -> impl Iterator<Item = &'static Export> {
    inventory::iter::<Export>.into_iter()
}

/// The name of every guarded entry point (functions, and `Class.method`), sorted.
pub fn entry_points() -> &'static [&'static str] {
    static ALL: OnceLock<Vec<&'static str>> = OnceLock::new();
    ALL.get_or_init(|| {
        let mut all: Vec<&'static str> = exports().flat_map(|e| e.entry_points).copied().collect();
        all.sort_unstable();
        all
    })
}

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
        entry_points().binary_search(&entry).is_ok(),
        "{entry} is not a declared entry point"
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
/// The test hook itself, so not an entry point: [`init_module`](crate::init_module) adds it.
#[pyfunction]
pub fn _force_panic(entry: &str) -> PyResult<()> {
    let all = entry_points().iter().chain(crate::fast::ENTRY_POINTS);
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
#[entry_point]
pub fn _armed() -> PyResult<Option<&'static str>> {
    Ok(FORCED.with(Cell::get))
}

/// Every guarded entry point's name, sorted: the list the panic test iterates.
#[entry_point]
pub fn _entry_points() -> PyResult<Vec<&'static str>> {
    Ok(entry_points().to_vec())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn entry_points_are_declared_once() {
        let all = entry_points();
        let mut unique = all.to_vec();
        unique.dedup();
        assert_eq!(all, unique, "an entry point is declared twice");
        for name in [
            "versions",
            "Signature.run",
            "_fast_api",
            "_entry_points",
            "Tracer.finish",
            "Tracer.constant",
            "Program.name",
        ] {
            assert!(all.contains(&name), "{name} missing from {all:?}");
        }
    }
}
