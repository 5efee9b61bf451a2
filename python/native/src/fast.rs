//! The C ABI of the fast path: torch-nki's C++ dispatcher kernels (`torch_nki/csrc`) call a
//! module's kernels through [`FastApi`] without Python in between — plan (check the contract and
//! compile, through the compile cache), then execute on the tensors' memory. Anything the fast
//! path does not handle (a contract violation, an unusual dtype, a panic) returns
//! [`SLOW_PATH`], and the C++ kernel runs the op's Python kernel instead, which raises the
//! proper `torch_nki` exception; so the fast path never needs to produce an error itself.
//!
//! The table's address is handed to the C++ side by `_fast_api()`; each module (the package's
//! and every loaded kernel crate) has its own table and compile cache.

use nki_core::kernel_def::{ParamKind, ScalarValue, TensorSig};
use nki_core::sim::{HostTensor, HostTensorMut};
use nki_core::{Compiled, DType, KernelDef, Signature, Target};
use nki_registry::CompileCache;
use std::ffi::{CStr, c_char, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

/// The ABI version; the C++ side refuses a table with another.
pub const FAST_ABI_VERSION: u32 = 1;
/// Success.
pub const OK: i32 = 0;
/// Run the op's Python kernel instead.
pub const SLOW_PATH: i32 = 1;
/// Most outputs a plan describes (more take the slow path).
pub const MAX_OUTPUTS: usize = 8;
/// Highest output rank a plan describes (higher take the slow path).
pub const MAX_RANK: usize = 8;

/// One tensor argument's shape and dtype (`present == 0`: an optional tensor left out).
#[repr(C)]
pub struct FastTensorMeta {
    /// 0 for an absent optional tensor.
    pub present: u8,
    /// Dtype code: 0 f32, 1 bf16, 2 f16, 3 i32, 4 f8e4m3, 5 f8e5m2.
    pub dtype: u8,
    /// Rank.
    pub ndim: usize,
    /// `ndim` sizes.
    pub shape: *const i64,
}

/// One scalar argument.
#[repr(C)]
pub struct FastScalar {
    /// 0 float, 1 int, 2 bool, 3 `None` (an optional scalar left out), 4 str (`i` is the
    /// address of a NUL-terminated string).
    pub kind: u8,
    /// The float value.
    pub f: f64,
    /// The int (or bool as 0/1) value.
    pub i: i64,
}

/// A compiled program for one call, and its outputs.
#[repr(C)]
pub struct FastPlan {
    /// An `Arc<Compiled>` to pass to `execute` and then `release`.
    pub handle: *const c_void,
    /// Number of outputs.
    pub n_outputs: usize,
    /// Each output's rank.
    pub ndim: [usize; MAX_OUTPUTS],
    /// Each output's shape.
    pub shape: [[i64; MAX_RANK]; MAX_OUTPUTS],
    /// Each output's dtype code.
    pub dtype: [u8; MAX_OUTPUTS],
}

/// One tensor's memory.
#[repr(C)]
pub struct FastBuffer {
    /// The data pointer.
    pub data: *mut u8,
    /// Its length in bytes.
    pub nbytes: usize,
}

/// The function table.
#[repr(C)]
pub struct FastApi {
    /// [`FAST_ABI_VERSION`].
    pub version: u32,
    /// The kernel named by a NUL-terminated string (null when unknown).
    pub lookup: unsafe extern "C" fn(*const c_char) -> *const c_void,
    /// Plans a call for Trn2: `(kernel, inputs, n_inputs, scalars, n_scalars, out plan)`.
    pub plan: unsafe extern "C" fn(
        *const c_void,
        *const FastTensorMeta,
        usize,
        *const FastScalar,
        usize,
        *mut FastPlan,
    ) -> i32,
    /// Executes a plan: `(handle, inputs, n_inputs, outputs, n_outputs)`; present inputs only.
    pub execute: unsafe extern "C" fn(
        *const c_void,
        *const FastBuffer,
        usize,
        *const FastBuffer,
        usize,
    ) -> i32,
    /// Releases a plan's handle.
    pub release: unsafe extern "C" fn(*const c_void),
}

/// The table of this module.
pub static FAST_API: FastApi = FastApi {
    version: FAST_ABI_VERSION,
    lookup,
    plan,
    execute,
    release,
};

fn dtype(code: u8) -> Option<DType> {
    Some(match code {
        0 => DType::F32,
        1 => DType::BF16,
        2 => DType::F16,
        3 => DType::I32,
        4 => DType::F8E4M3,
        5 => DType::F8E5M2,
        _ => return None,
    })
}

fn code(d: DType) -> u8 {
    match d {
        DType::F32 => 0,
        DType::BF16 => 1,
        DType::F16 => 2,
        DType::I32 => 3,
        DType::F8E4M3 => 4,
        DType::F8E5M2 => 5,
    }
}

/// The target kernels are compiled for on this path (the torch ops' default).
const TARGET: Target = Target::Trn2;

unsafe extern "C" fn lookup(name: *const c_char) -> *const c_void {
    let found = catch_unwind(|| {
        if name.is_null() {
            return None;
        }
        // SAFETY: the caller passes a NUL-terminated string.
        let name = unsafe { CStr::from_ptr(name) }.to_str().ok()?;
        let registry = nki_registry::Registry::global().ok()?;
        registry.get(name).ok()
    });
    match found {
        Ok(Some(def)) => std::ptr::from_ref::<KernelDef>(def).cast(),
        _ => std::ptr::null(),
    }
}

unsafe extern "C" fn plan(
    kernel: *const c_void,
    inputs: *const FastTensorMeta,
    n_inputs: usize,
    scalars: *const FastScalar,
    n_scalars: usize,
    out: *mut FastPlan,
) -> i32 {
    let result = catch_unwind(AssertUnwindSafe(|| -> Option<()> {
        crate::guard::panic_if_forced("fast.plan");
        if kernel.is_null() || out.is_null() {
            return None;
        }
        // SAFETY: `kernel` came from `lookup` (a `&'static KernelDef`); the arrays have the
        // lengths given; `out` points to a writable plan.
        let (def, inputs, scalars, out) = unsafe {
            (
                &*kernel.cast::<KernelDef>(),
                slice(inputs, n_inputs),
                slice(scalars, n_scalars),
                &mut *out,
            )
        };
        let tensors = inputs
            .iter()
            .map(|m| {
                if m.present == 0 {
                    return Some(None);
                }
                // SAFETY: `shape` holds `ndim` sizes.
                let shape = unsafe { slice(m.shape, m.ndim) };
                Some(Some(TensorSig {
                    shape: shape
                        .iter()
                        .map(|&d| u64::try_from(d).ok())
                        .collect::<Option<_>>()?,
                    dtype: dtype(m.dtype)?,
                }))
            })
            .collect::<Option<Vec<_>>>()?;
        // Counted, not collected: this runs on every fast call.
        if def.scalar_params().count() != scalars.len() {
            return None;
        }
        let scalars = scalars
            .iter()
            .zip(def.scalar_params())
            .map(|(s, p)| match (s.kind, p.kind) {
                (0, _) => Some(ScalarValue::Float(s.f)),
                (1, _) => Some(ScalarValue::Int(s.i)),
                (2, _) => Some(ScalarValue::Bool(s.i != 0)),
                (3, _) => Some(ScalarValue::None),
                (4, ParamKind::Str { choices, .. }) if s.i != 0 => {
                    // SAFETY: for kind 4 `i` is the address of the caller's NUL-terminated
                    // string, alive for the call.
                    let text = unsafe { CStr::from_ptr(s.i as usize as *const c_char) };
                    let text = text.to_str().ok()?;
                    choices
                        .iter()
                        .find(|c| **c == text)
                        .map(|c| ScalarValue::Str(c))
                }
                _ => None,
            })
            .collect::<Option<Vec<_>>>()?;
        let sig = Signature {
            tensors,
            scalars: scalars.into_iter().map(ScalarValue::canonical).collect(),
            target: TARGET,
        };
        let compiled = CompileCache::global().get_or_compile(def, &sig).ok()?;
        if compiled.outputs().len() > MAX_OUTPUTS {
            return None;
        }
        out.n_outputs = compiled.outputs().len();
        for (i, o) in compiled.outputs().iter().enumerate() {
            if o.shape.len() > MAX_RANK {
                return None;
            }
            out.ndim[i] = o.shape.len();
            for (k, &d) in o.shape.iter().enumerate() {
                out.shape[i][k] = i64::try_from(d).ok()?;
            }
            out.dtype[i] = code(o.dtype);
        }
        out.handle = Arc::into_raw(compiled).cast();
        Some(())
    }));
    match result {
        Ok(Some(())) => OK,
        _ => SLOW_PATH,
    }
}

unsafe extern "C" fn execute(
    handle: *const c_void,
    inputs: *const FastBuffer,
    n_inputs: usize,
    outputs: *const FastBuffer,
    n_outputs: usize,
) -> i32 {
    let result = catch_unwind(AssertUnwindSafe(|| -> Option<()> {
        crate::guard::panic_if_forced("fast.execute");
        if handle.is_null() {
            return None;
        }
        // SAFETY: `handle` is a live `Arc<Compiled>` from `plan` (released only after this);
        // the buffers are the caller's tensors, live and of the lengths given, outputs freshly
        // allocated and not aliasing anything.
        let compiled: &Compiled = unsafe { &*handle.cast::<Compiled>() };
        let (inputs, outputs) = unsafe { (slice(inputs, n_inputs), slice(outputs, n_outputs)) };
        let program = compiled.program();
        let decls: Vec<_> = program.inputs().map(|(_, d)| d).collect();
        if decls.len() != inputs.len() || program.outputs.len() != outputs.len() {
            return None;
        }
        let host_in: Vec<HostTensor<'_>> = decls
            .iter()
            .zip(inputs)
            .map(|(d, b)| HostTensor {
                dtype: d.dtype,
                shape: &d.shape,
                // SAFETY: see above.
                data: unsafe { bytes(b) },
            })
            .collect();
        let mut host_out: Vec<HostTensorMut<'_>> = program
            .outputs
            .iter()
            .zip(outputs)
            .map(|(id, b)| {
                let d = &program.hbm[id.0 as usize];
                // SAFETY: see above.
                let data = unsafe { bytes_mut(b) };
                crate::pages::prepare_output(data);
                HostTensorMut {
                    dtype: d.dtype,
                    shape: &d.shape,
                    data,
                }
            })
            .collect();
        compiled.simulate(&host_in, &mut host_out, true).ok()
    }));
    match result {
        Ok(Some(())) => OK,
        _ => SLOW_PATH,
    }
}

unsafe extern "C" fn release(handle: *const c_void) {
    if !handle.is_null() {
        // SAFETY: `handle` came from `Arc::into_raw` in `plan` and is released once.
        drop(unsafe { Arc::from_raw(handle.cast::<Compiled>()) });
    }
}

/// # Safety
/// `ptr` points to `len` valid `T`s (or `len` is 0).
unsafe fn slice<'a, T>(ptr: *const T, len: usize) -> &'a [T] {
    if len == 0 || ptr.is_null() {
        &[]
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { std::slice::from_raw_parts(ptr, len) }
    }
}

/// # Safety
/// The buffer is readable for `nbytes` for `'a`.
unsafe fn bytes<'a>(b: &FastBuffer) -> &'a [u8] {
    // SAFETY: guaranteed by the caller.
    unsafe { slice(b.data.cast_const(), b.nbytes) }
}

/// # Safety
/// The buffer is writable and unaliased for `nbytes` for `'a`.
unsafe fn bytes_mut<'a>(b: &FastBuffer) -> &'a mut [u8] {
    if b.nbytes == 0 || b.data.is_null() {
        &mut []
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { std::slice::from_raw_parts_mut(b.data, b.nbytes) }
    }
}

/// The address of this module's [`FastApi`] table, for the C++ kernels.
#[pyo3::pyfunction]
pub fn _fast_api() -> pyo3::PyResult<usize> {
    crate::guard::guard("_fast_api", || Ok(std::ptr::from_ref(&FAST_API) as usize))
}
