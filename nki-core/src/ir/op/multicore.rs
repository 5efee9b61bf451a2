//! Multi-core instructions of a logical NeuronCore (LNC=2): the barrier between its cores and
//! the exchange of SBUF tiles between them.
//!
//! Declared here, expanded by [`super::instructions`]: each variant's operands (their roles)
//! and the NKI keyword(s) each field is spelled as. The simulator runs the program instances
//! of a launch in lockstep between these instructions (`sim/lockstep.rs`).

/// Appends this family's variants to the declaration and hands it to the next family macro.
#[rustfmt::skip]
macro_rules! multicore_instructions {
    ([$next:ident $(, $rest:ident)*] $($acc:tt)*) => { $next! { [$($rest),*] $($acc)*

    /// GpSimd: every core in `cores` waits here until all of them arrived, so what each wrote
    /// to shared HBM before the barrier is what the others read after it.
    CoreBarrier = "core_barrier" {
        /// The shared HBM tensor the cores synchronise on.
        read data: DmaOperand => data,
        /// The cores that meet: `(0, 1)` (both cores of the logical core) or one of them.
        param cores: Vec<usize> => cores,
    },
    /// DMA: this core's `src` goes to core `send_to_rank`'s `dst` while core
    /// `recv_from_rank`'s `src` arrives in this core's `dst` (SBUF to SBUF, one dtype and
    /// shape on both sides).
    SendRecv = "sendrecv" {
        /// This core's SBUF tile receiving the other core's `src`.
        write dst: TileRegion => dst,
        /// This core's SBUF tile sent.
        read src: TileRegion => src,
        /// The core receiving `src`.
        param send_to_rank: usize => send_to_rank,
        /// The core whose `src` this core receives.
        param recv_from_rank: usize => recv_from_rank,
        /// The group of exchanges that complete together.
        param pipe_id: usize => pipe_id,
    },

    } };
}

pub(super) use multicore_instructions;
