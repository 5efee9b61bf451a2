//! The timeline as Chrome trace event JSON: one process, one thread (track) per engine and DMA
//! engine, named by metadata events; one complete (`"ph": "X"`) event per instruction with
//! microsecond `ts`/`dur` and the kernel source line in `args`.

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
    for s in &r.slices {
        for track in s.tracks() {
            events.push(json!({
                "name": s.name,
                "cat": track.to_string(),
                "ph": "X",
                "pid": 1,
                "tid": tid(track),
                "ts": s.start_ns / 1e3,
                "dur": (s.end_ns - s.start_ns) / 1e3,
                "args": {"loc": s.loc.to_string()},
            }));
        }
    }
    json!({"traceEvents": events, "displayTimeUnit": "ns"}).to_string()
}
