//! # `torch_nki._native`
//!
//! The native module of the `torch_nki` package: the library kernels (`nki-kernels`) behind the
//! module body every torch-nki native module shares (`nki-python`; see its docs for the
//! functions). Out-of-tree kernel crates build the same module around their own kernels.

// `inventory` only collects kernels from crates that are linked: reference the kernel library
// explicitly so the linker keeps it.
use nki_kernels as _;

nki_python::nki_module!(_native);
