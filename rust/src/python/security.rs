//! `dafka.keygen` and the certificate reader behind `dafka.security`.

use std::path::PathBuf;

use pyo3::prelude::*;

use crate::security::{self, Role, TopicPatterns};

/// Writes a new CURVE certificate pair in czmq's format: ``DIRECTORY/NAME.key``
/// (the public certificate, for trust directories) and ``DIRECTORY/NAME.key_secret``
/// (both keys, mode 0600, for the node itself), with ``role`` (store, producer,
/// consumer or tower) and ``topics`` (comma-separated patterns, ``*`` for any run of
/// characters; None for every topic) in their metadata. Never overwrites a file
/// (``FileExistsError``). Returns the two paths.
#[pyfunction]
#[pyo3(signature = (directory, name, *, role, topics = None))]
fn keygen(
    py: Python<'_>,
    directory: PathBuf,
    name: &str,
    role: &str,
    topics: Option<&str>,
) -> PyResult<(PathBuf, PathBuf)> {
    let role: Role = role.parse()?;
    let topics: Option<TopicPatterns> = topics.map(str::parse).transpose()?;
    Ok(py.detach(|| security::keygen(&directory, name, role, topics.as_ref()))?)
}

/// Reads a certificate file (public or secret): ``(public_key_z85, role,
/// topics, has_secret)``; ``role`` None when its metadata names none, ``topics``
/// the patterns as written ("*" when it names none).
#[pyfunction]
fn read_certificate(path: PathBuf) -> PyResult<(String, Option<String>, String, bool)> {
    let c = security::Certificate::load(&path)?;
    let role = c.role()?.map(|r| r.name().to_string());
    let topics = c.topics()?.to_string();
    Ok((c.public_z85(), role, topics, c.secret.is_some()))
}

/// Whether this build's libzmq has CURVE (secure clusters need it).
#[pyfunction]
fn has_curve() -> bool {
    security::has_curve()
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(keygen, m)?)?;
    m.add_function(wrap_pyfunction!(read_certificate, m)?)?;
    m.add_function(wrap_pyfunction!(has_curve, m)?)?;
    Ok(())
}
