//! The tracing machinery behind the tile language: the thread-local program builder
//! ([`context`]), the launch grid ([`grid`], traced instance by instance in [`instances`]), HBM tensors and views ([`hbm`]), tiles ([`tile`]), registers ([`register`])
//! and loops ([`loops`]).
//! Kernel authors use them through [`crate::language`] and [`crate::isa`] (or the prelude).

pub mod context;
pub mod grid;
pub mod hbm;
pub mod instances;
pub mod loops;
pub mod recorder;
pub mod register;
pub mod tile;

pub use context::{InputSpec, current_target, trace, trace_grid};
pub use grid::{num_programs, program_id, program_ndim};
pub use hbm::{Hbm, HbmView, ViewDim, private_hbm, shared_constant, shared_hbm};
pub use instances::{program_instance, program_share, share_of, trace_instances, trace_on_cores};
pub use loops::{
    TileSpan, affine_range, dynamic_range, for_each_program_tile, for_each_tile, for_each_tile_in,
    program_range, range_share_of, sequential_range, while_loop,
};
pub use recorder::Recorder;
pub use register::Register;
pub use tile::{Tile, psum, sbuf};
