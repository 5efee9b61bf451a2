//! Running a kernel end to end on host arrays: check the contract, trace, validate, simulate.
//! The one-call path for kernel authors' tests and examples (the torch ops use the registry's
//! compile cache and zero-copy buffers instead).

use crate::dtype::DType;
use crate::error::NkiError;
use crate::kernel_def::{KernelDef, ScalarValue, Signature, TensorSig};
use crate::target::Target;

/// A host tensor whose values are held as fp32 (exactly representable in `dtype`).
#[derive(Clone, Debug, PartialEq)]
pub struct HostArray {
    /// Shape.
    pub shape: Vec<usize>,
    /// Element type the kernel sees.
    pub dtype: DType,
    /// Row-major values.
    pub values: Vec<f32>,
}

impl HostArray {
    /// An array of `dtype`; values are rounded to it (nearest even).
    pub fn new(shape: &[usize], dtype: DType, values: impl IntoIterator<Item = f32>) -> HostArray {
        let values: Vec<f32> = values.into_iter().map(|v| dtype.round(v)).collect();
        HostArray {
            shape: shape.to_vec(),
            dtype,
            values,
        }
    }

    fn bytes(&self) -> Vec<u8> {
        let mut b = vec![0u8; self.values.len() * self.dtype.size_bytes()];
        for (i, v) in self.values.iter().enumerate() {
            self.dtype.write(&mut b, i, *v);
        }
        b
    }
}

/// Runs `kernel` on `inputs` (tensor parameters in order) and `scalars` (scalar parameters in
/// order) for `target`, returning the outputs.
pub fn run_kernel(
    kernel: &KernelDef,
    inputs: &[HostArray],
    scalars: &[ScalarValue],
    target: Target,
) -> Result<Vec<HostArray>, NkiError> {
    let inputs: Vec<Option<&HostArray>> = inputs.iter().map(Some).collect();
    run_kernel_with(kernel, &inputs, scalars, target)
}

/// [`run_kernel`] with optional tensors: `None` leaves an optional (`Tensor?`) parameter out.
pub fn run_kernel_with(
    kernel: &KernelDef,
    inputs: &[Option<&HostArray>],
    scalars: &[ScalarValue],
    target: Target,
) -> Result<Vec<HostArray>, NkiError> {
    for a in inputs.iter().flatten() {
        if a.values.len() != a.shape.iter().product::<usize>() {
            return Err(NkiError::Buffers(format!(
                "{}: {} values for shape {:?}",
                crate::contract::Qualified(kernel.name),
                a.values.len(),
                a.shape
            )));
        }
    }
    let sig = Signature {
        tensors: inputs
            .iter()
            .map(|a| {
                a.map(|a| TensorSig {
                    shape: a.shape.iter().map(|&d| d as u64).collect(),
                    dtype: a.dtype,
                })
            })
            .collect(),
        scalars: scalars.to_vec(),
        target,
    };
    let compiled = crate::compile::compile(kernel, &sig)?;
    let program = compiled.program();
    let in_bytes: Vec<Vec<u8>> = inputs.iter().flatten().map(|a| a.bytes()).collect();
    let in_refs: Vec<&[u8]> = in_bytes.iter().map(Vec::as_slice).collect();
    let outputs = compiled.simulate_to_vecs(&in_refs, true)?;
    Ok(program
        .outputs
        .iter()
        .zip(&outputs)
        .map(|(id, b)| {
            let d = &program.hbm[id.0 as usize];
            HostArray {
                shape: d.shape.clone(),
                dtype: d.dtype,
                values: (0..b.len() / d.dtype.size_bytes())
                    .map(|i| d.dtype.read(b, i))
                    .collect(),
            }
        })
        .collect())
}
