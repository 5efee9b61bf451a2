//! The fast path's C ABI, defined once: the constants, the dtype codes and scalar kinds, and the
//! `#[repr(C)]` structs the C++ kernels (`torch_nki/csrc/fast_ops.cpp`) exchange with
//! [`super`]. The C++ side includes `fast_abi.h`, which [`header`] generates from these
//! definitions when `torch_nki._fast` compiles the kernels (`_native._fast_abi_header()`), so the
//! two sides cannot disagree; the header also asserts every struct's size and field offsets.

use super::c_decl::{CStruct, c_enum, c_struct};
use nki_core::DType;
use nki_core::sim::threads::{HostParallelFor, HostThreadCount};
use std::ffi::{c_char, c_void};
use std::fmt::Write;

/// The ABI version; the C++ side refuses a table with another.
pub const FAST_ABI_VERSION: u32 = 2;
/// Success.
pub const OK: i32 = 0;
/// Run the op's Python kernel instead.
pub const SLOW_PATH: i32 = 1;
/// Most outputs a plan describes (more take the slow path).
pub const MAX_OUTPUTS: usize = 8;
/// Highest output rank a plan describes (higher take the slow path).
pub const MAX_RANK: usize = 8;

/// Declares the fast path's dtype codes: each kernel dtype's, its variant named as its [`DType`]
/// and paired with its ATen scalar type (`at::ScalarType::<aten>`); then the torch dtypes no
/// kernel takes that the fast path narrows to one (`Variant = code => aten as Kernel, N bytes`,
/// `N` bytes per element, wider than `Kernel`: an `int64` index tensor computed in `int32`, as
/// the Python kernel's `narrow_indices` does).
macro_rules! dtype_codes {
    (
        kernel { $($variant:ident = $code:literal => $aten:ident,)* }
        narrowed {
            $(
                $nvariant:ident = $ncode:literal => $naten:ident
                    as $computed:ident, $bytes:literal bytes,
            )*
        }
    ) => {
        c_enum! {
            /// A tensor's dtype on the fast path (`FastTensorMeta::dtype`, `FastPlan::dtype`).
            pub enum FastDtype {
                $(
                    #[doc = concat!(
                        "`DType::", stringify!($variant), "`, `at::ScalarType::", stringify!($aten), "`."
                    )]
                    $variant = $code,
                )*
                $(
                    #[doc = concat!(
                        "`at::ScalarType::", stringify!($naten), "`, computed as `DType::",
                        stringify!($computed), "` (inputs only)."
                    )]
                    $nvariant = $ncode,
                )*
            }
        }

        impl FastDtype {
            /// The kernel dtype (for a narrowed input, the one it is computed in).
            pub const fn dtype(self) -> DType {
                match self {
                    $(Self::$variant => DType::$variant,)*
                    $(Self::$nvariant => DType::$computed,)*
                }
            }

            /// The narrowed input dtypes (narrowed to [`Self::dtype`], with a range check, before
            /// the kernel reads them), each with its element size in bytes. `execute` tells one
            /// by its buffer: `bytes` per element where the kernel's dtype has fewer.
            pub const NARROWED: &[(Self, usize)] = &[$((Self::$nvariant, $bytes),)*];

            /// The code of a kernel dtype: every dtype torch has has one (the others never
            /// cross the torch boundary).
            pub const fn of(dtype: DType) -> Option<Self> {
                match dtype {
                    $(DType::$variant => Some(Self::$variant),)*
                    _ => None,
                }
            }

            /// Each variant's ATen scalar type, as `(variant, at::ScalarType name)`.
            pub const ATEN: &[(&str, &str)] = &[
                $((stringify!($variant), stringify!($aten)),)*
                $((stringify!($nvariant), stringify!($naten)),)*
            ];
        }
    };
}

dtype_codes! {
    kernel {
        F32 = 0 => Float,
        BF16 = 1 => BFloat16,
        F16 = 2 => Half,
        I32 = 3 => Int,
        F8E4M3FN = 4 => Float8_e4m3fn,
        F8E5M2 = 5 => Float8_e5m2,
        I8 = 6 => Char,
        I16 = 7 => Short,
        U8 = 8 => Byte,
        U16 = 9 => UInt16,
        U32 = 10 => UInt32,
        Bool = 11 => Bool,
        F8E8M0 = 12 => Float8_e8m0fnu,
    }
    narrowed {
        I64 = 13 => Long as I32, 8 bytes,
    }
}

c_enum! {
    /// What a `FastScalar` holds.
    pub enum FastScalarKind {
        /// A float, in `f`.
        Float = 0,
        /// An int, in `i`.
        Int = 1,
        /// A bool, in `i` as 0 or 1.
        Bool = 2,
        /// `None`: an optional scalar left out.
        None = 3,
        /// A string: `i` is the address of a NUL-terminated string, alive for the call.
        Str = 4,
    }
}

c_struct! {
    /// One tensor argument's shape and dtype (`present == 0`: an optional tensor left out).
    pub struct FastTensorMeta {
        /// 0 for an absent optional tensor.
        pub present: u8,
        /// A `FastDtype` code.
        pub dtype: u8,
        /// Rank.
        pub ndim: usize,
        /// `ndim` sizes.
        pub shape: *const i64,
    }
}

c_struct! {
    /// One scalar argument.
    pub struct FastScalar {
        /// A `FastScalarKind` code.
        pub kind: u8,
        /// The float value.
        pub f: f64,
        /// The int (or bool as 0/1) value, or a string's address.
        pub i: i64,
    }
}

c_struct! {
    /// A compiled program for one call, and its outputs.
    pub struct FastPlan {
        /// An `Arc<Compiled>` to pass to `execute` and then `release`.
        pub handle: *const c_void,
        /// Number of outputs.
        pub n_outputs: usize,
        /// Each output's rank.
        pub ndim: [usize; MAX_OUTPUTS],
        /// Each output's shape.
        pub shape: [[i64; MAX_RANK]; MAX_OUTPUTS],
        /// Each output's `FastDtype` code.
        pub dtype: [u8; MAX_OUTPUTS],
    }
}

c_struct! {
    /// One tensor's memory.
    pub struct FastBuffer {
        /// The data pointer.
        pub data: *mut c_void,
        /// Its length in bytes.
        pub nbytes: usize,
    }
}

c_struct! {
    /// The function table of a native module (`_native._fast_api()` is its address).
    pub struct FastApi {
        /// `kAbiVersion`.
        pub version: u32,
        /// The kernel named by a NUL-terminated string (null when unknown).
        pub lookup: unsafe extern "C" fn(*const c_char) -> *const c_void,
        /// Plans a call for Trn2: `(kernel, inputs, n_inputs, scalars, n_scalars, out plan)`;
        /// `kOk`, or `kSlowPath` to run the op's Python kernel instead.
        pub plan: unsafe extern "C" fn(
            *const c_void,
            *const FastTensorMeta,
            usize,
            *const FastScalar,
            usize,
            *mut FastPlan,
        ) -> i32,
        /// Executes a plan: `(handle, inputs, n_inputs, outputs, n_outputs)`; present inputs
        /// only. `kOk` or `kSlowPath`.
        pub execute: unsafe extern "C" fn(
            *const c_void,
            *const FastBuffer,
            usize,
            *const FastBuffer,
            usize,
        ) -> i32,
        /// Releases a plan's handle.
        pub release: unsafe extern "C" fn(*const c_void),
        /// Lends the simulator the host's threads, `(parallel_for, thread_count)`
        /// (`nki_core::sim::threads::HostThreads`): the C++ side passes ATen's intra-op pool.
        pub set_host_threads: unsafe extern "C" fn(HostParallelFor, HostThreadCount),
    }
}

/// The C++ header of this ABI (`fast_abi.h`), in namespace `torch_nki_fast_abi`: the
/// constants, the enums, `TORCH_NKI_FAST_DTYPES(X)` (`X(FastDtype variant, at::ScalarType
/// name)` for each dtype), and the structs with their layout asserted.
pub fn header() -> String {
    let mut out = String::from(
        "// The fast path's C ABI. Generated from python/native/src/fast/abi.rs by\n\
         // `_native._fast_abi_header()` when torch_nki._fast compiles fast_ops.cpp: do not edit.\n\
         #pragma once\n\n\
         #include <cstddef>\n\
         #include <cstdint>\n\n",
    );
    let _ = write!(
        out,
        "// X(variant, aten) for each FastDtype and its at::ScalarType.\n\
         #define TORCH_NKI_FAST_DTYPES(X)"
    );
    for (variant, aten) in FastDtype::ATEN {
        let _ = write!(out, " \\\n  X({variant}, {aten})");
    }
    out.push_str("\n\nnamespace torch_nki_fast_abi {\n\n");
    let constants: [(&str, &str, String); 5] = [
        ("uint32_t", "kAbiVersion", FAST_ABI_VERSION.to_string()),
        ("int32_t", "kOk", OK.to_string()),
        ("int32_t", "kSlowPath", SLOW_PATH.to_string()),
        ("size_t", "kMaxOutputs", MAX_OUTPUTS.to_string()),
        ("size_t", "kMaxRank", MAX_RANK.to_string()),
    ];
    for (ty, name, value) in constants {
        let _ = writeln!(out, "constexpr {ty} {name} = {value};");
    }
    for definition in [
        FastDtype::c_definition(),
        FastScalarKind::c_definition(),
        FastTensorMeta::definition(),
        FastScalar::definition(),
        FastPlan::definition(),
        FastBuffer::definition(),
        FastApi::definition(),
    ] {
        out.push('\n');
        out.push_str(&definition);
    }
    out.push_str("\n}  // namespace torch_nki_fast_abi\n");
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_dtype_has_a_code_that_round_trips() {
        let mut coded = 0;
        for d in DType::ALL {
            let Some(code) = FastDtype::of(d) else {
                assert_eq!(d.torch_name(), None, "{d} is a torch dtype without a code");
                continue;
            };
            assert_eq!(FastDtype::from_code(code as u8), Some(code));
            assert_eq!(code.dtype(), d);
            assert!(FastDtype::NARROWED.iter().all(|(n, _)| *n != code));
            coded += 1;
        }
        // Then the narrowed input dtypes, each computed in a kernel dtype of its own code.
        let narrowed: Vec<FastDtype> = (coded as u8..).map_while(FastDtype::from_code).collect();
        assert_eq!(narrowed, [FastDtype::I64]);
        assert_eq!(FastDtype::NARROWED, [(FastDtype::I64, 8)]);
        for (n, bytes) in FastDtype::NARROWED {
            // Wider than the kernel dtype it is computed in, so its buffer tells it apart.
            assert!(*bytes > n.dtype().size_bytes() && FastDtype::of(n.dtype()).is_some());
        }
        assert_eq!(FastDtype::ATEN.len(), coded + 1);
    }

    #[test]
    fn the_header_declares_every_struct_enum_and_dtype() {
        let h = header();
        for needle in [
            "constexpr uint32_t kAbiVersion = 2;",
            "enum class FastDtype : uint8_t {",
            "  F8E5M2 = 5,",
            "enum class FastScalarKind : uint8_t {",
            "  Str = 4,",
            "  X(BF16, BFloat16)",
            "  X(I64, Long)",
            "struct FastTensorMeta {\n  // 0 for an absent optional tensor.\n  uint8_t present;",
            "  int64_t shape[8][8];",
            "  void *data;",
            "  const void *(*lookup)(const char *);",
            "  int32_t (*plan)(const void *, const FastTensorMeta *, size_t, const FastScalar *, \
             size_t, FastPlan *);",
            "  void (*release)(const void *);",
            "  void (*set_host_threads)(void (*)(int64_t, void *, void (*)(void *, int64_t, \
             int64_t)), int64_t (*)(void));",
            "static_assert(offsetof(FastApi, release) == ",
        ] {
            assert!(h.contains(needle), "{needle:?} not in\n{h}");
        }
    }
}
