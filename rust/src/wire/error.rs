//! `WireError`: every way a frame list can fail to be a Dafka message, with where.

use thiserror::Error;

/// A malformed message (on decode) or an unencodable one (on encode).
///
/// Every variant names what was wrong and where: the frame index and the byte
/// offset inside that frame, so a dropped message can be logged usefully.
#[derive(Debug, Clone, PartialEq, Eq, Error)]
pub enum WireError {
    /// A field ran past the end of its frame.
    #[error(
        "truncated {field} in frame {frame} at offset {offset}: need {need} bytes, have {have}"
    )]
    Truncated {
        field: &'static str,
        frame: usize,
        offset: usize,
        need: usize,
        have: usize,
    },
    /// The body frame did not start with the signature `AA A5`.
    #[error("bad signature {found:02X?} in frame {frame}: expected [AA, A5]")]
    BadSignature { frame: usize, found: Vec<u8> },
    /// The version octet was not `01`.
    #[error("bad version {found:#04x} in frame {frame} at offset {offset}: expected 0x01")]
    BadVersion {
        frame: usize,
        offset: usize,
        found: u8,
    },
    /// The message ID is not one of the nine Dafka commands.
    #[error("unknown message id {id:#04x} in frame {frame} at offset {offset}")]
    UnknownId { frame: usize, offset: usize, id: u8 },
    /// The body repeats a different ID from the topic frame.
    #[error("message id mismatch: topic frame says {topic:#04x}, body says {body:#04x}")]
    IdMismatch { topic: u8, body: u8 },
    /// Bytes were left over after the last field.
    #[error("{count} trailing bytes in frame {frame} at offset {offset}")]
    TrailingBytes {
        frame: usize,
        offset: usize,
        count: usize,
    },
    /// The number of frames does not fit the message (or no frames at all).
    #[error("wrong frame count for {what}: got {got}, expected {expected}")]
    FrameCount {
        what: &'static str,
        got: usize,
        expected: &'static str,
    },
    /// A `string` field longer than 255 bytes cannot be encoded.
    #[error("{field} is {len} bytes long; a Dafka string holds at most 255")]
    StringTooLong { field: &'static str, len: usize },
    /// A `longstr`/`strings` field longer than u32::MAX cannot be encoded.
    #[error("{field} is {len} long; at most 4294967295 fits")]
    TooLong { field: &'static str, len: usize },
    /// In the zproto dialect the topic key is NUL-terminated, so it cannot hold a NUL.
    #[error("the zproto dialect cannot carry a topic key containing a NUL byte")]
    NulInTopic,
    /// A beacon field is not what it should be (e.g. a non-numeric port).
    #[error("bad {field} in frame {frame}: {reason}")]
    BadField {
        field: &'static str,
        frame: usize,
        reason: &'static str,
    },
}
