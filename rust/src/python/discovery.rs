//! The discovery keywords every node and read client takes (``towers``,
//! ``peers``, ``wire``, ``bind``, ``beacon_interval``, ``beacon_timeout``,
//! ``advertise_host``) and the secure-mode pair (``cert``, ``trust``), parsed
//! in one place into a [`NodeConfig`].

use std::path::PathBuf;

use pyo3::prelude::*;

use super::errors::Exc;
use super::{hwm, seconds, str_list, StrList};
use crate::node::NodeConfig;
use crate::security::{Role, SecurityConfig};

/// The discovery keywords as an entry point received them. Each entry point
/// builds one (`Discovery { towers, peers, ... }`) and asks it for its
/// [`NodeConfig`]; their defaults are `DEFAULT.node` (`super::defaults`).
pub(crate) struct Discovery<'a> {
    pub towers: Option<StrList>,
    pub peers: Option<StrList>,
    pub wire: &'a str,
    pub bind: String,
    pub beacon_interval: f64,
    pub beacon_timeout: f64,
    pub advertise_host: Option<String>,
    pub cert: Option<PathBuf>,
    pub trust: Option<PathBuf>,
}

/// ``cert=`` and ``trust=`` as a [`SecurityConfig`]: both (secure mode) or
/// neither (plaintext); one alone is a `ConfigError`.
pub(crate) fn security(
    cert: Option<PathBuf>,
    trust: Option<PathBuf>,
) -> PyResult<Option<SecurityConfig>> {
    match (cert, trust) {
        (None, None) => Ok(None),
        (Some(cert), Some(trust)) => Ok(Some(SecurityConfig { cert, trust })),
        (cert, _) => Err(Exc::Config.err(format!(
            "{} given without {}: a secure node needs both cert= (its secret certificate, \
             NAME.key_secret) and trust= (the directory of trusted public certificates); \
             pass both, or neither for plaintext",
            if cert.is_some() { "cert=" } else { "trust=" },
            if cert.is_some() { "trust=" } else { "cert=" },
        ))),
    }
}

/// Reads the certificate and the trust directory of a secure node (when
/// `security` is set), as a node of `role` does when it starts: a missing
/// file raises `OSError`, a certificate without a secret key
/// `SecurityError`, one of another role `ConfigError` naming both roles.
/// Done in the caller's thread before a node starts (a node's own thread
/// would report these as `NodeError`), and by `check_node`, which starts
/// none.
pub(crate) fn load_security(security: Option<&SecurityConfig>, role: Role) -> PyResult<()> {
    if let Some(s) = security {
        s.load(role)?;
    }
    Ok(())
}

impl Discovery<'_> {
    /// The config of a node of `role` with its high-water marks, checked as
    /// the node would check it at start-up, its certificate and trust
    /// directory read ([`load_security`]).
    pub(crate) fn node_config(
        self,
        role: Role,
        sndhwm: i128,
        rcvhwm: i128,
    ) -> PyResult<NodeConfig> {
        // What the node (or read client) will log reaches Python's `logging`.
        super::logbridge::install();
        let cfg = NodeConfig {
            bind: self.bind,
            towers: str_list(self.towers),
            peers: str_list(self.peers),
            wire: self.wire.parse().map_err(Exc::Config.with())?,
            beacon_interval: seconds("beacon_interval", self.beacon_interval)?,
            beacon_timeout: seconds("beacon_timeout", self.beacon_timeout)?,
            advertise_host: self.advertise_host,
            sndhwm: hwm("sndhwm", sndhwm)?,
            rcvhwm: hwm("rcvhwm", rcvhwm)?,
            security: security(self.cert, self.trust)?,
        };
        cfg.validate()?;
        load_security(cfg.security.as_ref(), role)?;
        Ok(cfg)
    }

    /// A short-lived read client's config: the nodes' default queue limits;
    /// a secure read client holds a certificate of `role` (`consumer`, but
    /// for `check_node(role=...)`).
    pub(crate) fn read_config(self, role: Role) -> PyResult<NodeConfig> {
        let d = &super::defaults::DEFAULT.node;
        self.node_config(role, d.sndhwm, d.rcvhwm)
    }
}
