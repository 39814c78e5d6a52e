//! `dafka._native` codec functions behind `dafka.wire`.

use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::{PyBytes, PyTuple};

use super::errors::Exc;

use crate::wire::{
    decode, Ack, ConsumerHello, Dialect, Fetch, GetHeads, Head, Kind, Message, Record, RecordBatch,
    StoreHello, Subjects, TimeQuery,
};

fn dialect_of(s: &str) -> PyResult<Dialect> {
    s.parse().map_err(Exc::Config.with())
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
        // The RFC's names: the key is the partition, `address` the requester.
        Kind::Fetch => Message::Fetch(Fetch {
            partition: topic,
            requester: addr,
            topic: subject,
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
        Kind::TimeQuery => Message::TimeQuery(TimeQuery {
            topic,
            requester: addr,
            subject,
            time: sequence,
        }),
        Kind::TimeOffset => Message::TimeOffset(head),
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
        Kind::RecordBatch
        | Kind::DirectRecordBatch
        | Kind::MetaRecordBatch
        | Kind::DirectMetaRecordBatch => {
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
            match kind {
                Kind::RecordBatch => Message::RecordBatch(b),
                Kind::DirectRecordBatch => Message::DirectRecordBatch(b),
                Kind::MetaRecordBatch => Message::MetaRecordBatch(b),
                _ => Message::DirectMetaRecordBatch(b),
            }
        }
    };
    let frames = msg.to_frames(dialect)?;
    Ok(frames.iter().map(|f| PyBytes::new(py, f)).collect())
}

/// One decoded message: what :func:`wire_decode` returns, for ``dafka.wire``
/// to build its dataclass from. A field the kind does not have is None.
#[pyclass(module = "dafka._native", name = "DecodedMessage", frozen)]
struct DecodedMessage {
    kind: &'static str,
    dialect: &'static str,
    /// The topic (the key after the ID in frame 0).
    #[pyo3(get)]
    topic: Py<PyBytes>,
    /// The sender's or partition's address (None for a zproto ACK, which has none).
    #[pyo3(get)]
    address: Option<Py<PyBytes>>,
    /// The subject (the partition's topic, or what a FETCH or ACK is about).
    #[pyo3(get)]
    subject: Option<Py<PyBytes>>,
    /// The offset the message carries.
    #[pyo3(get)]
    sequence: Option<u64>,
    /// A FETCH's record count, or a batch's number of values.
    #[pyo3(get)]
    count: Option<u32>,
    /// A record's value.
    #[pyo3(get)]
    content: Option<Py<PyBytes>>,
    /// A CONSUMER-HELLO's subjects, or a batch's values.
    #[pyo3(get)]
    subjects: Option<Py<PyTuple>>,
}

#[pymethods]
impl DecodedMessage {
    /// The message kind as PROTOCOL.md names it, e.g. ``"RECORD"``, ``"ACK"``.
    #[getter]
    fn kind(&self) -> &'static str {
        self.kind
    }
    /// The dialect the frames were in: ``"rfc"`` or ``"zproto"``.
    #[getter]
    fn dialect(&self) -> &'static str {
        self.dialect
    }
    fn __repr__(&self) -> String {
        format!(
            "DecodedMessage(kind={:?}, dialect={:?}, sequence={:?}, count={:?})",
            self.kind, self.dialect, self.sequence, self.count
        )
    }
}

/// Decodes a frame list (either dialect) into a :class:`DecodedMessage`. A
/// batch gives its values as ``subjects``.
#[pyfunction]
fn wire_decode(py: Python<'_>, frames: Vec<Bound<'_, PyBytes>>) -> PyResult<DecodedMessage> {
    let raw: Vec<&[u8]> = frames.iter().map(|f| f.as_bytes()).collect();
    let (msg, dialect) = decode(&raw)?;
    let b = |x: &[u8]| PyBytes::new(py, x).unbind();
    let list = |v: Vec<Py<PyBytes>>| PyTuple::new(py, v).map(Bound::unbind);
    let mut d = DecodedMessage {
        kind: msg.kind().name(),
        dialect: dialect.name(),
        topic: b(msg.topic()),
        address: None,
        subject: None,
        sequence: None,
        count: None,
        content: None,
        subjects: None,
    };
    match &msg {
        Message::Record(r) | Message::DirectRecord(r) => {
            d.address = Some(b(r.address));
            d.subject = Some(b(r.subject));
            d.sequence = Some(r.sequence);
            d.content = Some(b(r.content));
        }
        Message::Fetch(f) => {
            d.address = Some(b(f.requester));
            d.subject = Some(b(f.topic));
            d.sequence = Some(f.sequence);
            d.count = Some(f.count);
        }
        Message::Ack(a) | Message::AddressedAck(a) => {
            d.address = a.address.map(b);
            d.subject = Some(b(a.subject));
            d.sequence = Some(a.sequence);
        }
        Message::Head(h) | Message::DirectHead(h) | Message::TimeOffset(h) => {
            d.address = Some(b(h.address));
            d.subject = Some(b(h.subject));
            d.sequence = Some(h.sequence);
        }
        Message::TimeQuery(q) => {
            d.address = Some(b(q.requester));
            d.subject = Some(b(q.subject));
            d.sequence = Some(q.time);
        }
        Message::GetHeads(g) => d.address = Some(b(g.address)),
        Message::StoreHello(s) => d.address = Some(b(s.address)),
        Message::RecordBatch(r)
        | Message::DirectRecordBatch(r)
        | Message::MetaRecordBatch(r)
        | Message::DirectMetaRecordBatch(r) => {
            d.address = Some(b(r.address));
            d.subject = Some(b(r.subject));
            d.sequence = Some(r.sequence);
            d.count = Some(r.count);
            d.subjects = Some(list(r.values().map(b).collect())?);
        }
        Message::ConsumerHello(c) => {
            d.address = Some(b(c.address));
            d.subjects = Some(list(c.subjects.iter().map(b).collect())?);
        }
    }
    Ok(d)
}

pub(super) fn register(m: &Bound<'_, PyModule>) -> PyResult<()> {
    m.add_function(wrap_pyfunction!(wire_encode, m)?)?;
    m.add_class::<DecodedMessage>()?;
    m.add_function(wrap_pyfunction!(wire_decode, m)?)?;
    Ok(())
}
