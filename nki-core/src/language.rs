//! `nki_core::language`: what `nki.language` gives an NKI kernel, in Rust: buffers (HBM
//! outputs, SBUF and PSUM tiles), views, loops, tile sizes and dtypes. Instructions are in
//! [`crate::isa`]. Both come with `use nki_core::prelude::*`.
//!
//! | NKI (`nl`) | here |
//! |---|---|
//! | `nl.ndarray(shape, dtype, buffer=nl.shared_hbm)` | [`shared_hbm`] |
//! | `nl.ndarray(shape, dtype, buffer=nl.private_hbm)` (`nl.hbm`) | [`private_hbm`] |
//! | `nl.shared_constant(array)` | [`shared_constant`] |
//! | `nl.ndarray((P, F), dtype, buffer=nl.sbuf)` / `nl.psum` | [`sbuf`] / [`psum`] |
//! | `nl.affine_range(n)` / `nl.sequential_range(n)` | [`affine_range`] / [`sequential_range`] |
//! | `nl.program_id(axis)`, `nl.num_programs(axes)`, `nl.program_ndim()` | [`program_id`] (symbolic under [`crate::lang::trace_grid`], a constant under [`crate::lang::trace_instances`]), [`num_programs`], [`program_ndim`] |
//! | splitting work by `nl.program_id` across the cores of a logical NeuronCore (LNC=2) | [`program_share`], [`for_each_program_tile`] ([`share_of`] any instance's share, [`range_share_of`] in elements, as [`program_range`] gives it, [`program_instance`] which instance this is, [`for_each_tile_in`] the tiles of a share); registered kernels are launched with [`crate::lang::trace_on_cores`] |
//! | `nl.static_range(n)` | a Rust `for` loop (unrolled at trace time) |
//! | `nl.tile_size.pmax`, ... | [`tile_size::PMAX`], ... |
//! | `nl.float32`, `nl.bfloat16`, `nl.int32`, ... | [`float32`], [`bfloat16`], [`int32`], ... |

pub use crate::lang::context::current_target;
pub use crate::lang::grid::{num_programs, program_id, program_ndim};
pub use crate::lang::hbm::{Hbm, HbmView, ViewDim, private_hbm, shared_constant, shared_hbm};
pub use crate::lang::instances::{program_instance, program_share, share_of};
pub use crate::lang::loops::{
    TileSpan, affine_range, dynamic_range, for_each_program_tile, for_each_tile, for_each_tile_in,
    program_range, range_share_of, sequential_range, while_loop,
};
pub use crate::lang::register::Register;
pub use crate::lang::tile::{Tile, psum, sbuf};
pub use tile_size::{GEMM_MOVING_FMAX, GEMM_STATIONARY_FMAX, PMAX, PSUM_BANK_FMAX, PSUM_BANKS};

use crate::dtype::DType;

/// `nl.tile_size`: the hardware's tile limits.
pub mod tile_size {
    pub use crate::target::{
        GEMM_MOVING_FMAX, GEMM_STATIONARY_FMAX, PMAX, PSUM_BANK_FMAX, PSUM_BANKS,
    };
}

/// `nl.float32`.
#[allow(non_upper_case_globals)]
pub const float32: DType = DType::F32;
/// `nl.bfloat16`.
#[allow(non_upper_case_globals)]
pub const bfloat16: DType = DType::BF16;
/// `nl.float16`.
#[allow(non_upper_case_globals)]
pub const float16: DType = DType::F16;
/// `nl.float8_e4m3`.
#[allow(non_upper_case_globals)]
pub const float8_e4m3: DType = DType::F8E4M3;
/// `nl.float8_e5m2`.
#[allow(non_upper_case_globals)]
pub const float8_e5m2: DType = DType::F8E5M2;
/// `nl.int32`.
#[allow(non_upper_case_globals)]
pub const int32: DType = DType::I32;
