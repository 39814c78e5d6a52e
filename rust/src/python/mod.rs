//! PyO3 bindings: argument parsing, GIL release, conversion and one error
//! mapping. No protocol logic lives here.
//!
//! Where things are: one file per class (`tower.rs`, `producer.rs`,
//! `consumer.rs`, `store.rs`, `log.rs`'s `NativeLog`, `record.rs`), the read
//! clients in `fetch.rs`; the options of them all declared once
//! (`options.rs` the machinery, each declaration beside its class,
//! `discovery.rs` the ones every node takes) and shown by `signature.rs`;
//! `args.rs` the argument checks, `buffer.rs` bytes-like values (the buffer
//! FFI), `arrow.rs` Arrow arrays, `wait.rs` waiting with the GIL released, `metrics.rs` `serve_metrics`,
//! `errors.rs` the one error mapping.

mod args;
mod arrow;
mod buffer;
mod cli;
mod consumer;
mod delivery;
mod discovery;
mod errors;
mod fetch;
mod groups;
mod log;
mod logbridge;
mod metrics;
mod options;
mod producer;
mod record;
mod security;
mod signature;
mod store;
mod time;
mod tower;
mod view;
mod wait;
mod wire;

use pyo3::prelude::*;

#[pymodule]
fn _native(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add("__version__", env!("CARGO_PKG_VERSION"))?;
    wire::register(m)?;
    record::register(m)?;
    log::register(m)?;
    tower::register(m)?;
    producer::register(m)?;
    consumer::register(m)?;
    store::register(m)?;
    cli::register(m)?;
    security::register(m)?;
    fetch::register(m)?;
    groups::register(m)?;
    view::register(m)?;
    metrics::register(m)?;
    signature::sign(m)
}
