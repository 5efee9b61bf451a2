//! Index generation and data movement by index: iota, gathers, shuffles, segment bounds and nonzero
//! indices.

use super::*;

/// The instructions this module records, by `nisa` name.
pub(super) const RECORDERS: &[(&str, Recorder)] = &[
    ("iota", iota),
    ("local_gather", local_gather),
    ("nc_n_gather", nc_n_gather),
    ("nc_stream_shuffle", nc_stream_shuffle),
    ("sequence_bounds", sequence_bounds),
    ("nonzero_with_count", nonzero_with_count),
];

/// `nisa.iota`.
fn iota(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let dst = a.tile("dst")?;
    let dims = iota_dims(a, dst.nf)?;
    let (offset, multiplier) = (a.int32("offset")?, a.int32("channel_multiplier")?);
    a.finish()?;
    tracer.at(file, line, || match dims.as_slice() {
        [(step, _)] => isa::iota(dst, offset, multiplier, *step),
        _ => isa::iota_pattern(dst, offset, multiplier, &dims),
    })
}

/// `nisa.local_gather`.
fn local_gather(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let dst = a.tile("dst")?;
    let (src, index) = (a.tile("src_buffer")?, a.tile("index")?);
    let n = a
        .opt_count("num_elem_per_idx")?
        .ok_or_else(|| a.value_error("num_elem_per_idx must be an int, got None".into()))?;
    let valid = a.opt_count("num_valid_indices")?;
    a.finish()?;
    tracer.at(file, line, || isa::local_gather(dst, src, index, n, valid))
}

/// `nisa.nc_n_gather`.
fn nc_n_gather(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let dst = a.tile("dst")?;
    let (data, indices) = (a.tile("data")?, a.tile("indices")?);
    a.finish()?;
    tracer.at(file, line, || isa::nc_n_gather(dst, data, indices))
}

/// `nisa.nc_stream_shuffle`.
fn nc_stream_shuffle(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let (dst, src) = (a.tile("dst")?, a.tile("src")?);
    let value = a.value("shuffle_mask")?;
    let mask: Vec<i64> = value
        .extract()
        .map_err(|_| a.type_error("shuffle_mask", "a list of 32 ints", &value))?;
    let mask: Vec<u8> = mask
        .iter()
        .map(|&m| u8::try_from(m))
        .collect::<Result<_, _>>()
        .map_err(|_| {
            a.value_error(format!(
                "shuffle_mask entries are partitions 0..31 or 255, got {mask:?}"
            ))
        })?;
    a.finish()?;
    tracer.at(file, line, || isa::nc_stream_shuffle(dst, src, &mask))
}

/// `nisa.sequence_bounds`.
fn sequence_bounds(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let (dst, ids) = (a.tile("dst")?, a.tile("segment_ids")?);
    a.finish()?;
    tracer.at(file, line, || isa::sequence_bounds(dst, ids))
}

/// `nisa.nonzero_with_count`.
fn nonzero_with_count(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let (dst, src) = (a.tile("dst")?, a.tile("src")?);
    let (offset, padding) = (a.int32("index_offset")?, a.int32("padding_val")?);
    a.finish()?;
    tracer.at(file, line, || {
        isa::nonzero_with_count(dst, src, offset, padding)
    })
}
