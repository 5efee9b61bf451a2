//! Multi-core instructions: `core_barrier`, `sendrecv`.

use super::*;

/// The instructions this module records, by `nisa` name.
pub(super) const RECORDERS: &[(&str, Recorder)] =
    &[("core_barrier", core_barrier), ("sendrecv", sendrecv)];

/// `nisa.core_barrier`.
fn core_barrier(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    // Which engine waits does not change what the barrier orders.
    a.value("engine")?;
    let data = tracer.dma_arg(&a.tensor("data")?)?;
    let cores_value = a.value("cores")?;
    let cores: Vec<usize> = cores_value
        .extract()
        .map_err(|_| a.type_error("cores", "a tuple of core ids", &cores_value))?;
    a.finish()?;
    tracer.at(file, line, || isa::core_barrier(data, &cores))
}

/// `nisa.sendrecv`.
fn sendrecv(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    // Which DMA engine moves the tile does not change the bytes it moves.
    a.value("dma_engine")?;
    let (dst, src) = (a.tile("dst")?, a.tile("src")?);
    let rank = |name: &str| -> PyResult<usize> {
        let v = a.int32(name)?;
        usize::try_from(v)
            .map_err(|_| a.value_error(format!("{name} must be a core id, 0 or 1, got {v}")))
    };
    let ranks = (rank("send_to_rank")?, rank("recv_from_rank")?);
    let pipe_id = rank("pipe_id")?;
    a.finish()?;
    tracer.at(file, line, || isa::sendrecv(dst, src, ranks, pipe_id))
}
