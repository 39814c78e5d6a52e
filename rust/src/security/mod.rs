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
pub mod conns;
pub mod error;
pub mod said;
pub mod trust;
pub mod zap;

pub use acl::{
    address_for_key, address_for_key_with, address_matches_key, check_group,
    check_member_subscription, check_message, check_subscription, Denied, Peer, Role,
    TopicPatterns,
};
pub use cert::{keygen, Certificate};
pub use error::SecurityError;
pub use trust::{TrustSnapshot, TrustStore, Trusted};
pub use zap::{ZapHandler, ZapStats};

/// How often a node looks at its trust directory for changes.
pub const TRUST_REREAD: std::time::Duration = std::time::Duration::from_secs(1);

/// Where a secure node's keys are: its secret certificate (`NAME.key_secret`)
/// and the cluster's trust directory of public certificates.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct SecurityConfig {
    pub cert: std::path::PathBuf,
    pub trust: std::path::PathBuf,
}

impl SecurityConfig {
    /// The node's public key, from its certificate.
    pub fn public_key(&self) -> Result<[u8; 32], SecurityError> {
        Ok(Certificate::load_secret(&self.cert)?.public)
    }

    /// Reads both, checking the certificate's role is `role`.
    pub fn load(&self, role: Role) -> Result<Secure, SecurityError> {
        if !has_curve() {
            return Err(SecurityError::NoCurve("zmq_has(\"curve\") is false".into()));
        }
        let cert = Certificate::load_secret(&self.cert)?;
        match cert.role()? {
            Some(r) if r == role => {}
            found => {
                return Err(SecurityError::WrongRole {
                    path: self.cert.clone(),
                    found: found.map_or("none", Role::name),
                    want: role.name(),
                })
            }
        }
        let trust = std::sync::Arc::new(TrustStore::open(&self.trust, TRUST_REREAD)?);
        Ok(Secure { cert, trust })
    }
}

/// A secure node's keys, loaded.
#[derive(Debug)]
pub struct Secure {
    /// Its certificate, with the secret key.
    pub cert: Certificate,
    /// The keys it trusts, reread when they change.
    pub trust: std::sync::Arc<TrustStore>,
}

impl Secure {
    pub fn public(&self) -> &[u8; 32] {
        &self.cert.public
    }

    pub fn secret(&self) -> &[u8; 32] {
        self.cert
            .secret
            .as_ref()
            .expect("loaded with load_secret: the secret key is there")
    }

    /// Makes `sock` a CURVE server with our keys, asking ZAP (domain `dafka`).
    pub fn serve(&self, sock: &zmq::Socket) -> zmq::Result<()> {
        sock.set_zap_domain(zap::DOMAIN)?;
        sock.set_curve_server(true)?;
        sock.set_curve_secretkey(self.secret())
    }

    /// Sets `sock`'s CURVE client keys for its next `connect`, to the
    /// server holding `server`.
    pub fn client(&self, sock: &zmq::Socket, server: &[u8; 32]) -> zmq::Result<()> {
        sock.set_curve_serverkey(server)?;
        sock.set_curve_publickey(self.public())?;
        sock.set_curve_secretkey(self.secret())
    }
}

/// An endpoint with the CURVE key of the node or tower bound there, as
/// `tcp://HOST:PORT;curve=<Z85 key>`: what a secure `Tower.endpoint` or a
/// secure static peer looks like (`;` is in no endpoint and no Z85 text).
pub fn split_keyed(endpoint: &str) -> Result<(&str, Option<[u8; 32]>), SecurityError> {
    match endpoint.split_once(";curve=") {
        None => Ok((endpoint, None)),
        Some((ep, key)) => {
            let k = cert::parse_key_z85(key).ok_or_else(|| SecurityError::BadKey {
                path: std::path::PathBuf::from(endpoint),
                what: "the key after ;curve=",
            })?;
            Ok((ep, Some(k)))
        }
    }
}

/// `endpoint;curve=<key>`.
pub fn keyed(endpoint: &str, key: &[u8; 32]) -> String {
    format!("{endpoint};curve={}", cert::key_z85(key))
}

/// Whether this build's libzmq has CURVE (it has, with the vendored zmq-sys).
pub fn has_curve() -> bool {
    zmq::has("curve").unwrap_or(false)
}
