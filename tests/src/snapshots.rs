//! What every insta snapshot of this crate leaves out: the line (and column) of a source
//! location.
//!
//! Generated NKI source comments each statement with the kernel line that made it
//! (`# kernels/src/norm/rmsnorm.rs:44`), the manifest gives each kernel's `"location"`, and the
//! Program IR's JSON carries `"line"`/`"column"` per location. Those are useful to a kernel
//! author reading real output, but a snapshot holding them changes whenever a line moves in a
//! kernel file, burying what a change meant. The snapshots keep the file and show `[line]`
//! where a line number was; a test about the line itself asserts it directly
//! (`tests/tests/faulty_kernel.rs`).
//!
//! Every snapshot test goes through [`assert_snapshot!`](crate::assert_snapshot) (the crate
//! re-exports insta for it and has no insta dev-dependency of its own, so a test cannot bypass
//! the filters by accident).

/// The shared insta settings: the current ones plus the location filters.
pub fn settings() -> insta::Settings {
    let mut settings = insta::Settings::clone_current();
    // `kernels/src/x.rs:42` and `x.rs:42:7` (a location rendered as text).
    settings.add_filter(r"(\.rs):\d+(?::\d+)?", "$1:[line]");
    // `"line": 42`, `"column": 7` (a location serialised as JSON).
    settings.add_filter(r#""(line|column)": \d+"#, r#""$1": "[$1]""#);
    settings
}

/// `insta::assert_snapshot!` with the [`settings`] bound: takes the same arguments.
#[macro_export]
macro_rules! assert_snapshot {
    ($($arg:tt)*) => {
        $crate::snapshots::settings().bind(|| $crate::insta::assert_snapshot!($($arg)*))
    };
}

#[cfg(test)]
mod tests {
    #[test]
    fn locations_keep_their_file_and_lose_their_line() {
        let text = "t0 = nl.ndarray((128, 70))  # kernels/src/norm/rmsnorm.rs:44\n\
                    failed at tests/tests/faulty_kernel.rs:12:9 (alloc t0 [256, 64])\n\
                    \"location\": \"kernels/src/loss.rs:127\",\n\
                    {\"file\": \"kernels/src/tiling.rs\", \"line\": 49, \"column\": 15}\n\
                    offset=8960 * i0, ratio 1:2, \"lines\": 3";
        crate::assert_snapshot!(text, @r#"
        t0 = nl.ndarray((128, 70))  # kernels/src/norm/rmsnorm.rs:[line]
        failed at tests/tests/faulty_kernel.rs:[line] (alloc t0 [256, 64])
        "location": "kernels/src/loss.rs:[line]",
        {"file": "kernels/src/tiling.rs", "line": "[line]", "column": "[column]"}
        offset=8960 * i0, ratio 1:2, "lines": 3
        "#);
    }
}
