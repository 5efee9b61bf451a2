//! Source locations: every instruction remembers the kernel line that created it.
//!
//! Rust kernels get their locations from `#[track_caller]`. Kernels traced from another
//! language (the NKI Python frontend) set the location of each call explicitly with
//! [`with_location`]; file names from there are interned with [`intern_file`].

use serde::Serialize;
use std::cell::Cell;
use std::collections::HashSet;
use std::fmt;
use std::sync::{Mutex, PoisonError};

/// A `file:line:column` in kernel source, captured with `#[track_caller]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct SourceLoc {
    /// Path of the source file as the compiler saw it.
    pub file: &'static str,
    /// 1-based line.
    pub line: u32,
    /// 1-based column (0 when the source language does not report one).
    pub column: u32,
}

thread_local! {
    static OVERRIDE: Cell<Option<SourceLoc>> = const { Cell::new(None) };
}

impl SourceLoc {
    /// The location of the caller of the `#[track_caller]` function that calls this, or the
    /// location set by an enclosing [`with_location`] on this thread.
    #[track_caller]
    pub fn caller() -> SourceLoc {
        if let Some(loc) = OVERRIDE.with(Cell::get) {
            return loc;
        }
        let l = std::panic::Location::caller();
        SourceLoc {
            file: l.file(),
            line: l.line(),
            column: l.column(),
        }
    }
}

/// Runs `f` with every location the tile language captures on this thread set to `loc`: how a
/// call traced from another language (an `nisa.*` call in NKI Python) gets its own source line.
pub fn with_location<R>(loc: SourceLoc, f: impl FnOnce() -> R) -> R {
    struct Restore(Option<SourceLoc>);
    impl Drop for Restore {
        fn drop(&mut self) {
            OVERRIDE.with(|o| o.set(self.0));
        }
    }
    let _restore = Restore(OVERRIDE.with(|o| o.replace(Some(loc))));
    f()
}

/// A `'static` copy of a file name, for locations in sources that are not compiled into this
/// binary. Each distinct name is stored once for the life of the process (kernel files are few).
pub fn intern_file(name: &str) -> &'static str {
    static FILES: Mutex<Option<HashSet<&'static str>>> = Mutex::new(None);
    let mut files = FILES.lock().unwrap_or_else(PoisonError::into_inner);
    let files = files.get_or_insert_with(HashSet::new);
    if let Some(&known) = files.get(name) {
        return known;
    }
    let leaked: &'static str = Box::leak(name.to_owned().into_boxed_str());
    files.insert(leaked);
    leaked
}

impl fmt::Display for SourceLoc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn with_location_overrides_and_restores() {
        let here = SourceLoc::caller();
        assert!(here.file.ends_with("loc.rs"));
        let set = SourceLoc {
            file: intern_file("kernel.py"),
            line: 12,
            column: 0,
        };
        let inner = with_location(set, SourceLoc::caller);
        assert_eq!(inner, set);
        // Nested overrides restore the outer one, and the last one restores none.
        with_location(set, || {
            let other = SourceLoc { line: 3, ..set };
            assert_eq!(with_location(other, SourceLoc::caller), other);
            assert_eq!(SourceLoc::caller(), set);
        });
        assert!(SourceLoc::caller().file.ends_with("loc.rs"));
    }

    #[test]
    fn interned_names_are_shared() {
        let a = intern_file("a/kernel.py");
        let b = intern_file(&String::from("a/kernel.py"));
        assert!(std::ptr::eq(a, b));
    }
}
