//! The C ABI of the fast path: torch-nki's C++ dispatcher kernels (`torch_nki/csrc`) call a
//! module's kernels through [`FastApi`] without Python in between — plan (check the contract and
//! compile, through the compile cache), then execute on the tensors' memory. Anything the fast
//! path does not handle (a contract violation, an unusual dtype, a panic) returns
//! [`SLOW_PATH`], and the C++ kernel runs the op's Python kernel instead, which raises the
//! proper `torch_nki` exception; so the fast path never needs to produce an error itself.
//!
//! The table's address is handed to the C++ side by `_fast_api()`; each module (the package's
//! and every loaded kernel crate) has its own table and compile cache. The ABI's types are
//! defined once, in [`abi`], and the C++ side's header generated from them
//! (`_fast_abi_header()`).

use crate::guard::entry_point;
use nki_core::kernel_def::{ParamKind, ScalarValue, TensorSig};
use nki_core::sim::threads::{self, HostParallelFor, HostThreadCount, HostThreads};
use nki_core::sim::{HostTensor, HostTensorMut};
use nki_core::{Compiled, KernelDef, Signature, Target};
use nki_registry::CompileCache;
use smallvec::SmallVec;
use std::cell::RefCell;
use std::ffi::{CStr, c_char, c_void};
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

pub mod abi;
pub mod c_decl;

pub use abi::{
    FAST_ABI_VERSION, FastApi, FastBuffer, FastDtype, FastPlan, FastScalar, FastScalarKind,
    FastTensorMeta, MAX_OUTPUTS, MAX_RANK, OK, SLOW_PATH,
};

/// `plan`'s name for a forced panic.
const PLAN: &str = "fast.plan";
/// `execute`'s name for a forced panic.
const EXECUTE: &str = "fast.execute";

/// The C ABI functions that catch panics, by the names `_force_panic` arms them with. They
/// answer a panic with "take the slow path", so a forced panic there is invisible but for the
/// path taken.
pub const ENTRY_POINTS: &[&str] = &[PLAN, EXECUTE];

/// The table of this module.
pub static FAST_API: FastApi = FastApi {
    version: FAST_ABI_VERSION,
    lookup,
    plan,
    execute,
    release,
    set_host_threads,
};

/// `FastApi::set_host_threads`: the simulator's parallel work runs on `parallel_for` from now on.
unsafe extern "C" fn set_host_threads(parallel_for: HostParallelFor, threads: HostThreadCount) {
    // SAFETY: the C++ side's parallel-for is ATen's `at::parallel_for`, which runs every index
    // once and returns after its pieces; neither function throws (fast_ops.cpp catches).
    unsafe {
        threads::set_host_threads(Some(HostThreads {
            parallel_for,
            threads,
        }))
    };
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
        crate::guard::panic_if_forced(PLAN);
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
        // Counted, not collected: this runs on every fast call.
        if def.scalar_params().count() != scalars.len() || scalars.len() > MAX_SCALARS {
            return None;
        }
        let mut values = [ScalarValue::None; MAX_SCALARS];
        for ((v, s), p) in values.iter_mut().zip(scalars).zip(def.scalar_params()) {
            *v = scalar_value(s, p.kind)?;
        }
        let values = &values[..scalars.len()];
        let compiled = match recent(def, inputs, values) {
            Some(compiled) => compiled,
            None => {
                let sig = signature(inputs, values)?;
                let compiled = CompileCache::global().get_or_compile(def, &sig).ok()?;
                remember(def, sig, &compiled);
                compiled
            }
        };
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
            out.dtype[i] = FastDtype::of(o.dtype)? as u8;
        }
        out.handle = Arc::into_raw(compiled).cast();
        Some(())
    }));
    match result {
        Ok(Some(())) => OK,
        _ => SLOW_PATH,
    }
}

/// Inputs or outputs [`execute`] keeps on the stack (more take one allocation): a call's
/// tensors cost no allocation of their own.
const INLINE_TENSORS: usize = 8;

/// Most scalar arguments the fast path takes (more take the slow path).
const MAX_SCALARS: usize = 16;

/// Plans each thread remembers (most recent first), so a repeated call (a model calls each op
/// with the same arguments every step) finds its program without building, hashing and looking
/// up its signature in the compile cache. They keep at most this many programs per thread
/// alive beyond the cache's bound.
const RECENT: usize = 8;

thread_local! {
    static RECENT_PLANS: RefCell<Vec<(usize, Signature, Arc<Compiled>)>> =
        const { RefCell::new(Vec::new()) };
}

/// A scalar argument as the kernel's parameter of kind `kind` takes it.
fn scalar_value(s: &FastScalar, kind: ParamKind) -> Option<ScalarValue> {
    match (FastScalarKind::from_code(s.kind)?, kind) {
        (FastScalarKind::Float, _) => Some(ScalarValue::Float(s.f)),
        (FastScalarKind::Int, _) => Some(ScalarValue::Int(s.i)),
        (FastScalarKind::Bool, _) => Some(ScalarValue::Bool(s.i != 0)),
        (FastScalarKind::None, _) => Some(ScalarValue::None),
        (FastScalarKind::Str, ParamKind::Str { choices, .. }) if s.i != 0 => {
            // SAFETY: for `Str` `i` is the address of the caller's NUL-terminated string,
            // alive for the call.
            let text = unsafe { CStr::from_ptr(s.i as usize as *const c_char) };
            let text = text.to_str().ok()?;
            choices
                .iter()
                .find(|c| **c == text)
                .map(|c| ScalarValue::Str(c))
        }
        _ => None,
    }
}

/// The tensors' shapes as the caller passed them (`ndim` sizes at `shape`).
fn shape(m: &FastTensorMeta) -> &[i64] {
    // SAFETY: `shape` holds `ndim` sizes for the call.
    unsafe { slice(m.shape, m.ndim) }
}

/// The signature of a call.
fn signature(inputs: &[FastTensorMeta], scalars: &[ScalarValue]) -> Option<Signature> {
    let tensors = inputs
        .iter()
        .map(|m| {
            if m.present == 0 {
                return Some(None);
            }
            Some(Some(TensorSig {
                shape: shape(m)
                    .iter()
                    .map(|&d| u64::try_from(d).ok())
                    .collect::<Option<_>>()?,
                dtype: FastDtype::from_code(m.dtype)?.dtype(),
            }))
        })
        .collect::<Option<Vec<_>>>()?;
    Some(Signature {
        tensors,
        scalars: scalars.iter().map(|s| s.canonical()).collect(),
        target: TARGET,
    })
}

/// Whether `sig` is the signature of this call (scalars compare canonically).
fn same_call(sig: &Signature, inputs: &[FastTensorMeta], scalars: &[ScalarValue]) -> bool {
    sig.scalars.as_slice() == scalars
        && sig.tensors.len() == inputs.len()
        && sig.tensors.iter().zip(inputs).all(|(t, m)| match t {
            None => m.present == 0,
            Some(t) => {
                let given = shape(m);
                m.present != 0
                    && FastDtype::from_code(m.dtype).map(FastDtype::dtype) == Some(t.dtype)
                    && given.len() == t.shape.len()
                    && given
                        .iter()
                        .zip(&t.shape)
                        .all(|(&a, &b)| u64::try_from(a) == Ok(b))
            }
        })
}

/// The program this thread planned last for this call of `def`, if it is among its recent ones.
fn recent(
    def: &'static KernelDef,
    inputs: &[FastTensorMeta],
    scalars: &[ScalarValue],
) -> Option<Arc<Compiled>> {
    let key = std::ptr::from_ref(def) as usize;
    RECENT_PLANS.with_borrow(|plans| {
        plans
            .iter()
            .find(|(k, sig, _)| *k == key && same_call(sig, inputs, scalars))
            .map(|(_, _, compiled)| Arc::clone(compiled))
    })
}

/// Remembers a plan as this thread's most recent one.
fn remember(def: &'static KernelDef, sig: Signature, compiled: &Arc<Compiled>) {
    let key = std::ptr::from_ref(def) as usize;
    RECENT_PLANS.with_borrow_mut(|plans| {
        plans.insert(0, (key, sig, Arc::clone(compiled)));
        plans.truncate(RECENT);
    });
}

unsafe extern "C" fn execute(
    handle: *const c_void,
    inputs: *const FastBuffer,
    n_inputs: usize,
    outputs: *const FastBuffer,
    n_outputs: usize,
) -> i32 {
    let result = catch_unwind(AssertUnwindSafe(|| -> Option<()> {
        crate::guard::panic_if_forced(EXECUTE);
        if handle.is_null() {
            return None;
        }
        // SAFETY: `handle` is a live `Arc<Compiled>` from `plan` (released only after this);
        // the buffers are the caller's tensors, live and of the lengths given, outputs freshly
        // allocated and not aliasing anything.
        let compiled: &Compiled = unsafe { &*handle.cast::<Compiled>() };
        let (inputs, outputs) = unsafe { (slice(inputs, n_inputs), slice(outputs, n_outputs)) };
        let program = compiled.program();
        let decls = || program.inputs().map(|(_, d)| d);
        if decls().count() != inputs.len() || program.outputs.len() != outputs.len() {
            return None;
        }
        // An input planned as a narrowed dtype (an int64 index tensor planned as int32) is
        // told by its buffer, wider per element than the kernel's dtype: no state per call, and
        // no allocation unless one arrived.
        let mut narrowed: Vec<(usize, Vec<u8>)> = Vec::new();
        for (i, (b, d)) in inputs.iter().zip(decls()).enumerate() {
            let arrived = FastDtype::NARROWED
                .iter()
                .find(|(n, bytes)| n.dtype() == d.dtype && b.nbytes == d.numel() * bytes);
            match arrived {
                // SAFETY: see above.
                Some((FastDtype::I64, _)) => {
                    narrowed.push((i, narrow_indices(unsafe { bytes(b) })?))
                }
                Some(_) => return None,
                None => {}
            }
        }
        let host_in: SmallVec<[HostTensor<'_>; INLINE_TENSORS]> = decls()
            .zip(inputs)
            .enumerate()
            .map(|(i, (d, b))| HostTensor {
                dtype: d.dtype,
                shape: &d.shape,
                data: match narrowed.iter().find(|(j, _)| *j == i) {
                    Some((_, data)) => data,
                    // SAFETY: see above.
                    None => unsafe { bytes(b) },
                },
            })
            .collect();
        let mut host_out: SmallVec<[HostTensorMut<'_>; INLINE_TENSORS]> = program
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

/// An int64 tensor's bytes as the int32 the kernel takes, or `None` (the slow path, which
/// raises the contract's error) when a value does not fit.
fn narrow_indices(data: &[u8]) -> Option<Vec<u8>> {
    let mut out = Vec::with_capacity(data.len() / 2);
    for v in data.chunks_exact(8) {
        let v = i64::from_ne_bytes(v.try_into().expect("chunks of 8 bytes"));
        out.extend_from_slice(&i32::try_from(v).ok()?.to_ne_bytes());
    }
    Some(out)
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
    unsafe { slice(b.data.cast_const().cast::<u8>(), b.nbytes) }
}

/// # Safety
/// The buffer is writable and unaliased for `nbytes` for `'a`.
unsafe fn bytes_mut<'a>(b: &FastBuffer) -> &'a mut [u8] {
    if b.nbytes == 0 || b.data.is_null() {
        &mut []
    } else {
        // SAFETY: guaranteed by the caller.
        unsafe { std::slice::from_raw_parts_mut(b.data.cast::<u8>(), b.nbytes) }
    }
}

/// The C++ header of the ABI (`fast_abi.h`, see [`abi::header`]), which `torch_nki._fast`
/// writes beside the C++ kernels when it compiles them.
#[entry_point]
pub fn _fast_abi_header() -> pyo3::PyResult<String> {
    Ok(abi::header())
}

/// The C ABI functions a forced panic can be armed for ([`ENTRY_POINTS`]).
#[entry_point]
pub fn _fast_entry_points() -> Vec<&'static str> {
    ENTRY_POINTS.to_vec()
}

/// The address of this module's [`FastApi`] table, for the C++ kernels.
#[entry_point]
pub fn _fast_api() -> pyo3::PyResult<usize> {
    Ok(std::ptr::from_ref(&FAST_API) as usize)
}
