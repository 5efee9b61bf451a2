//! Index generation and data movement by index within on-chip memory: iota, gathers, shuffles,
//! segment bounds and nonzero indices.
//!
//! Declared here, expanded by [`super::instructions`]: each variant's operands (their roles)
//! and the NKI keyword(s) each field is spelled as.

/// Appends this family's variants to the declaration and hands it to the next family macro.
#[rustfmt::skip]
macro_rules! index_instructions {
    ([$next:ident $(, $rest:ident)*] $($acc:tt)*) => { $next! { [$($rest),*] $($acc)*

    /// GpSimd engine: `dst[p, f] = offset + channel_multiplier·p + Σ_d i_d·step_d` for
    /// partition `p` and free index `f` within the destination region, `f` walking the
    /// `pattern` entries `[step_d, num_d]` as nested loops (outermost first, `f = (…(i_0·num_1
    /// + i_1)·num_2 …)`), computed in int32 and written in `dst`'s dtype (`nisa.iota`).
    Iota = "iota" {
        /// Destination, in SBUF.
        write dst: TileRegion => dst,
        /// The value at `[0, 0]`.
        param offset: i32 => offset,
        /// Added per partition.
        param channel_multiplier: i32 => channel_multiplier,
        /// The free pattern `[[step, num], ...]`, its sizes' product `dst`'s free size.
        param pattern: Vec<IotaDim> => _,
    } explicit offset & channel_multiplier,
    /// GpSimd engine: within each group of 16 partitions (one GpSimd core), the group's indices
    /// (`index`'s 16 partitions flattened partition first, the first `num_valid_indices` of
    /// them) are free-element offsets into each of the group's partitions of `src`:
    /// `dst[p, k·n + e] = src[p, idx[k] + e]` for `e < n = num_elem_per_idx`.
    LocalGather = "local_gather" {
        /// Destination, `src`'s partitions and dtype, `num_valid_indices · num_elem_per_idx`
        /// elements per partition.
        write dst: TileRegion => dst,
        /// The gathered values (NKI's `src_buffer`), in SBUF.
        read src: TileRegion => src_buffer,
        /// The uint16 offsets, `src`'s partitions.
        read index: TileRegion => index,
        /// Contiguous elements read at each offset.
        param num_elem_per_idx: usize => num_elem_per_idx,
        /// Offsets used per group of 16 partitions (`None`: all `16 · index.nf`).
        param num_valid_indices: Option<usize> => num_valid_indices,
    } explicit num_elem_per_idx,
    /// GpSimd engine: `dst[p, j] = data[p, indices[p, j]]`, each partition gathering from its
    /// own free elements.
    NcNGather = "nc_n_gather" {
        /// Destination, `indices`' shape, `data`'s dtype.
        write dst: TileRegion => dst,
        /// The gathered values, in SBUF.
        read data: TileRegion => data,
        /// The uint32 free-element indices, `data`'s partitions.
        read indices: TileRegion => indices,
    },
    /// Vector engine: within each quadrant of 32 partitions of the regions, `dst` partition
    /// `32·q + i` takes `src` partition `32·q + mask[i]`, or keeps its value where `mask[i]` is
    /// 255.
    NcStreamShuffle = "nc_stream_shuffle" {
        /// Destination, `src`'s free size and dtype.
        write dst: TileRegion => dst,
        /// Source.
        read src: TileRegion => src,
        /// The 32 source partitions within a quadrant (255: unmodified).
        param mask: Vec<u8> => shuffle_mask,
    } keeps dst,
    /// GpSimd engine: for each element of a row of `segment_ids`, the start and the (exclusive)
    /// end of the run of equal ids it belongs to, the starts in `dst`'s first half and the ends
    /// in its second (NKI's `(1, 2, N)` tile); id 0 is padding, bounds `N` and −1.
    SequenceBounds = "sequence_bounds" {
        /// Destination, `(1, 2·N)` (NKI's `(1, 2, N)`), in SBUF.
        write dst: TileRegion => dst,
        /// The `(1, N)` segment ids, in SBUF.
        read segment_ids: TileRegion => segment_ids,
    },
    /// GpSimd engine: in the partitions of the regions that are multiples of 16 (each GpSimd
    /// core's first), the indices (plus `index_offset`) of `src`'s nonzero elements, then
    /// `padding_val` up to `src`'s free size, then their count, into `dst` (one element wider);
    /// the other partitions of `dst` keep their values.
    NonzeroWithCount = "nonzero_with_count" {
        /// Destination, int32, `src`'s free size + 1, in SBUF.
        write dst: TileRegion => dst,
        /// Input, in SBUF.
        read src: TileRegion => src,
        /// Added to every index found.
        param index_offset: i32 => index_offset,
        /// Written after the indices.
        param padding_val: i32 => padding_val,
    } keeps dst explicit index_offset & padding_val,

    } };
}

pub(super) use index_instructions;
