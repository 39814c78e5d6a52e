//! The kind announcement (PROTOCOL.md, "Extensions"): how this project's
//! nodes tell a tower what kind of node they are without changing RFC 46's
//! beacons.
//!
//! A node's beacon SUB subscribes, on each tower's XPUB, beside `B` and `W`,
//! to the topic `V` + kind octet (`p` producer, `c` consumer, `s` store) +
//! the node's address (32 hex digits, as its beacons' UUID). Nothing a tower
//! publishes starts with `V` (beacons start with `B`, the welcome is `W`), so
//! the subscription matches nothing and costs nothing; a tower of this
//! project reads it on its XPUB, and ZeroMQ tells it when the node leaves
//! (the unsubscription of the topic, unique to the node).

use super::error::WireError;
use super::subscription::NodeType;

/// The first octet of a kind announcement's topic: not a beacon's (`B`) nor
/// the welcome's (`W`), and no message ID of RFC 46 or of the extensions.
pub const KIND_ANNOUNCEMENT: &[u8] = b"V";

/// The length of a node address: 32 hex digits.
const ADDRESS_LEN: usize = 32;

impl NodeType {
    /// The kind's octet in an announcement.
    pub const fn octet(self) -> u8 {
        match self {
            NodeType::Producer => b'p',
            NodeType::Consumer => b'c',
            NodeType::Store => b's',
        }
    }

    pub const fn from_octet(octet: u8) -> Option<Self> {
        Some(match octet {
            b'p' => NodeType::Producer,
            b'c' => NodeType::Consumer,
            b's' => NodeType::Store,
            _ => return None,
        })
    }

    /// The kind's name (`producer`, `consumer`, `store`).
    pub const fn name(self) -> &'static str {
        match self {
            NodeType::Producer => "producer",
            NodeType::Consumer => "consumer",
            NodeType::Store => "store",
        }
    }
}

/// "The node `address` is a `kind`": a subscription topic on a tower's XPUB.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Announcement<'a> {
    pub kind: NodeType,
    /// The node's address (32 hex digits, its beacons' UUID).
    pub address: &'a [u8],
}

impl<'a> Announcement<'a> {
    /// The subscription topic (without the subscribe octet).
    pub fn topic(&self) -> Vec<u8> {
        let mut v = KIND_ANNOUNCEMENT.to_vec();
        v.push(self.kind.octet());
        v.extend_from_slice(self.address);
        v
    }

    /// Reads a subscription topic (after the subscribe or unsubscribe
    /// octet): `Ok(None)` if it is no announcement (it does not start with
    /// `V`), an error if it is one that is malformed (no kind octet, an
    /// unknown kind, an address that is not 32 hex digits).
    pub fn parse(topic: &'a [u8]) -> Result<Option<Self>, WireError> {
        let Some(rest) = topic.strip_prefix(KIND_ANNOUNCEMENT) else {
            return Ok(None);
        };
        let Some((&octet, address)) = rest.split_first() else {
            return Err(WireError::Truncated {
                field: "node kind",
                frame: 0,
                offset: 2,
                need: 1,
                have: 0,
            });
        };
        let kind = NodeType::from_octet(octet).ok_or(WireError::BadField {
            field: "node kind",
            frame: 0,
            reason: "must be p (producer), c (consumer) or s (store)",
        })?;
        if address.len() != ADDRESS_LEN || !address.iter().all(u8::is_ascii_hexdigit) {
            return Err(WireError::BadField {
                field: "address",
                frame: 0,
                reason: "must be 32 hex digits",
            });
        }
        Ok(Some(Self { kind, address }))
    }
}

#[cfg(test)]
mod tests;
