//! Hot loops compiled for the widest vector instructions the CPU has.
//!
//! The crate is built for the x86-64 baseline (SSE2, four fp32 lanes). [`wide`] runs a closure
//! through a copy of itself compiled with AVX-512 or AVX2 enabled when the CPU has them, picked
//! once per process. Only the width changes: Rust never contracts `a * b + c` into a fused
//! multiply-add, and vector adds, multiplies, divisions and min/max round exactly as their
//! scalar forms do, so every path computes the same bits.

/// Calls `f`, compiled for AVX-512 or AVX2 when this CPU supports them (the closure's body and
/// whatever the compiler inlines into it).
#[inline(always)]
pub(crate) fn wide<R>(f: impl FnOnce() -> R) -> R {
    #[cfg(target_arch = "x86_64")]
    {
        match level() {
            // SAFETY: `level` found the features these functions enable on this CPU.
            Level::Avx512 => return unsafe { avx512(f) },
            // SAFETY: as above.
            Level::Avx2 => return unsafe { avx2(f) },
            Level::Baseline => {}
        }
    }
    f()
}

#[cfg(target_arch = "x86_64")]
#[derive(Clone, Copy, PartialEq, Eq)]
enum Level {
    Baseline,
    Avx2,
    Avx512,
}

#[cfg(target_arch = "x86_64")]
fn level() -> Level {
    use std::sync::OnceLock;
    static LEVEL: OnceLock<Level> = OnceLock::new();
    *LEVEL.get_or_init(|| {
        if std::arch::is_x86_feature_detected!("avx512f") {
            Level::Avx512
        } else if std::arch::is_x86_feature_detected!("avx2") {
            Level::Avx2
        } else {
            Level::Baseline
        }
    })
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx512f")]
unsafe fn avx512<R>(f: impl FnOnce() -> R) -> R {
    f()
}

#[cfg(target_arch = "x86_64")]
#[target_feature(enable = "avx2")]
unsafe fn avx2<R>(f: impl FnOnce() -> R) -> R {
    f()
}
