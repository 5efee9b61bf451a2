//! The timeline as Chrome trace event JSON: one process, one thread (track) per engine and DMA
//! engine, named by metadata events; one complete (`"ph": "X"`) event per instruction with
//! microsecond `ts`/`dur` and the kernel source line in `args` (a DMA transfer on its first DMA
//! engine's track, with the number of engines it spans).

use super::{CostReport, Engine};
use serde_json::{Value, json};

/// Track ids: engines first, then DMA queues.
fn tid(e: Engine) -> u64 {
    match e {
        Engine::Tensor => 1,
        Engine::Vector => 2,
        Engine::Scalar => 3,
        Engine::GpSimd => 4,
        Engine::Dma(q) => 10 + q as u64,
    }
}

pub(super) fn chrome_trace(r: &CostReport) -> String {
    let mut events: Vec<Value> = vec![json!({
        "name": "process_name", "ph": "M", "pid": 1, "tid": 0,
        "args": {"name": format!("{} on {} (estimate)", r.kernel, r.target.name())},
    })];
    for e in &r.engines {
        events.push(json!({
            "name": "thread_name", "ph": "M", "pid": 1, "tid": tid(e.engine),
            "args": {"name": e.engine.to_string()},
        }));
        events.push(json!({
            "name": "thread_sort_index", "ph": "M", "pid": 1, "tid": tid(e.engine),
            "args": {"sort_index": tid(e.engine)},
        }));
    }
    // One event per instruction, on its engine's track; a DMA transfer on the track of the
    // first DMA engine it spans, with how many it spans (one event per engine would multiply a
    // large kernel's trace by 16, and the first engine is busy for the whole transfer, so no
    // two events of a track overlap).
    for s in &r.slices {
        let mut args = json!({"loc": s.loc.to_string()});
        if s.dma_engines != 0 {
            args["dma_engines"] = json!(s.dma_engines.count_ones());
        }
        events.push(json!({
            "name": s.name,
            "cat": s.engine.to_string(),
            "ph": "X",
            "pid": 1,
            "tid": tid(s.engine),
            "ts": s.start_ns / 1e3,
            "dur": (s.end_ns - s.start_ns) / 1e3,
            "args": args,
        }));
    }
    json!({"traceEvents": events, "displayTimeUnit": "ns"}).to_string()
}
