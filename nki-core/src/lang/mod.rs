//! The tracing machinery behind the tile language: the thread-local program builder
//! ([`context`]), HBM tensors and views ([`hbm`]), tiles ([`tile`]) and loops ([`loops`]).
//! Kernel authors use them through [`crate::language`] and [`crate::isa`] (or the prelude).

pub mod context;
pub mod hbm;
pub mod loops;
pub mod recorder;
pub mod tile;

pub use context::{InputSpec, current_target, trace};
pub use hbm::{Hbm, HbmView, ViewDim, shared_constant, shared_hbm};
pub use loops::{TileSpan, affine_range, for_each_tile, sequential_range};
pub use recorder::Recorder;
pub use tile::{Tile, psum, sbuf};
