//! Running a kernel on the tensors' own memory (zero copy) with the GIL released: what
//! `Signature.run` does (see [`crate::signature`]).
//!
//! The Python caller (`torch_nki`'s CPU kernel) passes the torch tensors themselves. Under the
//! GIL, `run` reads each one's device, contiguity, data pointer, shape and dtype, and keeps a
//! reference to it until the call returns. A non-contiguous input is copied (`.contiguous()`, kept
//! alive for the call); an output must be contiguous (they are fresh tensors). Before any memory
//! is touched the signature is compiled (or found in the cache) and the output buffers are
//! checked against the compiled program's outputs; the simulator then checks every buffer's
//! shape, dtype and byte length against the program.

use crate::args;
use crate::errors::to_py_err;
use nki_core::contract::Qualified;
use nki_core::dtype::HostDType;
use nki_core::kernel_def::TensorSig;
use nki_core::sim::{HostTensor, HostTensorMut};
use nki_core::{Compiled, DType, KernelDef, NkiError};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use std::panic::{AssertUnwindSafe, catch_unwind};
use std::sync::Arc;

/// A tensor's memory as `run` reads it: `(data_ptr, shape, dtype_name)`.
type BufferArg = (usize, Vec<u64>, String);

/// The name the contract check takes for a torch dtype (`torch.bfloat16` → `bf16`, a float
/// host dtype by its host name: `torch.float64` → `f64`); other dtypes keep their torch name,
/// which the contract check rejects in words. The same rule as `torch_nki._dtypes.caller_name`,
/// from the same table.
fn dtype_name(torch_dtype: &str) -> String {
    let name = torch_dtype.strip_prefix("torch.").unwrap_or(torch_dtype);
    match (DType::from_torch_name(name), HostDType::find(name)) {
        (Some(d), _) => d.name(),
        (None, Some(h)) if h.is_float() => h.name,
        _ => name,
    }
    .to_string()
}

/// Reads a CPU tensor's buffer under the GIL. Returns the tensor whose memory the buffer
/// points into (a contiguous copy of an input that was not contiguous), which the caller must
/// keep alive while the buffer is used.
fn read_tensor<'py>(
    op: &str,
    role: &str,
    index: usize,
    tensor: &Bound<'py, PyAny>,
) -> PyResult<(Bound<'py, PyAny>, BufferArg)> {
    let py = tensor.py();
    let bad =
        |what: String| PyValueError::new_err(format!("{}: {role} {index} {what}", Qualified(op)));
    let is_cpu = tensor
        .getattr(pyo3::intern!(py, "is_cpu"))
        .and_then(|v| v.is_truthy())
        .map_err(|_| {
            bad(format!(
                "is not a tensor (got {})",
                tensor
                    .get_type()
                    .name()
                    .map_or_else(|_| "?".into(), |n| n.to_string())
            ))
        })?;
    if !is_cpu {
        let device = tensor
            .getattr(pyo3::intern!(py, "device"))?
            .str()?
            .to_string();
        return Err(bad(format!(
            "is on device {device}, but the CPU simulator needs cpu tensors"
        )));
    }
    let contiguous = tensor
        .call_method0(pyo3::intern!(py, "is_contiguous"))?
        .is_truthy()?;
    let tensor = if contiguous {
        tensor.clone()
    } else if role == "input" {
        tensor.call_method0(pyo3::intern!(py, "contiguous"))?
    } else {
        return Err(bad(
            "is not contiguous (outputs are written in place)".into()
        ));
    };
    let ptr: usize = tensor
        .call_method0(pyo3::intern!(py, "data_ptr"))?
        .extract()?;
    let shape: Vec<u64> = tensor.getattr(pyo3::intern!(py, "shape"))?.extract()?;
    let dtype = dtype_name(
        &tensor
            .getattr(pyo3::intern!(py, "dtype"))?
            .str()?
            .to_string(),
    );
    Ok((tensor, (ptr, shape, dtype)))
}

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
struct Job<C> {
    def: &'static KernelDef,
    /// The compiled program (found in the cache or compiled), called without the GIL.
    compiled: C,
    inputs: Vec<RawBuffer>,
    outputs: Vec<RawBuffer>,
}

impl<C: FnOnce() -> Result<Arc<Compiled>, NkiError>> Job<C> {
    fn execute(mut self) -> Result<(), NkiError> {
        let compiled = (self.compiled)()?;
        let name = self.def.name;
        let given: Vec<(&[usize], DType)> = self
            .outputs
            .iter()
            .map(|b| (b.shape.as_slice(), b.dtype))
            .collect();
        let matches = given.len() == compiled.outputs().len()
            && given
                .iter()
                .zip(compiled.outputs())
                .all(|((shape, dtype), meta)| {
                    *dtype == meta.dtype
                        && shape.len() == meta.shape.len()
                        && shape.iter().zip(&meta.shape).all(|(&a, &b)| a as u64 == b)
                });
        if !matches {
            let expected: Vec<String> = compiled
                .outputs()
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
                crate::pages::prepare_output(data);
                HostTensorMut {
                    dtype: b.dtype,
                    shape: &b.shape,
                    data,
                }
            })
            .collect();
        compiled.simulate(&inputs, &mut outputs, true)
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

/// Runs a kernel on tensors for a signature already checked: `inputs` are the tensor arguments
/// in parameter order (`None` for an optional tensor left out), each of the shape and kernel
/// dtype `expected` holds for it; `outputs` fresh contiguous CPU tensors in return order,
/// written in place. `compiled` finds (or compiles) the program; it and the simulation run with
/// the GIL released.
pub(crate) fn run_tensors(
    py: Python<'_>,
    def: &'static KernelDef,
    expected: &[Option<TensorSig>],
    inputs: &[Option<Bound<'_, PyAny>>],
    outputs: &[Bound<'_, PyAny>],
    compiled: impl FnOnce() -> Result<Arc<Compiled>, NkiError> + Send,
) -> PyResult<()> {
    let name = def.name;
    if inputs.len() != expected.len() {
        return Err(PyValueError::new_err(format!(
            "{}: expected {} tensor arguments (None for one left out), got {}",
            Qualified(name),
            expected.len(),
            inputs.len()
        )));
    }
    // The tensors (and any contiguous copies) stay referenced here until the call returns.
    let mut alive: Vec<Bound<'_, PyAny>> = Vec::with_capacity(inputs.len() + outputs.len());
    let mut raw_inputs = Vec::with_capacity(inputs.len());
    for (i, (t, want)) in inputs.iter().zip(expected).enumerate() {
        let t = t.as_ref().filter(|t| !t.is_none());
        match (t, want) {
            (None, None) => {}
            (Some(t), Some(want)) => {
                let (keep, arg) = read_tensor(name, "input", i, t)?;
                alive.push(keep);
                let buffer = RawBuffer::new(name, "input", i, &arg)?;
                let same = buffer.dtype == want.dtype
                    && buffer.shape.len() == want.shape.len()
                    && buffer
                        .shape
                        .iter()
                        .zip(&want.shape)
                        .all(|(&a, &b)| a as u64 == b);
                if !same {
                    return Err(to_py_err(
                        NkiError::Buffers(format!(
                            "{}: input {i} is {} {:?}, but the signature is for {} {:?}",
                            Qualified(name),
                            buffer.dtype,
                            buffer.shape,
                            want.dtype,
                            want.shape
                        )),
                        name,
                    ));
                }
                raw_inputs.push(buffer);
            }
            (given, _) => {
                let (is, was) = if given.is_some() {
                    ("a tensor", "left out")
                } else {
                    ("left out", "a tensor")
                };
                return Err(PyValueError::new_err(format!(
                    "{}: input {i} is {is}, but the signature has it {was}",
                    Qualified(name)
                )));
            }
        }
    }
    let mut raw_outputs = Vec::with_capacity(outputs.len());
    for (i, t) in outputs.iter().enumerate() {
        let (keep, arg) = read_tensor(name, "output", i, t)?;
        alive.push(keep);
        raw_outputs.push(RawBuffer::new(name, "output", i, &arg)?);
    }
    let job = Job {
        def,
        compiled,
        inputs: raw_inputs,
        outputs: raw_outputs,
    };
    let result = py.detach(move || {
        catch_unwind(AssertUnwindSafe(move || job.execute())).unwrap_or_else(|payload| {
            Err(NkiError::Internal(format!(
                "{}: panic while compiling or simulating: {}",
                Qualified(name),
                panic_message(payload.as_ref())
            )))
        })
    });
    drop(alive);
    result.map_err(|e| to_py_err(e, name))
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
