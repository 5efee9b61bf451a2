//! Tiling helpers shared by the kernels: rows of a tensor's last dimension, and column chunks.

use nki_core::prelude::*;

/// Columns per chunk of the row kernels: 2048 fp32 = 8 KiB per partition per tile.
pub(crate) const CHUNK: usize = 2048;

/// `[..B, D]` as `(N, D)`: every leading dim flattened into rows of the last one.
pub(crate) fn rows_of(x: &Hbm) -> (usize, usize) {
    let d = *x.shape().last().unwrap_or(&1);
    (x.numel() / d.max(1), d)
}

/// `(start, width)` of each [`CHUNK`]-column chunk of a `d`-wide row.
pub(crate) fn column_chunks(d: usize) -> Vec<(usize, usize)> {
    (0..d)
        .step_by(CHUNK)
        .map(|c0| (c0, CHUNK.min(d - c0)))
        .collect()
}
