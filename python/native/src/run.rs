//! `run`: executes a kernel on caller-owned memory (zero copy) with the GIL released.
//!
//! The Python caller (`torch_nki`'s CPU kernel) passes the data pointers of contiguous CPU
//! tensors together with their exact shapes and dtypes; outputs are freshly allocated tensors.
//! Before any memory is touched the signature is compiled (or found in the cache) and the output
//! buffers are checked against the compiled program's outputs; the simulator then checks every
//! buffer's shape, dtype and byte length against the program.

use crate::args;
use crate::errors::{self, to_py_err};
use nki_core::contract::Qualified;
use nki_core::sim::{HostTensor, HostTensorMut, SimOptions, simulate};
use nki_core::{DType, KernelDef, NkiError, Signature};
use nki_registry::CompileCache;
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::panic::{AssertUnwindSafe, catch_unwind};

/// A buffer as Python passes it: `(data_ptr, shape, dtype_name)`.
type BufferArg = (usize, Vec<u64>, String);

/// A raw view of one tensor's memory: `len` bytes at `ptr`, row-major `shape` of `dtype`.
#[derive(Debug)]
struct RawBuffer {
    ptr: *mut u8,
    len: usize,
    shape: Vec<usize>,
    dtype: DType,
}

// SAFETY: a `RawBuffer` is only created by `run` from the data pointer of a live torch tensor
// that the calling Python frame keeps referenced until `run` returns, and it never outlives that
// call. Moving the pointer to the thread that runs the simulator (and its rayon workers) is
// sound because the caller does not touch the memory while the GIL is released: inputs are only
// read, and outputs are fresh tensors nobody else holds. `run` checks that no output overlaps any
// other buffer before creating slices from them.
unsafe impl Send for RawBuffer {}

impl RawBuffer {
    fn new(
        op: &str,
        role: &str,
        index: usize,
        (ptr, shape, dtype): &BufferArg,
    ) -> PyResult<RawBuffer> {
        let dtype = args::dtype(op, dtype)?;
        let bad =
            |what: &str| PyValueError::new_err(format!("{}: {role} {index} {what}", Qualified(op)));
        let shape: Vec<usize> = shape
            .iter()
            .map(|&d| {
                usize::try_from(d).map_err(|_| bad("has a dimension that does not fit in usize"))
            })
            .collect::<PyResult<_>>()?;
        let len = shape
            .iter()
            .try_fold(dtype.size_bytes(), |acc, &d| acc.checked_mul(d))
            .ok_or_else(|| bad("is too large to address"))?;
        if *ptr == 0 && len > 0 {
            return Err(bad("has a null data pointer"));
        }
        Ok(RawBuffer {
            ptr: *ptr as *mut u8,
            len,
            shape,
            dtype,
        })
    }

    fn range(&self) -> (usize, usize) {
        (self.ptr as usize, self.ptr as usize + self.len)
    }

    fn overlaps(&self, other: &RawBuffer) -> bool {
        let ((a0, a1), (b0, b1)) = (self.range(), other.range());
        self.len > 0 && other.len > 0 && a0 < b1 && b0 < a1
    }

    /// # Safety
    /// `ptr` must point to `len` readable bytes that stay valid and unmodified for `'a`.
    unsafe fn as_slice<'a>(&self) -> &'a [u8] {
        if self.len == 0 {
            return &[];
        }
        // SAFETY: guaranteed by the caller (see the `Send` impl and `Job::execute`).
        unsafe { std::slice::from_raw_parts(self.ptr, self.len) }
    }

    /// # Safety
    /// `ptr` must point to `len` writable bytes that nothing else reads or writes for `'a`.
    unsafe fn as_mut_slice<'a>(&mut self) -> &'a mut [u8] {
        if self.len == 0 {
            return &mut [];
        }
        // SAFETY: guaranteed by the caller (see the `Send` impl and `Job::execute`).
        unsafe { std::slice::from_raw_parts_mut(self.ptr, self.len) }
    }
}

/// One kernel invocation, ready to move off the GIL.
struct Job {
    def: &'static KernelDef,
    sig: Signature,
    inputs: Vec<RawBuffer>,
    outputs: Vec<RawBuffer>,
}

impl Job {
    fn execute(mut self) -> Result<(), NkiError> {
        let compiled = CompileCache::global().get_or_compile(self.def, &self.sig)?;
        let name = self.def.name;
        let given: Vec<(&[usize], DType)> = self
            .outputs
            .iter()
            .map(|b| (b.shape.as_slice(), b.dtype))
            .collect();
        let matches = given.len() == compiled.outputs.len()
            && given
                .iter()
                .zip(&compiled.outputs)
                .all(|((shape, dtype), meta)| {
                    *dtype == meta.dtype
                        && shape.len() == meta.shape.len()
                        && shape.iter().zip(&meta.shape).all(|(&a, &b)| a as u64 == b)
                });
        if !matches {
            let expected: Vec<String> = compiled
                .outputs
                .iter()
                .map(|m| format!("{} {:?}", m.dtype, m.shape))
                .collect();
            let got: Vec<String> = given.iter().map(|(s, d)| format!("{d} {s:?}")).collect();
            return Err(NkiError::Buffers(format!(
                "{}: output buffers [{}] do not match the compiled outputs [{}]",
                Qualified(name),
                got.join(", "),
                expected.join(", ")
            )));
        }
        for (i, out) in self.outputs.iter().enumerate() {
            let clash = self.inputs.iter().any(|b| out.overlaps(b))
                || self
                    .outputs
                    .iter()
                    .enumerate()
                    .any(|(j, b)| j != i && out.overlaps(b));
            if clash {
                return Err(NkiError::Buffers(format!(
                    "{}: output {i} overlaps another argument's memory",
                    Qualified(name)
                )));
            }
        }
        // SAFETY: the buffers come from live tensors the Python caller keeps alive for this call
        // and does not touch while the GIL is released (see `RawBuffer`); outputs overlap nothing
        // else (checked above), so the `&mut` slices are exclusive. Shapes, dtypes and byte
        // lengths are checked against the program by `simulate` before any access.
        let inputs: Vec<HostTensor<'_>> = self
            .inputs
            .iter()
            .map(|b| HostTensor {
                dtype: b.dtype,
                shape: &b.shape,
                data: unsafe { b.as_slice() },
            })
            .collect();
        let mut outputs: Vec<HostTensorMut<'_>> = self
            .outputs
            .iter_mut()
            .map(|b| {
                let data = unsafe { b.as_mut_slice() };
                HostTensorMut {
                    dtype: b.dtype,
                    shape: &b.shape,
                    data,
                }
            })
            .collect();
        let opts = SimOptions {
            parallel: true,
            plan: Some(&compiled.plan),
        };
        simulate(&compiled.program, &inputs, &mut outputs, opts)
    }
}

fn panic_message(payload: &(dyn std::any::Any + Send)) -> String {
    if let Some(s) = payload.downcast_ref::<&str>() {
        (*s).to_string()
    } else if let Some(s) = payload.downcast_ref::<String>() {
        s.clone()
    } else {
        "non-string panic payload".to_string()
    }
}

/// Runs op `name` on raw tensor memory.
///
/// `inputs` and `outputs` are `(data_ptr, shape, dtype_name)` of contiguous CPU tensors (an
/// input is `None` for an optional tensor left out), tensors
/// in parameter order, outputs in return order; `scalars` are the scalar arguments in parameter
/// order. The kernel is compiled once per signature and simulated with the GIL released, reading
/// and writing the tensors' memory in place.
///
/// This is a private entry point: the caller guarantees that every pointer is the data pointer of
/// a live, contiguous tensor of exactly the given shape and dtype, kept alive for the call.
#[pyfunction]
pub fn run(
    py: Python<'_>,
    name: &str,
    inputs: Vec<Option<BufferArg>>,
    scalars: Vec<Bound<'_, PyAny>>,
    outputs: Vec<BufferArg>,
) -> PyResult<()> {
    let def = errors::registry()?
        .get(name)
        .map_err(errors::registry_err)?;
    let shapes: Vec<Option<Vec<u64>>> = inputs
        .iter()
        .map(|b| b.as_ref().map(|b| b.1.clone()))
        .collect();
    let dtypes: Vec<Option<&str>> = inputs
        .iter()
        .map(|b| b.as_ref().map(|b| b.2.as_str()))
        .collect();
    let sig = args::signature(def, &shapes, &dtypes, &scalars)?;
    let raw_inputs = inputs
        .iter()
        .enumerate()
        .filter_map(|(i, b)| b.as_ref().map(|b| RawBuffer::new(name, "input", i, b)))
        .collect::<PyResult<Vec<_>>>()?;
    let raw_outputs = outputs
        .iter()
        .enumerate()
        .map(|(i, b)| RawBuffer::new(name, "output", i, b))
        .collect::<PyResult<Vec<_>>>()?;
    let job = Job {
        def,
        sig,
        inputs: raw_inputs,
        outputs: raw_outputs,
    };
    let result = py.detach(move || {
        catch_unwind(AssertUnwindSafe(move || job.execute())).unwrap_or_else(|payload| {
            Err(NkiError::Internal(format!(
                "{}: panic while compiling or simulating: {}",
                Qualified(def.name),
                panic_message(payload.as_ref())
            )))
        })
    });
    result.map_err(|e| to_py_err(e, def.name))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn raw(ptr: usize, len: usize) -> RawBuffer {
        RawBuffer {
            ptr: ptr as *mut u8,
            len,
            shape: vec![len],
            dtype: DType::F8E4M3,
        }
    }

    #[test]
    fn overlap_needs_shared_bytes() {
        assert!(raw(100, 10).overlaps(&raw(105, 10)));
        assert!(raw(105, 10).overlaps(&raw(100, 10)));
        assert!(!raw(100, 10).overlaps(&raw(110, 10)));
        assert!(
            !raw(100, 0).overlaps(&raw(100, 10)),
            "empty buffers overlap nothing"
        );
    }

    #[test]
    fn panic_payloads_become_messages() {
        let caught = catch_unwind(|| panic!("boom {}", 7)).unwrap_err();
        assert_eq!(panic_message(caught.as_ref()), "boom 7");
        let caught = catch_unwind(|| std::panic::panic_any(3u8)).unwrap_err();
        assert_eq!(panic_message(caught.as_ref()), "non-string panic payload");
    }
}
