//! `dafka._native` codec functions behind `dafka.wire`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

use crate::wire::{
    decode, Ack, ConsumerHello, Dialect, Fetch, GetHeads, Head, Kind, Message, Record, RecordBatch,
    StoreHello, Subjects,
};

fn dialect_of(s: &str) -> PyResult<Dialect> {
    s.parse()
        .map_err(|e: String| crate::python::errors::dafka_error("ConfigError", e))
}

/// Encodes one message from its fields; unused fields are ignored. A batch
/// takes its values from `subjects` (its count is theirs).
#[pyfunction]
#[allow(clippy::too_many_arguments)]
#[pyo3(signature = (kind, dialect, topic, address, subject, sequence, count, content, subjects))]
fn wire_encode<'py>(
    py: Python<'py>,
    kind: &str,
    dialect: &str,
    topic: &[u8],
    address: Option<&[u8]>,
    subject: &[u8],
    sequence: u64,
    count: u32,
    content: &[u8],
    subjects: Vec<Bound<'py, PyBytes>>,
) -> PyResult<Vec<Bound<'py, PyBytes>>> {
    let dialect = dialect_of(dialect)?;
    let kind = Kind::from_name(kind)
        .ok_or_else(|| PyValueError::new_err(format!("unknown message kind {kind:?}")))?;
    let addr = address.unwrap_or_default();
    let rec = Record {
        topic,
        address: addr,
        subject,
        sequence,
        content,
    };
    let head = Head {
        topic,
        address: addr,
        subject,
        sequence,
    };
    let mut values = Vec::new();
    let msg = match kind {
        Kind::Record => Message::Record(rec),
        Kind::DirectRecord => Message::DirectRecord(rec),
        Kind::Fetch => Message::Fetch(Fetch {
            topic,
            address: addr,
            subject,
            sequence,
            count,
        }),
        Kind::Ack => Message::Ack(Ack {
            topic,
            address,
            subject,
            sequence,
        }),
        Kind::AddressedAck => Message::AddressedAck(Ack {
            topic,
            address,
            subject,
            sequence,
        }),
        Kind::Head => Message::Head(head),
        Kind::DirectHead => Message::DirectHead(head),
        Kind::GetHeads => Message::GetHeads(GetHeads {
            topic,
            address: addr,
        }),
        Kind::ConsumerHello => Message::ConsumerHello(ConsumerHello {
            topic,
            address: addr,
            subjects: Subjects::List(subjects.iter().map(|s| s.as_bytes()).collect()),
        }),
        Kind::StoreHello => Message::StoreHello(StoreHello {
            topic,
            address: addr,
        }),
        Kind::RecordBatch | Kind::DirectRecordBatch => {
            let count =
                RecordBatch::put_values(&mut values, subjects.iter().map(|s| s.as_bytes()))?;
            let b = RecordBatch {
                topic,
                address: addr,
                subject,
                sequence,
                count,
                values: &values,
            };
            if kind == Kind::RecordBatch {
                Message::RecordBatch(b)
            } else {
                Message::DirectRecordBatch(b)
            }
        }
    };
    let frames = msg.to_frames(dialect)?;
    Ok(frames.iter().map(|f| PyBytes::new(py, f)).collect())
}

/// The decoded fields, in the order `dafka.wire` expects.
type Decoded<'py> = (
    &'static str,
    &'static str,
    Bound<'py, PyBytes>,
    Option<Bound<'py, PyBytes>>,
    Option<Bound<'py, PyBytes>>,
    Option<u64>,
    Option<u32>,
    Option<Bound<'py, PyBytes>>,
    Option<Vec<Bound<'py, PyBytes>>>,
);

/// Decodes a frame list: (kind, dialect, topic, address, subject, sequence,
/// count, content, subjects), with None for fields the kind does not have. A
/// batch gives its values as `subjects`.
#[pyfunction]
fn wire_decode<'py>(py: Python<'py>, frames: Vec<Bound<'py, PyBytes>>) -> PyResult<Decoded<'py>> {
    let raw: Vec<&[u8]> = frames.iter().map(|f| f.as_bytes()).collect();
    let (msg, dialect) = decode(&raw)?;
    let b = |x: &[u8]| PyBytes::new(py, x);
    let topic = b(msg.topic());
    let (address, subject, sequence, count, content, subjects) = match &msg {
        Message::Record(r) | Message::DirectRecord(r) => (
            Some(b(r.address)),
            Some(b(r.subject)),
            Some(r.sequence),
            None,
            Some(b(r.content)),
            None,
        ),
        Message::Fetch(f) => (
            Some(b(f.address)),
            Some(b(f.subject)),
            Some(f.sequence),
            Some(f.count),
            None,
            None,
        ),
        Message::Ack(a) | Message::AddressedAck(a) => (
            a.address.map(b),
            Some(b(a.subject)),
            Some(a.sequence),
            None,
            None,
            None,
        ),
        Message::Head(h) | Message::DirectHead(h) => (
            Some(b(h.address)),
            Some(b(h.subject)),
            Some(h.sequence),
            None,
            None,
            None,
        ),
        Message::GetHeads(g) => (Some(b(g.address)), None, None, None, None, None),
        Message::StoreHello(s) => (Some(b(s.address)), None, None, None, None, None),
        Message::RecordBatch(r) | Message::DirectRecordBatch(r) => (
            Some(b(r.address)),
            Some(b(r.subject)),
            Some(r.sequence),
            Some(r.count),
            None,
            Some(r.values().map(b).collect()),
        ),
        Message::ConsumerHello(c) => (
            Some(b(c.address)),
            None,
            None,
            None,
            None,
            Some(c.subjects.iter().map(b).collect()),
        ),
    };
    Ok((
        msg.kind().name(),
        dialect.name(),
        topic,
        address,
        subject,
        sequence,
        count,
        content,
        subjects,
    ))
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(wire_encode, m)?)?;
    m.add_function(wrap_pyfunction!(wire_decode, m)?)?;
    Ok(())
}
