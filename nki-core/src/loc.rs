//! Source locations: every instruction remembers the kernel line that created it.

use serde::Serialize;
use std::fmt;

/// A `file:line:column` in kernel source, captured with `#[track_caller]`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct SourceLoc {
    /// Path of the source file as the compiler saw it.
    pub file: &'static str,
    /// 1-based line.
    pub line: u32,
    /// 1-based column.
    pub column: u32,
}

impl SourceLoc {
    /// The location of the caller of the `#[track_caller]` function that calls this.
    #[track_caller]
    pub fn caller() -> SourceLoc {
        let l = std::panic::Location::caller();
        SourceLoc {
            file: l.file(),
            line: l.line(),
            column: l.column(),
        }
    }
}

impl fmt::Display for SourceLoc {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}", self.file, self.line)
    }
}
