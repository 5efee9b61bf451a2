//! Random number generation: `rng`, `rand2`, the generator state, seeds and dropout.

use super::*;

/// The instructions this module records, by `nisa` name.
pub(super) const RECORDERS: &[(&str, Recorder)] = &[
    ("rng", rng),
    ("rand2", rand2),
    ("rand_set_state", rand_set_state),
    ("rand_get_state", rand_get_state),
    ("set_rng_seed", set_rng_seed),
    ("dropout", dropout),
];

/// `nisa.rng`.
fn rng(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let on = elementwise_engine(engine(a, &["vector", "gpsimd"])?);
    let dst = a.tile("dst")?;
    a.finish()?;
    tracer.at(file, line, || isa::rng(dst, on))
}

/// `nisa.rand2`.
fn rand2(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let dst = a.tile("dst")?;
    let (min, max) = (scalar(a.scalar("min")?), scalar(a.scalar("max")?));
    a.finish()?;
    tracer.at(file, line, || isa::rand2(dst, min, max))
}

/// `nisa.rand_set_state`.
fn rand_set_state(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let on = elementwise_engine(engine(a, &["gpsimd", "vector"])?);
    let src = a.tile("src_seeds")?;
    a.finish()?;
    tracer.at(file, line, || isa::rand_set_state(src, on))
}

/// `nisa.rand_get_state`.
fn rand_get_state(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let on = elementwise_engine(engine(a, &["gpsimd", "vector"])?);
    let dst = a.tile("dst")?;
    a.finish()?;
    tracer.at(file, line, || isa::rand_get_state(dst, on))
}

/// `nisa.set_rng_seed`.
fn set_rng_seed(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let src = a.tile("src_seeds")?;
    a.finish()?;
    tracer.at(file, line, || isa::set_rng_seed(src))
}

/// `nisa.dropout`.
fn dropout(tracer: &mut Tracer, a: &Args<'_>, file: &str, line: u32) -> PyResult<()> {
    let (dst, data) = (a.tile("dst")?, a.tile("data")?);
    let prob = scalar(a.scalar("prob")?);
    a.finish()?;
    tracer.at(file, line, || isa::dropout(dst, data, prob))
}
