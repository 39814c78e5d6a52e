//! The options every node and read client takes, declared once:
//! [`Discovery`] (`towers`, `peers`, `wire`, `bind`, `beacon_interval`,
//! `beacon_timeout`, `advertise_host` and the secure-mode pair [`Secure`],
//! `cert` and `trust`), [`Hwm`] (the nodes' queue limits), and what they
//! become: a checked [`NodeConfig`].

use std::path::PathBuf;
use std::sync::LazyLock;
use std::time::Duration;

use pyo3::prelude::*;

use super::args::{str_list, StrList};
use super::errors::Exc;
use super::options::options;
use crate::node::{NodeConfig, TowerConfig};
use crate::security::{Role, SecurityConfig};
use crate::wire::Dialect;

/// The nodes' defaults (`NodeConfig::default()`, the core's).
pub(crate) static NODE: LazyLock<NodeConfig> = LazyLock::new(NodeConfig::default);

options! {
    /// Secure mode: both (CURVE, docs/security.md) or neither (plaintext).
    pub(crate) struct Secure {
        /// Secure mode (CURVE encryption and authentication, docs/security.md): the path of
        /// the node's secret certificate, ``NAME.key_secret`` as ``dafka keygen`` writes it,
        /// of the node's role (``"producer"``, ``"consumer"``, ``"store"``, ``"tower"``; a
        /// read client's is ``"consumer"``). Needs ``trust``. None: plaintext, anyone who
        /// reaches the node joins.
        cert: Option<PathBuf> = None,
        /// Secure mode: the directory of trusted public certificates (``NAME.key``), read
        /// again when it changes. Needs ``cert``. A secure node takes only keyed tower and
        /// peer endpoints (``...;curve=KEY``, what a secure ``Tower.endpoint`` gives), an
        /// insecure one only keyless; a secure tower's ``endpoint`` carries its key.
        trust: Option<PathBuf> = None,
    }
}

impl Secure {
    /// ``cert=`` and ``trust=`` as a [`SecurityConfig`]: both (secure mode)
    /// or neither (plaintext); one alone is a `ConfigError`.
    pub(crate) fn config(self) -> PyResult<Option<SecurityConfig>> {
        match (self.cert, self.trust) {
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
}

options! {
    /// How a node or read client finds its peers, and what it sends.
    pub(crate) struct Discovery {
        /// Towers to find peers through, each ``tcp://HOST:IN_PORT,OUT_PORT`` (what
        /// ``Tower.endpoint`` gives) or ``tcp://HOST:IN_PORT`` (OUT_PORT = IN_PORT + 1).
        /// None: no tower.
        towers: Option<StrList> = None,
        /// Static peers: XPUB endpoints ``tcp://HOST:PORT`` (the port the peer is bound to)
        /// to connect to, no tower needed. A node's ``connect(endpoint)`` adds one later.
        peers: Option<StrList> = None,
        /// The dialect the node sends in, ``"rfc"`` or ``"zproto"`` (the C reference's
        /// framing). A node receives both.
        wire: Dialect = NODE.wire,
        /// Where the node's XPUB binds; port 0 or ``*`` picks a free port. The default is
        /// reachable from this host only: bind ``tcp://*:0`` to be reachable from others.
        bind: String = NODE.bind.clone(),
        /// Seconds between the node's beacons; must be > 0.
        beacon_interval: Duration = NODE.beacon_interval,
        /// Seconds after which a silent peer is forgotten; must be longer than
        /// ``beacon_interval``.
        beacon_timeout: Duration = NODE.beacon_timeout,
        /// Host put in beacons (NAT, containers): peers connect to ``tcp://HOST:PORT``.
        /// ``""`` lets the tower use the TCP peer address. None: the bound host, or ``""``
        /// when bound to a wildcard.
        advertise_host: Option<String> = None,
        ..secure: Secure,
    }
}

options! {
    /// The queue limits of a node's sockets (the read clients take the
    /// nodes' defaults).
    pub(crate) struct Hwm {
        /// XPUB send high-water mark, in messages per subscriber; 0 = unlimited, at most
        /// 2,147,483,647.
        sndhwm: i32 = NODE.sndhwm,
        /// SUB receive high-water mark, in messages per peer; 0 = unlimited, at most
        /// 2,147,483,647.
        rcvhwm: i32 = NODE.rcvhwm,
    }
}

options! {
    /// `check_node`'s: a node's settings and the role its certificate must have.
    pub(crate) struct CheckNodeOptions {
        ..discovery: Discovery,
        /// The role ``cert`` must have: ``"store"``, ``"producer"``, ``"consumer"`` (a read
        /// client's) or ``"tower"``.
        role: Role = Role::Consumer,
    }
}

impl Discovery {
    /// The config of a node with the queue limits `hwm`, checked as the node
    /// checks it at start-up. The certificate is read by the node itself,
    /// which raises its error as its own type (`OSError`, `SecurityError`,
    /// `ConfigError` for another role).
    pub(crate) fn node_config(self, hwm: Hwm) -> PyResult<NodeConfig> {
        // What the node (or read client) will log reaches Python's `logging`.
        super::logbridge::install();
        let cfg = NodeConfig {
            bind: self.bind,
            towers: str_list(self.towers),
            peers: str_list(self.peers),
            wire: self.wire,
            beacon_interval: self.beacon_interval,
            beacon_timeout: self.beacon_timeout,
            advertise_host: self.advertise_host,
            sndhwm: hwm.sndhwm,
            rcvhwm: hwm.rcvhwm,
            security: self.secure.config()?,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// A read client's config: the nodes' queue limits.
    pub(crate) fn read_config(self) -> PyResult<NodeConfig> {
        self.node_config(Hwm {
            sndhwm: NODE.sndhwm,
            rcvhwm: NODE.rcvhwm,
        })
    }
}

impl CheckNodeOptions {
    /// Checks the settings as a node of `role` would at start-up, reading
    /// the certificate and trust directory (when given), without starting
    /// one.
    pub(crate) fn check(self) -> PyResult<()> {
        let cfg = self.discovery.read_config()?;
        if let Some(s) = &cfg.security {
            s.load(self.role)?;
        }
        Ok(())
    }
}

/// The tower's config from its options (`TowerConfig::default()` for the
/// rest).
pub(crate) fn tower_config(
    beacon_in: String,
    beacon_out: String,
    secure: Secure,
) -> PyResult<TowerConfig> {
    super::logbridge::install();
    let cfg = TowerConfig {
        beacon_in,
        beacon_out,
        security: secure.config()?,
    };
    crate::node::config::check_endpoint("beacon_in", &cfg.beacon_in)?;
    crate::node::config::check_endpoint("beacon_out", &cfg.beacon_out)?;
    Ok(cfg)
}
