//! `dafka._native.cluster_view`: the nodes the towers relay and the
//! partitions every store holds (`crate::node::fetcher::cluster_view`), GIL
//! released while waiting; `dafka.cluster`, `dafka.describe_topics` and
//! `dafka.describe_topic` (python/dafka/view.py) shape it.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::args::seconds;
use super::discovery::Discovery;
use super::options::Options;
use super::wait::check_signals;
use crate::node::fetcher;

/// The cluster as the towers relay it and the stores tell it: ``{"towers": [str],
/// "nodes": [{"address", "kind", "endpoint", "key", "last_heard"}], "stores": [str],
/// "partitions": [{"store", "topic", "partition", "first", "next", "bytes"}]}``.
/// ``kind`` is ``"store"``, ``"producer"``, ``"consumer"`` or None (not shown yet),
/// ``last_heard`` the seconds since the towers last relayed the node's beacon (None:
/// not heard), ``stores`` the stores that answered. Listens ``listen`` seconds (None:
/// one and a half ``beacon_interval``); with ``topic`` (``""``: every topic) also asks
/// every store for its partitions of it (first and next offsets, bytes on disk).
/// Raises ``FetchTimeoutError`` when no tower, or asking for partitions no store,
/// answers within ``timeout``.
#[pyfunction]
#[pyo3(signature = (topic = None, *, timeout = 10.0, listen = None, **options))]
fn cluster_view<'py>(
    py: Python<'py>,
    topic: Option<String>,
    timeout: f64,
    listen: Option<f64>,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let cfg = Discovery::parse("cluster_view", options)?.read_config()?;
    let t = seconds("timeout", timeout)?;
    let l = match listen {
        Some(l) => seconds("listen", l)?,
        None => cfg.beacon_interval * 3 / 2,
    };
    let v =
        py.detach(|| fetcher::cluster_view::<PyErr>(&cfg, topic.as_deref(), t, l, check_signals))?;
    let out = PyDict::new(py);
    out.set_item("towers", v.towers.clone())?;
    let nodes: Vec<Bound<'py, PyDict>> = v
        .nodes
        .iter()
        .map(|n| {
            let d = PyDict::new(py);
            d.set_item("address", n.address.clone())?;
            d.set_item("kind", n.kind.map(|k| k.name()))?;
            d.set_item("endpoint", n.endpoint.clone())?;
            d.set_item("key", n.key.clone())?;
            d.set_item("last_heard", n.last_heard.map(|d| d.as_secs_f64()))?;
            Ok(d)
        })
        .collect::<PyResult<_>>()?;
    out.set_item("nodes", nodes)?;
    out.set_item("stores", v.stores.clone())?;
    let parts: Vec<Bound<'py, PyDict>> = v
        .partitions
        .iter()
        .map(|p| {
            let d = PyDict::new(py);
            d.set_item("store", p.store.clone())?;
            d.set_item("topic", p.topic.clone())?;
            d.set_item("partition", p.partition.clone())?;
            d.set_item("first", p.first)?;
            d.set_item("next", p.next)?;
            d.set_item("bytes", p.bytes)?;
            Ok(d)
        })
        .collect::<PyResult<_>>()?;
    out.set_item("partitions", parts)?;
    Ok(out)
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(cluster_view, m)?)
}
