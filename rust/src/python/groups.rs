//! `dafka.list_groups` and `dafka.describe_group`: consumer groups as the
//! stores and members tell them (`crate::node::fetcher::groups`), GIL
//! released while waiting. Each takes the [`Discovery`] options.

use pyo3::prelude::*;
use pyo3::types::PyDict;

use super::args::seconds;
use super::discovery::Discovery;
use super::options::Options;
use super::wait::check_signals;
use crate::node::fetcher;

fn text(b: &[u8]) -> String {
    String::from_utf8_lossy(b).into_owned()
}

/// The consumer groups the stores hold commits of, sorted:
/// ``[{"group": str, "topics": [str], "partitions": int}]`` (partitions: how many it
/// committed). Asks every store that connects within ``timeout`` seconds and listens
/// about 1.3 s after the first; raises ``CommitTimeoutError`` when none connects.
#[pyfunction]
#[pyo3(signature = (*, timeout = 10.0, **options))]
fn list_groups<'py>(
    py: Python<'py>,
    timeout: f64,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<Vec<Bound<'py, PyDict>>> {
    let cfg = Discovery::parse("list_groups", options)?.read_config()?;
    let t = seconds("timeout", timeout)?;
    let got = py.detach(|| fetcher::list_groups::<PyErr>(&cfg, t, check_signals))?;
    got.into_iter()
        .map(|g| {
            let d = PyDict::new(py);
            d.set_item("group", g.group)?;
            d.set_item("topics", g.topics)?;
            d.set_item("partitions", g.partitions)?;
            Ok(d)
        })
        .collect()
}

/// Consumer group ``group`` as the stores and its members tell it: ``{"group": str,
/// "members": [{"address", "topics", "partitions"}], "partitions": [{"topic",
/// "partition", "owner", "committed", "head", "lag"}], "lag": int}``. ``owner`` is the
/// member reading the partition (None: nobody), ``committed`` the group's commit (the
/// next offset to read; None: never committed), ``head`` the last offset the stores hold
/// (None: unknown), ``lag`` how many records exist past the commit. Members are heard
/// for ``listen`` seconds (they announce every ``beacon_interval``: keep it above one
/// and a half of theirs); raises ``CommitTimeoutError`` when no store answers within
/// ``timeout``.
#[pyfunction]
#[pyo3(signature = (group, *, timeout = 10.0, listen = 1.5, **options))]
fn describe_group<'py>(
    py: Python<'py>,
    group: String,
    timeout: f64,
    listen: f64,
    options: Option<&Bound<'py, PyDict>>,
) -> PyResult<Bound<'py, PyDict>> {
    let cfg = Discovery::parse("describe_group", options)?.read_config()?;
    let (t, l) = (seconds("timeout", timeout)?, seconds("listen", listen)?);
    let d = py.detach(|| fetcher::describe_group::<PyErr>(&cfg, &group, t, l, check_signals))?;
    let out = PyDict::new(py);
    out.set_item("group", text(&d.group))?;
    let members: Vec<Bound<'py, PyDict>> = d
        .members
        .iter()
        .map(|m| {
            let row = PyDict::new(py);
            row.set_item("address", text(&m.address))?;
            row.set_item(
                "topics",
                m.topics.iter().map(|t| text(t)).collect::<Vec<_>>(),
            )?;
            let parts: Vec<(String, String)> = m
                .partitions
                .iter()
                .map(|(t, p)| (text(t), text(p)))
                .collect();
            row.set_item("partitions", parts)?;
            Ok(row)
        })
        .collect::<PyResult<_>>()?;
    out.set_item("members", members)?;
    let parts: Vec<Bound<'py, PyDict>> = d
        .partitions
        .iter()
        .map(|r| {
            let row = PyDict::new(py);
            row.set_item("topic", text(&r.topic))?;
            row.set_item("partition", text(&r.partition))?;
            row.set_item("owner", r.owner.as_deref().map(text))?;
            row.set_item("committed", r.committed)?;
            row.set_item("head", r.next.and_then(|n| n.checked_sub(1)))?;
            row.set_item("lag", r.lag)?;
            Ok(row)
        })
        .collect::<PyResult<_>>()?;
    out.set_item("partitions", parts)?;
    out.set_item("lag", d.total_lag)?;
    Ok(out)
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(list_groups, m)?)?;
    m.add_function(wrap_pyfunction!(describe_group, m)?)?;
    Ok(())
}
