//! The discovery keywords every node and read client takes (``towers``,
//! ``peers``, ``wire``, ``bind``, ``beacon_interval``, ``beacon_timeout``,
//! ``advertise_host``), parsed in one place into a [`NodeConfig`].

use pyo3::prelude::*;

use super::errors::Exc;
use super::{hwm, seconds, str_list, StrList};
use crate::node::NodeConfig;

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
}

impl Discovery<'_> {
    /// The node's config with its high-water marks, checked as the node
    /// would check it at start-up.
    pub(crate) fn node_config(self, sndhwm: i128, rcvhwm: i128) -> PyResult<NodeConfig> {
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
            security: None,
        };
        cfg.validate()?;
        Ok(cfg)
    }

    /// A short-lived read client's config: the nodes' default queue limits.
    pub(crate) fn read_config(self) -> PyResult<NodeConfig> {
        let d = &super::defaults::DEFAULT.node;
        self.node_config(d.sndhwm, d.rcvhwm)
    }
}
