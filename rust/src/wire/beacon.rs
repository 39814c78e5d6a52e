//! Tower beacons and the welcome message (PROTOCOL.md, "Discovery").
//!
//! Node → tower: 4 frames `B`, UUID (32 hex), host (may be empty), port (decimal).
//! Tower → node: 3 frames `B`, UUID, `tcp://host:port`. Welcome: 1 frame `W`.
//!
//! This project's extension for secure clusters: a secure node's beacon has a
//! fifth frame, its CURVE public key in Z85 (40 characters), and the tower
//! relays it as the endpoint `tcp://host:port;curve=<key>`, so a node learns
//! the key to connect to that peer with. Only secure towers and nodes send
//! or take them (a secure cluster has no C-reference node).

use super::error::WireError;

/// The one-frame welcome a tower's XPUB sends to each new subscriber.
pub const WELCOME: &[u8] = b"W";

/// The first frame of every beacon, and what a node subscribes to on a
/// tower's XPUB.
pub const BEACON: &[u8] = b"B";

/// A beacon, as sent by a node or as relayed by a tower, or the tower's welcome.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Beacon<'a> {
    /// Node → tower. An empty `host` asks the tower to use the TCP peer address.
    Node {
        uuid: &'a [u8],
        host: &'a [u8],
        port: u16,
        /// A secure node's CURVE public key, Z85 (40 characters).
        key: Option<&'a [u8]>,
    },
    /// Tower → node: where the node `uuid` can be reached.
    Tower { uuid: &'a [u8], endpoint: &'a [u8] },
    /// Tower → node, once per new subscriber.
    Welcome,
}

fn port_text(port: u16) -> Vec<u8> {
    port.to_string().into_bytes()
}

impl Beacon<'_> {
    /// The frames of this beacon.
    pub fn to_frames(&self) -> Vec<Vec<u8>> {
        match self {
            Beacon::Node {
                uuid,
                host,
                port,
                key,
            } => {
                let mut v = vec![
                    BEACON.to_vec(),
                    uuid.to_vec(),
                    host.to_vec(),
                    port_text(*port),
                ];
                v.extend(key.map(<[u8]>::to_vec));
                v
            }
            Beacon::Tower { uuid, endpoint } => {
                vec![BEACON.to_vec(), uuid.to_vec(), endpoint.to_vec()]
            }
            Beacon::Welcome => vec![WELCOME.to_vec()],
        }
    }
}

/// Decodes what arrives on a beacon socket: node beacons (4 frames, 5 with a
/// key), tower beacons (3 frames) or the welcome (1 frame `W`).
pub fn decode_beacon<F: AsRef<[u8]>>(frames: &[F]) -> Result<Beacon<'_>, WireError> {
    let f = |i: usize| frames[i].as_ref();
    match frames.len() {
        1 if f(0) == WELCOME => Ok(Beacon::Welcome),
        1 => Err(WireError::BadField {
            field: "welcome",
            frame: 0,
            reason: "a one-frame beacon message must be exactly \"W\"",
        }),
        3..=5 => {
            if f(0) != BEACON {
                return Err(WireError::BadField {
                    field: "beacon id",
                    frame: 0,
                    reason: "a beacon starts with the frame \"B\"",
                });
            }
            let uuid = f(1);
            if uuid.is_empty() || uuid.len() > 255 {
                return Err(WireError::BadField {
                    field: "uuid",
                    frame: 1,
                    reason: "must be 1 to 255 bytes",
                });
            }
            // Endpoints are C strings to ZeroMQ (the zmq crate panics on
            // a NUL byte in one): a host or endpoint with one is malformed.
            if f(2).contains(&0) {
                return Err(WireError::BadField {
                    field: if frames.len() == 3 {
                        "endpoint"
                    } else {
                        "host"
                    },
                    frame: 2,
                    reason: "must not contain a NUL byte",
                });
            }
            if frames.len() == 3 {
                return Ok(Beacon::Tower {
                    uuid,
                    endpoint: f(2),
                });
            }
            let port = std::str::from_utf8(f(3))
                .ok()
                .filter(|s| !s.is_empty() && s.bytes().all(|b| b.is_ascii_digit()))
                .and_then(|s| s.parse::<u16>().ok())
                .filter(|&p| p != 0)
                .ok_or(WireError::BadField {
                    field: "port",
                    frame: 3,
                    reason: "must be a decimal port number 1-65535",
                })?;
            let key = if frames.len() == 5 {
                let k = f(4);
                if k.len() != 40
                    || crate::security::cert::parse_key_z85(
                        std::str::from_utf8(k).unwrap_or_default(),
                    )
                    .is_none()
                {
                    return Err(WireError::BadField {
                        field: "key",
                        frame: 4,
                        reason: "must be a CURVE public key in Z85 (40 characters)",
                    });
                }
                Some(k)
            } else {
                None
            };
            Ok(Beacon::Node {
                uuid,
                host: f(2),
                port,
                key,
            })
        }
        n => Err(WireError::FrameCount {
            what: "a beacon",
            got: n,
            expected: "1, 3, 4 or 5",
        }),
    }
}
