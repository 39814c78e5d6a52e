//! Secure clusters (issue 30): the pieces that do not touch a socket loop.
//!
//! - [`cert`]: certificates in czmq's format (ZPL text, RFC 4; Z85 keys, RFC 32):
//!   `NAME.key` holds the public key, `NAME.key_secret` both keys, and their
//!   `metadata` section a node's role and topic patterns. [`keygen`] writes a pair.
//! - [`trust`]: a trust directory of public certificates (czmq `zcertstore`
//!   style), read again when it changes, so a key can be added or revoked
//!   without restarting anything.
//! - [`zap`]: the ZAP handler (RFC 27) that CURVE servers ask about every client
//!   key. Without one bound on `inproc://zeromq.zap.01`, a CURVE server lets any
//!   key in: encryption without authentication.
//! - [`acl`]: roles and topic patterns, and the binding of a node's address to
//!   its key (the address starts with the key's first 8 bytes in hex).

pub mod acl;
pub mod cert;
pub mod error;
pub mod trust;
pub mod zap;

pub use acl::{
    address_for_key, address_matches_key, check_message, check_subscription, Denied, Peer, Role,
    TopicPatterns,
};
pub use cert::{keygen, Certificate};
pub use error::SecurityError;
pub use trust::{TrustSnapshot, TrustStore, Trusted};
pub use zap::{ZapHandler, ZapStats};

/// Whether this build's libzmq has CURVE (it has, with the vendored zmq-sys).
pub fn has_curve() -> bool {
    zmq::has("curve").unwrap_or(false)
}
