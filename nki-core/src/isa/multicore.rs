//! The multi-core instructions of a logical NeuronCore (LNC=2, NeuronCore-v3 and newer):
//! `core_barrier` and `sendrecv`. The simulator runs the program instances of a launch in
//! lockstep between them (`sim/lockstep.rs`).

use super::DmaArg;
use crate::ir::{Buffer, DmaOperand, Op, TileRegion};
use crate::lang::context::with_builder;
use crate::loc::SourceLoc;

/// The cores of a logical NeuronCore: the ranks `sendrecv` names and `core_barrier` lists.
pub const LNC_CORES: usize = 2;

/// `nisa.core_barrier(data, cores)`: every core in `cores` waits until all of them arrive, so
/// what each wrote to `data` (a shared HBM tensor) before is what the others read after.
/// `cores` is `(0, 1)`, or a single core (a barrier with itself, which waits for nothing),
/// as the docs allow under LNC=2.
#[track_caller]
pub fn core_barrier(data: impl Into<DmaArg>, cores: &[usize]) {
    let loc = SourceLoc::caller();
    let data = data.into();
    with_builder(|b| {
        let data = match data {
            DmaArg::Hbm(v) => match v.to_access() {
                Ok(access) => DmaOperand::Hbm { access },
                Err(m) => return b.fail(loc, format!("core_barrier data: {m}")),
            },
            DmaArg::Tile(_) => {
                return b.fail(
                    loc,
                    "core_barrier: data must be a tensor in shared HBM, not an on-chip tile".into(),
                );
            }
        };
        let ok = matches!(cores, [0, 1] | [0] | [1]);
        if !ok {
            return b.fail(
                loc,
                format!(
                    "core_barrier: cores must be (0, 1), the two cores of a logical NeuronCore \
                     (or one of them), got {cores:?}"
                ),
            );
        }
        b.push_op(
            Op::CoreBarrier {
                data,
                cores: cores.to_vec(),
            },
            loc,
        );
    });
}

/// `nisa.sendrecv(src, dst, send_to_rank, recv_from_rank, pipe_id)`: this core's `src` goes
/// to core `send_to_rank`'s `dst` while core `recv_from_rank`'s `src` arrives in this core's
/// `dst`. Both are SBUF tiles of one shape and dtype (checked by [`crate::validate`] for the
/// buffers); ranks are 0 or 1.
#[track_caller]
pub fn sendrecv(
    dst: impl Into<TileRegion>,
    src: impl Into<TileRegion>,
    (send_to_rank, recv_from_rank): (usize, usize),
    pipe_id: usize,
) {
    let loc = SourceLoc::caller();
    let (dst, src) = (dst.into(), src.into());
    with_builder(|b| {
        if send_to_rank >= LNC_CORES || recv_from_rank >= LNC_CORES {
            return b.fail(
                loc,
                format!(
                    "sendrecv: send_to_rank and recv_from_rank are cores of the logical \
                     NeuronCore, 0 or 1, got {send_to_rank} and {recv_from_rank}"
                ),
            );
        }
        if dst.shape() != src.shape() {
            return b.fail(
                loc,
                format!(
                    "sendrecv: src {:?} and dst {:?} must have one shape",
                    src.shape(),
                    dst.shape()
                ),
            );
        }
        let (dtile, stile) = (&b.tiles[dst.tile.0 as usize], &b.tiles[src.tile.0 as usize]);
        if dtile.buffer != Buffer::Sbuf || stile.buffer != Buffer::Sbuf {
            return b.fail(
                loc,
                format!(
                    "sendrecv: src and dst must be SBUF tiles, got {} and {}",
                    stile.buffer.name(),
                    dtile.buffer.name()
                ),
            );
        }
        let (dt, st) = (dtile.dtype, stile.dtype);
        if dt != st {
            return b.fail(
                loc,
                format!("sendrecv: src is {st} and dst is {dt}; they must have one dtype"),
            );
        }
        b.push_op(
            Op::SendRecv {
                dst,
                src,
                send_to_rank,
                recv_from_rank,
                pipe_id,
            },
            loc,
        );
    });
}
