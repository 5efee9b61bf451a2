//! The tile language kernel authors write: HBM tensors and views, SBUF/PSUM tiles, engine
//! instructions and loops. Calls record into a [`Program`](crate::ir::Program) while
//! [`trace`] runs a kernel.

pub mod context;
pub mod hbm;
pub mod isa;
pub mod loops;
pub mod tile;

pub use context::{InputSpec, current_target, trace};
pub use hbm::{Hbm, HbmView, ViewDim, shared_hbm};
pub use isa::{
    DmaArg, activation, activation_reduce, dma_copy, memset, nc_matmul, tensor_copy, tensor_reduce,
    tensor_scalar, tensor_scalar2, tensor_tensor,
};
pub use loops::{TileSpan, affine_range, for_each_tile, sequential_range};
pub use tile::{Tile, psum, sbuf};
