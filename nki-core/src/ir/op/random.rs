//! Random number generation: the XORWOW generators, their state and dropout.
//!
//! Declared here, expanded by [`super::instructions`]: each variant's operands (their roles)
//! and the NKI keyword(s) each field is spelled as.

/// Appends this family's variants to the declaration and hands it to the next family macro.
#[rustfmt::skip]
macro_rules! random_instructions {
    ([$next:ident $(, $rest:ident)*] $($acc:tt)*) => { $next! { [$($rest),*] $($acc)*

    /// `engine`'s XORWOW generators: 32 random bits per element of `dst`, each partition from
    /// its compute lane's state, truncated to `dst`'s integer dtype (its least significant bits).
    Rng = "rng" {
        /// Destination, an integer tile.
        write dst: TileRegion => dst,
        /// The vector engine or GpSimd (NeuronCore-v3+, SBUF only).
        param engine: ElementwiseEngine => engine,
    } explicit engine,
    /// Vector engine (NeuronCore-v4+): uniform fp32 values in `[min, max)` from the XORWOW
    /// generators, written in `dst`'s dtype.
    Rand2 = "rand2" {
        /// Destination.
        write dst: TileRegion => dst,
        /// The lower bound: an immediate or a `(P, 1)` column.
        read min: ScalarOperand => min,
        /// The upper bound (above `min`): an immediate or a `(P, 1)` column.
        read max: ScalarOperand => max,
    },
    /// Sets the XORWOW state of `engine`'s compute lanes, one lane per partition of the uint32
    /// `src_seeds` (6 words per lane on GpSimd, 24 on the vector engine).
    RandSetState = "rand_set_state" {
        /// The state words, uint32, in SBUF.
        read src_seeds: TileRegion => src_seeds,
        /// GpSimd or the vector engine (NeuronCore-v4+).
        param engine: ElementwiseEngine => engine,
    } explicit engine,
    /// Stores the XORWOW state of `engine`'s compute lanes into the uint32 `dst`, one lane per
    /// partition (6 words per lane on GpSimd, 24 on the vector engine).
    RandGetState = "rand_get_state" {
        /// Destination, uint32.
        write dst: TileRegion => dst,
        /// GpSimd or the vector engine (NeuronCore-v4+).
        param engine: ElementwiseEngine => engine,
    } explicit engine,
    /// Seeds every compute lane of the vector engine's generators from one 32-bit value.
    SetRngSeed = "set_rng_seed" {
        /// The `[1, 1]` seed, a 32-bit dtype.
        read src_seeds: TileRegion => src_seeds,
    },
    /// Vector engine: `dst = data`, each element replaced by zero with probability `prob`, one
    /// draw of the vector engine's generators per element.
    Dropout = "dropout" {
        /// Destination, `data`'s shape and dtype.
        write dst: TileRegion => dst,
        /// Input.
        read data: TileRegion => data,
        /// The drop probability: an immediate or a `(P, 1)` column.
        read prob: ScalarOperand => prob,
    },

    } };
}

pub(super) use random_instructions;
