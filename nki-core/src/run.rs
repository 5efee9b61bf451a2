//! Running a kernel end to end on host arrays: check the contract, trace, validate, simulate.
//! The one-call path for kernel authors' tests and examples (the torch ops use the registry's
//! compile cache and zero-copy buffers instead).

use crate::dtype::DType;
use crate::error::NkiError;
use crate::kernel_def::{KernelDef, ScalarValue, Signature, TensorSig};
use crate::sim::{HostTensor, HostTensorMut, SimOptions, simulate};
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
    let program = &compiled.program;
    let present: Vec<&HostArray> = inputs.iter().flatten().copied().collect();
    let in_bytes: Vec<Vec<u8>> = present.iter().map(|a| a.bytes()).collect();
    let host_in: Vec<HostTensor<'_>> = present
        .iter()
        .zip(&in_bytes)
        .map(|(a, b)| HostTensor {
            dtype: a.dtype,
            shape: &a.shape,
            data: b,
        })
        .collect();
    let metas: Vec<(Vec<usize>, DType)> = program
        .outputs
        .iter()
        .map(|id| {
            let d = &program.hbm[id.0 as usize];
            (d.shape.clone(), d.dtype)
        })
        .collect();
    let mut out_bytes: Vec<Vec<u8>> = metas
        .iter()
        .map(|(s, d)| vec![0u8; s.iter().product::<usize>() * d.size_bytes()])
        .collect();
    let mut host_out: Vec<HostTensorMut<'_>> = metas
        .iter()
        .zip(out_bytes.iter_mut())
        .map(|((s, d), b)| HostTensorMut {
            dtype: *d,
            shape: s,
            data: b,
        })
        .collect();
    let opts = SimOptions {
        plan: Some(&compiled.plan),
        ..SimOptions::default()
    };
    simulate(program, &host_in, &mut host_out, opts)?;
    Ok(metas
        .iter()
        .zip(&out_bytes)
        .map(|((shape, dtype), b)| HostArray {
            shape: shape.clone(),
            dtype: *dtype,
            values: (0..b.len() / dtype.size_bytes())
                .map(|i| dtype.read(b, i))
                .collect(),
        })
        .collect())
}
