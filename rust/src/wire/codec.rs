//! Encoding and decoding of the Dafka messages (the nine of RFC 46 and this
//! project's extensions, PROTOCOL.md) in both dialects.
//!
//! Decoding borrows from the caller's frames (no copy of any field), checks every
//! length against what the frame holds before reading, and never allocates more
//! than the input could describe. Encoding writes the non-content frames into
//! caller-owned buffers ([`FrameBuf`]); the content goes out as its own frame,
//! straight from the caller's slice.

use super::error::WireError;
use super::{
    Ack, ConsumerHello, Dialect, Fetch, GetHeads, Head, Kind, Message, Record, RecordBatch,
    StoreHello, Subjects, TimeQuery, SIGNATURE, VERSION,
};

/// Reusable buffers for the frames of one encoded message, except the content.
///
/// In the `rfc` dialect `topic` holds frame 0 (`ID` + key) and `body` frame 1;
/// in the `zproto` dialect everything but the content is in `topic` and `body`
/// stays empty. Reuse one `FrameBuf` per socket to avoid allocating per message.
#[derive(Debug, Default, Clone)]
pub struct FrameBuf {
    pub topic: Vec<u8>,
    pub body: Vec<u8>,
    dialect: Dialect,
}

impl FrameBuf {
    pub fn new() -> Self {
        Self::default()
    }

    /// The header frames (1 or 2) in order; the content, if the message has one,
    /// follows them as the last frame.
    pub fn header_frames(&self) -> impl Iterator<Item = &[u8]> {
        let n = match self.dialect {
            Dialect::Rfc => 2,
            Dialect::Zproto => 1,
        };
        [self.topic.as_slice(), self.body.as_slice()]
            .into_iter()
            .take(n)
    }
}

// ---------------------------------------------------------------- encoding

fn put_string(out: &mut Vec<u8>, field: &'static str, s: &[u8]) -> Result<(), WireError> {
    let len = u8::try_from(s.len()).map_err(|_| WireError::StringTooLong {
        field,
        len: s.len(),
    })?;
    out.push(len);
    out.extend_from_slice(s);
    Ok(())
}

fn put_u32_len(out: &mut Vec<u8>, field: &'static str, len: usize) -> Result<(), WireError> {
    let n = u32::try_from(len).map_err(|_| WireError::TooLong { field, len })?;
    out.extend_from_slice(&n.to_be_bytes());
    Ok(())
}

impl Message<'_> {
    /// Encodes into `buf` (cleared first). After success, send
    /// `buf.header_frames()` followed by [`Message::content`] if it is `Some`.
    pub fn encode_into(&self, dialect: Dialect, buf: &mut FrameBuf) -> Result<(), WireError> {
        buf.topic.clear();
        buf.body.clear();
        buf.dialect = dialect;
        let id = self.kind().id();
        let key = self.topic();
        buf.topic.push(id);
        buf.topic.extend_from_slice(key);
        let out = match dialect {
            Dialect::Rfc => {
                buf.body.extend_from_slice(&SIGNATURE);
                buf.body.push(id);
                buf.body.push(VERSION);
                &mut buf.body
            }
            Dialect::Zproto => {
                if key.contains(&0) {
                    return Err(WireError::NulInTopic);
                }
                buf.topic.push(0);
                buf.topic.push(VERSION);
                &mut buf.topic
            }
        };
        match self {
            Message::Record(r) | Message::DirectRecord(r) => {
                put_string(out, "address", r.address)?;
                put_string(out, "subject", r.subject)?;
                out.extend_from_slice(&r.sequence.to_be_bytes());
            }
            Message::Fetch(f) => {
                // The RFC's names: the requester is `address`, the topic `subject`.
                put_string(out, "address", f.requester)?;
                put_string(out, "subject", f.topic)?;
                out.extend_from_slice(&f.sequence.to_be_bytes());
                out.extend_from_slice(&f.count.to_be_bytes());
            }
            Message::Ack(a) => {
                // zproto never carries the address; rfc carries it when known
                // (a body without it is accepted on both sides).
                if let (Dialect::Rfc, Some(address)) = (dialect, a.address) {
                    put_string(out, "address", address)?;
                }
                put_string(out, "subject", a.subject)?;
                out.extend_from_slice(&a.sequence.to_be_bytes());
            }
            Message::AddressedAck(a) => {
                let address = a.address.ok_or(WireError::BadField {
                    field: "address",
                    frame: usize::from(dialect == Dialect::Rfc),
                    reason: "an ADDRESSED-ACK names its store",
                })?;
                put_string(out, "address", address)?;
                put_string(out, "subject", a.subject)?;
                out.extend_from_slice(&a.sequence.to_be_bytes());
            }
            Message::Head(h) | Message::DirectHead(h) | Message::TimeOffset(h) => {
                put_string(out, "address", h.address)?;
                put_string(out, "subject", h.subject)?;
                out.extend_from_slice(&h.sequence.to_be_bytes());
            }
            Message::TimeQuery(q) => {
                // Framed as a HEAD: requester, topic, time.
                put_string(out, "address", q.requester)?;
                put_string(out, "subject", q.subject)?;
                out.extend_from_slice(&q.time.to_be_bytes());
            }
            Message::GetHeads(g) => put_string(out, "address", g.address)?,
            Message::ConsumerHello(c) => {
                put_string(out, "address", c.address)?;
                put_u32_len(out, "subjects", c.subjects.len())?;
                for s in c.subjects.iter() {
                    put_u32_len(out, "subjects[]", s.len())?;
                    out.extend_from_slice(s);
                }
            }
            Message::StoreHello(s) => put_string(out, "address", s.address)?,
            Message::RecordBatch(b)
            | Message::DirectRecordBatch(b)
            | Message::MetaRecordBatch(b)
            | Message::DirectMetaRecordBatch(b) => {
                // Frames as the receiver counts them: the body, then the values.
                let body = usize::from(dialect == Dialect::Rfc);
                let bodies = self.kind().has_meta();
                check_batch(b.values, b.count, b.sequence, body, body + 1, bodies)?;
                put_string(out, "address", b.address)?;
                put_string(out, "subject", b.subject)?;
                out.extend_from_slice(&b.sequence.to_be_bytes());
                out.extend_from_slice(&b.count.to_be_bytes());
            }
        }
        Ok(())
    }

    /// Encodes into a fresh list of frames (copies the content; for tests,
    /// tools and Python — hot paths use [`Message::encode_into`]).
    pub fn to_frames(&self, dialect: Dialect) -> Result<Vec<Vec<u8>>, WireError> {
        let mut buf = FrameBuf::new();
        self.encode_into(dialect, &mut buf)?;
        let mut frames: Vec<Vec<u8>> = buf.header_frames().map(<[u8]>::to_vec).collect();
        if let Some(c) = self.content() {
            frames.push(c.to_vec());
        }
        Ok(frames)
    }
}

// ---------------------------------------------------------------- decoding

/// A bounds-checked reader over one frame (also the group messages',
/// `wire/group.rs`, which add their own fields to it).
pub(super) struct Reader<'a> {
    pub(super) buf: &'a [u8],
    pub(super) pos: usize,
    pub(super) frame: usize,
}

impl<'a> Reader<'a> {
    pub(super) fn new(buf: &'a [u8], pos: usize, frame: usize) -> Self {
        Self { buf, pos, frame }
    }

    pub(super) fn take(&mut self, field: &'static str, need: usize) -> Result<&'a [u8], WireError> {
        let have = self.buf.len() - self.pos;
        if need > have {
            return Err(WireError::Truncated {
                field,
                frame: self.frame,
                offset: self.pos,
                need,
                have,
            });
        }
        let s = &self.buf[self.pos..self.pos + need];
        self.pos += need;
        Ok(s)
    }

    pub(super) fn u8(&mut self, field: &'static str) -> Result<u8, WireError> {
        Ok(self.take(field, 1)?[0])
    }

    pub(super) fn u32(&mut self, field: &'static str) -> Result<u32, WireError> {
        let b = self.take(field, 4)?;
        Ok(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
    }

    pub(super) fn u64(&mut self, field: &'static str) -> Result<u64, WireError> {
        let b = self.take(field, 8)?;
        let mut a = [0u8; 8];
        a.copy_from_slice(b);
        Ok(u64::from_be_bytes(a))
    }

    pub(super) fn string(&mut self, field: &'static str) -> Result<&'a [u8], WireError> {
        let n = self.u8(field)? as usize;
        self.take(field, n)
    }

    pub(super) fn longstr(&mut self, field: &'static str) -> Result<&'a [u8], WireError> {
        let n = self.u32(field)? as usize;
        self.take(field, n)
    }

    pub(super) fn version(&mut self) -> Result<(), WireError> {
        let offset = self.pos;
        let v = self.u8("version")?;
        if v != VERSION {
            return Err(WireError::BadVersion {
                frame: self.frame,
                offset,
                found: v,
            });
        }
        Ok(())
    }

    pub(super) fn finish(&self) -> Result<(), WireError> {
        let left = self.buf.len() - self.pos;
        if left != 0 {
            return Err(WireError::TrailingBytes {
                frame: self.frame,
                offset: self.pos,
                count: left,
            });
        }
        Ok(())
    }
}

/// A RECORD-BATCH's content frame (frame `frame`) holds exactly `count`
/// `longstr` values, at least one, and its last offset is below 2^64 - 1 (no
/// record can stand there: the next would overflow). `body` is the frame of
/// the other fields.
/// With `bodies` (the META batches) every value is a body whose metadata
/// parses ([`crate::meta::parse`]).
fn check_batch(
    values: &[u8],
    count: u32,
    sequence: u64,
    body: usize,
    frame: usize,
    bodies: bool,
) -> Result<(), WireError> {
    if count == 0 {
        return Err(WireError::BadField {
            field: "count",
            frame: body,
            reason: "a RECORD-BATCH holds at least one record",
        });
    }
    // `end` is one past the last: at most u64::MAX.
    if sequence.checked_add(u64::from(count)).is_none() {
        return Err(WireError::BadField {
            field: "sequence",
            frame: body,
            reason: "the batch's last offset must be below 2^64 - 1",
        });
    }
    let mut r = Reader::new(values, 0, frame);
    for _ in 0..count {
        let v = r.longstr("values[]")?;
        if bodies {
            if let Err(e) = crate::meta::parse(v) {
                return Err(WireError::BadField {
                    field: "values[]",
                    frame,
                    reason: e.0,
                });
            }
        }
    }
    r.finish()
}

fn kind_of(frame0: &[u8]) -> Result<Kind, WireError> {
    let id = *frame0.first().ok_or(WireError::Truncated {
        field: "id",
        frame: 0,
        offset: 0,
        need: 1,
        have: 0,
    })?;
    Kind::from_id(id).ok_or(WireError::UnknownId {
        frame: 0,
        offset: 0,
        id,
    })
}

/// Decodes one message from its frames, detecting the dialect by frame count
/// (PROTOCOL.md): RECORD/DIRECT-RECORD (and the batches) have 3 frames in
/// `rfc` and 2 in `zproto`, every other message 2 in `rfc` and 1 in `zproto`.
pub fn decode<F: AsRef<[u8]>>(frames: &[F]) -> Result<(Message<'_>, Dialect), WireError> {
    let first = frames.first().ok_or(WireError::FrameCount {
        what: "a Dafka message",
        got: 0,
        expected: "1 to 3",
    })?;
    let f0 = first.as_ref();
    let kind = kind_of(f0)?;
    let has_content = kind.has_content();
    let base = usize::from(has_content);
    let dialect = match frames.len().checked_sub(base) {
        Some(1) => Dialect::Zproto,
        Some(2) => Dialect::Rfc,
        _ => {
            return Err(WireError::FrameCount {
                what: kind.name(),
                got: frames.len(),
                expected: if has_content { "2 or 3" } else { "1 or 2" },
            })
        }
    };
    let content: &[u8] = if has_content {
        frames[frames.len() - 1].as_ref()
    } else {
        &[]
    };
    let (topic, mut r) = match dialect {
        Dialect::Rfc => {
            let body = frames[1].as_ref();
            let mut r = Reader::new(body, 0, 1);
            let sig = r.take("signature", 2)?;
            if sig != SIGNATURE {
                return Err(WireError::BadSignature {
                    frame: 1,
                    found: sig.to_vec(),
                });
            }
            let body_id = r.u8("id")?;
            if body_id != kind.id() {
                return Err(match Kind::from_id(body_id) {
                    Some(_) => WireError::IdMismatch {
                        topic: kind.id(),
                        body: body_id,
                    },
                    None => WireError::UnknownId {
                        frame: 1,
                        offset: 2,
                        id: body_id,
                    },
                });
            }
            r.version()?;
            (&f0[1..], r)
        }
        Dialect::Zproto => {
            let nul = f0[1..]
                .iter()
                .position(|&b| b == 0)
                .ok_or(WireError::Truncated {
                    field: "topic terminator",
                    frame: 0,
                    offset: f0.len(),
                    need: 1,
                    have: 0,
                })?;
            let topic = &f0[1..1 + nul];
            let mut r = Reader::new(f0, 2 + nul, 0);
            r.version()?;
            (topic, r)
        }
    };
    let msg = match kind {
        Kind::Record | Kind::DirectRecord => {
            let rec = Record {
                topic,
                address: r.string("address")?,
                subject: r.string("subject")?,
                sequence: r.u64("sequence")?,
                content,
            };
            if kind == Kind::Record {
                Message::Record(rec)
            } else {
                Message::DirectRecord(rec)
            }
        }
        Kind::Fetch => Message::Fetch(Fetch {
            partition: topic,
            requester: r.string("address")?,
            topic: r.string("subject")?,
            sequence: r.u64("sequence")?,
            count: r.u32("count")?,
        }),
        Kind::Ack => {
            // With address: 1+a + 1+s + 8 bytes; without: 1+s + 8. In `rfc`
            // try the RFC form first and fall back only if it does not fit
            // exactly; `zproto` has no address (PROTOCOL.md), and one that
            // carries it is refused as trailing bytes.
            let start = r.pos;
            let with_address = (dialect == Dialect::Rfc)
                .then(|| {
                    let address = r.string("address")?;
                    let subject = r.string("subject")?;
                    let sequence = r.u64("sequence")?;
                    r.finish()?;
                    Ok::<_, WireError>((Some(address), subject, sequence))
                })
                .and_then(Result::ok);
            let (address, subject, sequence) = match with_address {
                Some(v) => v,
                None => {
                    r.pos = start;
                    (None, r.string("subject")?, r.u64("sequence")?)
                }
            };
            Message::Ack(Ack {
                topic,
                address,
                subject,
                sequence,
            })
        }
        Kind::AddressedAck => Message::AddressedAck(Ack {
            topic,
            address: Some(r.string("address")?),
            subject: r.string("subject")?,
            sequence: r.u64("sequence")?,
        }),
        Kind::TimeQuery => Message::TimeQuery(TimeQuery {
            topic,
            requester: r.string("address")?,
            subject: r.string("subject")?,
            time: r.u64("sequence")?,
        }),
        Kind::Head | Kind::DirectHead | Kind::TimeOffset => {
            let h = Head {
                topic,
                address: r.string("address")?,
                subject: r.string("subject")?,
                sequence: r.u64("sequence")?,
            };
            match kind {
                Kind::Head => Message::Head(h),
                Kind::DirectHead => Message::DirectHead(h),
                _ => Message::TimeOffset(h),
            }
        }
        Kind::GetHeads => Message::GetHeads(GetHeads {
            topic,
            address: r.string("address")?,
        }),
        Kind::ConsumerHello => {
            let address = r.string("address")?;
            let count = r.u32("subjects")? as usize;
            // Checked here, read in place later: nothing allocated per entry.
            let start = r.pos;
            for _ in 0..count {
                r.longstr("subjects[]")?;
            }
            Message::ConsumerHello(ConsumerHello {
                topic,
                address,
                subjects: Subjects::Wire {
                    count,
                    raw: &r.buf[start..r.pos],
                },
            })
        }
        Kind::StoreHello => Message::StoreHello(StoreHello {
            topic,
            address: r.string("address")?,
        }),
        Kind::RecordBatch
        | Kind::DirectRecordBatch
        | Kind::MetaRecordBatch
        | Kind::DirectMetaRecordBatch => {
            let address = r.string("address")?;
            let subject = r.string("subject")?;
            let sequence = r.u64("sequence")?;
            let count = r.u32("count")?;
            let bodies = kind.has_meta();
            check_batch(content, count, sequence, r.frame, frames.len() - 1, bodies)?;
            let b = RecordBatch {
                topic,
                address,
                subject,
                sequence,
                count,
                values: content,
            };
            match kind {
                Kind::RecordBatch => Message::RecordBatch(b),
                Kind::DirectRecordBatch => Message::DirectRecordBatch(b),
                Kind::MetaRecordBatch => Message::MetaRecordBatch(b),
                _ => Message::DirectMetaRecordBatch(b),
            }
        }
    };
    r.finish()?;
    Ok((msg, dialect))
}
