//! The declarations: every public function of `nki.language` in NKI 0.7, in the order of the
//! API stub (`nki/api/nki/language/__init__.py`), with its section of `nki.language.rst`.
//! The stub also declares `divide`, `fmod` and `mod`, which `nki.language.rst` leaves out of
//! its lists (`divide` is commented there as not supported); they are declared here as the
//! stub has them. `dynamic_range` is marked deprecated after the NKI 0.6 release notes
//! (replaced by `fori_loop` / `while_loop`); its docstring carries no warning.

use super::{Category as C, FnSpec, Stability as St};
use crate::isa::build::{flag, none, opt, req};
use crate::isa::{Default as D, Kind as K, Param, Targets as T};

const fn f(
    category: C,
    name: &'static str,
    summary: &'static str,
    params: &'static [Param],
) -> FnSpec {
    FnSpec {
        name,
        category,
        summary,
        params,
        stability: St::Stable,
        targets: T::ALL,
    }
}

/// An experimental function.
const fn x(
    category: C,
    name: &'static str,
    summary: &'static str,
    params: &'static [Param],
) -> FnSpec {
    FnSpec {
        stability: St::Experimental,
        ..f(category, name, summary, params)
    }
}

/// A deprecated function.
const fn old(
    category: C,
    name: &'static str,
    summary: &'static str,
    params: &'static [Param],
) -> FnSpec {
    FnSpec {
        stability: St::Deprecated,
        ..f(category, name, summary, params)
    }
}

/// Only on NeuronCore-v4 and newer.
const fn gen4(spec: FnSpec) -> FnSpec {
    FnSpec {
        targets: T::GEN4,
        ..spec
    }
}

const DTYPE: Param = none("dtype", K::DType);
const UNARY: &[Param] = &[req("x", K::TileIn), DTYPE];
const BINARY: &[Param] = &[req("x", K::TileOrNumber), req("y", K::TileOrNumber), DTYPE];
const REDUCE: &[Param] = &[
    req("x", K::TileIn),
    req("axis", K::Axes),
    DTYPE,
    flag("keepdims", false),
];
const NEW: &[Param] = &[
    req("shape", K::Shape),
    req("dtype", K::DType),
    opt("buffer", K::Buffer, D::Buffer("sbuf")),
    opt("name", K::Str, D::Str("")),
];
const LIKE: &[Param] = &[
    req("x", K::TensorIn),
    DTYPE,
    none("buffer", K::Buffer),
    opt("name", K::Str, D::Str("")),
];
const RANGE: &[Param] = &[
    req("start", K::Int),
    none("stop", K::Int),
    opt("step", K::Int, D::Int(1)),
];
const BUFFER: &[Param] = &[req("buffer", K::Buffer)];

/// Every `nl` function, in the order of the API stub.
#[rustfmt::skip] // one declaration per line, as a table reads
pub static FUNCTIONS: &[FnSpec] = &[
    f(C::Memory, "is_hbm", "Whether a buffer is HBM (private or shared).", BUFFER),
    f(C::Memory, "is_on_chip", "Whether a buffer is on chip (SBUF or PSUM).", BUFFER),
    f(C::Memory, "is_psum", "Whether a buffer is PSUM.", BUFFER),
    f(C::Memory, "is_sbuf", "Whether a buffer is SBUF.", BUFFER),
    x(C::Math, "add", "x + y, elementwise.", BINARY),
    x(C::Math, "subtract", "x - y, elementwise.", BINARY),
    x(C::Math, "multiply", "x * y, elementwise.", BINARY),
    x(C::Math, "divide", "x / y, elementwise.", BINARY),
    x(C::Math, "maximum", "The larger of x and y, elementwise.", BINARY),
    x(C::Math, "minimum", "The smaller of x and y, elementwise.", BINARY),
    gen4(x(C::Math, "abs_max", "Whichever of x and y has the larger magnitude, sign kept, elementwise.", BINARY)),
    gen4(x(C::Math, "abs_min", "Whichever of x and y has the smaller magnitude, sign kept, elementwise.", BINARY)),
    x(C::Math, "abs", "|x|, elementwise.", UNARY),
    x(C::Math, "square", "x * x, elementwise.", UNARY),
    x(C::Math, "power", "x raised to the power y, elementwise.", BINARY),
    x(C::Comparison, "equal", "1 where x == y, 0 elsewhere.", BINARY),
    x(C::Comparison, "not_equal", "1 where x != y, 0 elsewhere.", BINARY),
    x(C::Comparison, "less", "1 where x < y, 0 elsewhere.", BINARY),
    x(C::Comparison, "less_equal", "1 where x <= y, 0 elsewhere.", BINARY),
    x(C::Comparison, "greater", "1 where x > y, 0 elsewhere.", BINARY),
    x(C::Comparison, "greater_equal", "1 where x >= y, 0 elsewhere.", BINARY),
    x(C::Bitwise, "bitwise_and", "The bits set in both x and y.", BINARY),
    x(C::Bitwise, "bitwise_or", "The bits set in x or y.", BINARY),
    x(C::Bitwise, "bitwise_xor", "The bits set in exactly one of x and y.", BINARY),
    x(C::Bitwise, "invert", "Every bit of x flipped.", UNARY),
    x(C::Bitwise, "left_shift", "x shifted left by y bits.", BINARY),
    x(C::Bitwise, "right_shift", "x shifted right by y bits (logical).", BINARY),
    x(C::Logical, "logical_and", "x and y, each nonzero read as true.", BINARY),
    x(C::Logical, "logical_or", "x or y, each nonzero read as true.", BINARY),
    x(C::Logical, "logical_xor", "Exactly one of x and y, each nonzero read as true.", BINARY),
    x(C::Logical, "logical_not", "not x, computed as x xor 1 (x should hold 0 or 1).", UNARY),
    x(C::Math, "exp", "e to the power x, elementwise.", UNARY),
    x(C::Math, "log", "The natural logarithm, elementwise.", UNARY),
    x(C::Math, "sqrt", "The non-negative square root, elementwise.", UNARY),
    x(C::Math, "rsqrt", "1 / sqrt(x), elementwise.", UNARY),
    f(C::Activation, "tanh", "The hyperbolic tangent, elementwise.", UNARY),
    f(C::Activation, "sigmoid", "1 / (1 + e^-x), elementwise.", UNARY),
    f(C::Activation, "relu", "max(x, 0), elementwise.", UNARY),
    f(C::Activation, "gelu", "The Gaussian error linear unit, elementwise.", UNARY),
    f(C::Activation, "gelu_apprx_sigmoid", "GELU approximated with a sigmoid, elementwise.", UNARY),
    f(C::Activation, "gelu_apprx_tanh", "GELU approximated with tanh, elementwise.", UNARY),
    f(C::Activation, "gelu_dx", "The derivative of GELU, elementwise.", UNARY),
    f(C::Activation, "gelu_apprx_sigmoid_dx", "The derivative of the sigmoid approximation of GELU.", UNARY),
    f(C::Activation, "silu", "x * sigmoid(x) (swish), elementwise.", UNARY),
    f(C::Activation, "silu_dx", "The derivative of SiLU, elementwise.", UNARY),
    f(C::Activation, "softplus", "log(1 + e^x), elementwise.", UNARY),
    f(C::Activation, "mish", "x * tanh(softplus(x)), elementwise.", UNARY),
    f(C::Activation, "erf", "The Gauss error function, elementwise.", UNARY),
    f(C::Activation, "erf_dx", "The derivative of erf, elementwise.", UNARY),
    x(C::Math, "reciprocal", "1 / x, elementwise.", UNARY),
    f(C::TensorOps, "copy", "A copy of an SBUF or PSUM tile, as a new SBUF tile of the same layout.", UNARY),
    x(C::Math, "sin", "The sine, elementwise (range-reduced first, so any input is accurate).", UNARY),
    x(C::Math, "cos", "The cosine, elementwise.", UNARY),
    x(C::Math, "tan", "The tangent, elementwise.", UNARY),
    x(C::Math, "arctan", "The inverse tangent, elementwise.", UNARY),
    x(C::Math, "ceil", "The smallest integer not below x, elementwise.", UNARY),
    x(C::Math, "floor", "The largest integer not above x, elementwise.", UNARY),
    x(C::Math, "trunc", "x rounded toward zero, elementwise.", UNARY),
    x(C::Math, "negative", "-x, elementwise.", UNARY),
    x(C::Math, "sign", "-1, 0 or 1 by the sign of x, elementwise.", UNARY),
    x(C::Math, "fmod", "The remainder of x / y with the sign of x (C's fmod), elementwise.", BINARY),
    x(C::Math, "mod", "The remainder of x / y with the sign of y (Python's %), elementwise.", BINARY),
    x(C::Reduction, "sum", "The sum over the given trailing free axes.", REDUCE),
    x(C::Reduction, "max", "The maximum over the given trailing free axes.", REDUCE),
    x(C::Reduction, "min", "The minimum over the given trailing free axes.", REDUCE),
    x(C::Reduction, "mean", "The mean over the given trailing free axes, computed in fp32.", REDUCE),
    x(C::Reduction, "prod", "The product over the given trailing free axes.", REDUCE),
    x(C::Reduction, "var", "The variance over the given trailing free axes (keepdims is ignored: always kept).", REDUCE),
    x(C::Reduction, "all", "Whether every element over the given trailing free axes is true.", &[
        req("x", K::TileIn),
        req("axis", K::Axes),
        DTYPE,
    ]),
    x(C::Activation, "softmax", "e^x normalised to sum 1 over the given trailing free axes.", &[
        req("x", K::TileIn),
        opt("axis", K::Axes, D::Int(-1)),
        DTYPE,
    ]),
    x(C::Normalization, "rms_norm", "x / sqrt(mean of x^2 over n values + epsilon) * w.", &[
        req("x", K::TileIn),
        req("w", K::TileIn),
        req("axis", K::Axes),
        req("n", K::Int),
        opt("epsilon", K::Number, D::Float(1e-6)),
        DTYPE,
        none("compute_dtype", K::DType),
    ]),
    x(C::Indexing, "where", "x where condition is 1.0, y where it is 0.0, elementwise.", &[
        req("condition", K::TileIn),
        req("x", K::TileIn),
        req("y", K::TileIn),
        DTYPE,
    ]),
    x(C::Normalization, "dropout", "x with each element zeroed with probability rate (an immediate or a (P, 1) column).", &[
        req("x", K::TileIn),
        req("rate", K::Scalar),
        DTYPE,
    ]),
    x(C::Creation, "ones", "A new tensor filled with ones.", NEW),
    x(C::Creation, "full", "A new tensor filled with fill_value.", &[
        req("shape", K::Shape),
        req("fill_value", K::Number),
        req("dtype", K::DType),
        opt("buffer", K::Buffer, D::Buffer("sbuf")),
        opt("name", K::Str, D::Str("")),
    ]),
    x(C::Creation, "zeros_like", "A new tensor of zeros shaped like x (dtype and buffer from x unless given).", LIKE),
    x(C::Creation, "empty_like", "A new, uninitialised tensor shaped like x (dtype and buffer from x unless given).", LIKE),
    x(C::Creation, "random_seed", "Seeds the generator nl.rand draws from, from a [1, 1] on-chip 32-bit tensor.", &[
        req("seed", K::TileIn),
    ]),
    x(C::Manipulation, "expand_dims", "A view of x with a size-1 axis inserted at axis.", &[
        req("x", K::TileIn),
        req("axis", K::Int),
    ]),
    x(C::Manipulation, "broadcast_to", "x broadcast (NumPy rules, same rank) to shape.", &[
        req("x", K::TileIn),
        req("shape", K::Shape),
        DTYPE,
    ]),
    x(C::TensorOps, "transpose", "A 2-D tile with its partition and free axes swapped.", UNARY),
    x(C::TensorOps, "matmul", "x @ y on the tensor engine (x.T @ y with transpose_x), into PSUM.", &[
        req("x", K::TileIn),
        req("y", K::TileIn),
        flag("transpose_x", false),
    ]),
    f(C::Other, "no_reorder", "A context manager: the instructions inside it keep program order.", &[]),
    x(C::TensorOps, "load_transpose2d", "Loads a 2-D HBM tensor into a new SBUF tile, transposed.", &[
        req("src", K::TensorIn),
        DTYPE,
    ]),
    x(C::Indexing, "gather_flattened", "Gathers elements of each partition of data by the indices tile, the free axes flattened.", &[
        req("data", K::TileIn),
        req("indices", K::TileIn),
        opt("axis", K::Int, D::Int(0)),
        DTYPE,
    ]),
    f(C::Manipulation, "ds", "A dynamic slice: size elements from start (an integer or a register), for indexing.", &[
        req("start", K::Register),
        req("size", K::Int),
    ]),
    old(C::Iterator, "affine_range", "range(), unrolled at trace time (kept for older kernels).", RANGE),
    old(C::Iterator, "sequential_range", "range(), unrolled at trace time (kept for older kernels).", RANGE),
    old(C::Iterator, "static_range", "range(), unrolled at trace time (kept for older kernels).", RANGE),
    old(C::Iterator, "dynamic_range", "A loop run on the device, its bounds integers or registers (replaced by fori_loop).", &[
        req("start", K::Register),
        none("stop", K::Register),
        opt("step", K::Int, D::Int(1)),
    ]),
    f(C::ControlFlow, "fori_loop", "Runs body_fun(i) on the device for i from lower to upper by step, i a register.", &[
        req("lower", K::Register),
        req("upper", K::Register),
        req("body_fun", K::Callable),
        opt("step", K::Int, D::Int(1)),
    ]),
    f(C::ControlFlow, "while_loop", "Runs r = body_fun(r) on the device while the register r is nonzero, from init.", &[
        req("init", K::Register),
        req("body_fun", K::Callable),
    ]),
    f(C::Creation, "ndarray", "A new, uninitialised tensor, optionally at a fixed (partition, free) address.", &[
        req("shape", K::Shape),
        req("dtype", K::DType),
        opt("buffer", K::Buffer, D::Buffer("sbuf")),
        opt("name", K::Str, D::Str("")),
        none("address", K::Ints),
    ]),
    x(C::Creation, "zeros", "A new tensor filled with zeros.", NEW),
    x(C::TensorOps, "load", "Loads an HBM tensor into a new SBUF tile.", &[
        req("src", K::TensorIn),
        DTYPE,
    ]),
    x(C::TensorOps, "store", "Stores an SBUF tile into an HBM tensor.", &[
        req("dst", K::TensorOut),
        req("value", K::TileIn),
    ]),
    f(C::Spmd, "program_id", "This program's index along an axis of the launch grid.", &[opt("axis", K::Int, D::Int(0))]),
    f(C::Spmd, "num_programs", "How many programs the launch grid has along the given axes.", &[opt("axes", K::Axes, D::Int(0))]),
    f(C::Spmd, "program_ndim", "How many axes the launch grid has (0 without a grid).", &[]),
    f(C::Creation, "shared_constant", "A shared-HBM tensor holding constant data (a NumPy array or a .npy path) baked into the kernel.", &[
        req("constant", K::Any),
    ]),
    f(C::Creation, "shared_identity_matrix", "An n x n identity matrix (uint8 unless dtype says otherwise), shared between its uses.", &[
        req("n", K::Int),
        opt("dtype", K::DType, D::DType("uint8")),
        none("dst", K::TileOut),
    ]),
    f(C::Other, "device_print", "Prints a prefix and the values of an SBUF or HBM tensor while the kernel runs.", &[
        req("print_prefix", K::Str),
        req("tensor", K::TensorIn),
    ]),
    x(C::Creation, "rand", "A new tensor of uniform random values between 0 and 1.", NEW),
];

/// The function called `name`.
pub fn function(name: &str) -> Option<&'static FnSpec> {
    FUNCTIONS.iter().find(|f| f.name == name)
}
