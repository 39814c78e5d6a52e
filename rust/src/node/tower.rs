//! The tower: an XSUB (node beacons in, default `tcp://*:5556`) and an XPUB
//! (towards nodes, default `tcp://*:5557`) with the welcome message `W`.
//! Subscriptions from nodes are relayed upstream to the XSUB; node beacons
//! (4 frames) are rewritten into tower beacons (3 frames `B`, UUID,
//! `tcp://host:port`), an empty host replaced by the TCP peer address.

use std::sync::Arc;

use crate::error::{Error, Result};
use crate::node::actor::{Actor, Inbox, Ready};
use crate::node::config::{bind_spelling, split_tcp, TowerConfig};
use crate::node::core::{Frames, Stats};
use crate::wire::{decode_beacon, Beacon, WELCOME};

/// The pure rewrite: a node beacon and the peer address it came from →
/// the tower beacon's frames; None for anything else.
pub fn rewrite(frames: &[&[u8]], peer_address: Option<&str>) -> Option<Vec<Vec<u8>>> {
    match decode_beacon(frames).ok()? {
        Beacon::Node { uuid, host, port } => {
            let host = if host.is_empty() {
                peer_address?.as_bytes()
            } else {
                host
            };
            let host = std::str::from_utf8(host).ok()?;
            let endpoint = format!("tcp://{host}:{port}");
            Some(
                Beacon::Tower {
                    uuid,
                    endpoint: endpoint.as_bytes(),
                }
                .to_frames(),
            )
        }
        _ => None,
    }
}

enum Cmd {}

/// A running tower.
pub struct Tower {
    actor: Actor<Cmd>,
    stats: Arc<Stats>,
    beacon_in: String,
    beacon_out: String,
}

fn bind(sock: &zmq::Socket, e: &str) -> Result<String> {
    sock.bind(&bind_spelling(e))
        .map_err(|source| Error::Socket {
            op: "bind",
            endpoint: e.to_string(),
            source,
        })?;
    let bound = sock
        .get_last_endpoint()?
        .map_err(|_| Error::Config("bound endpoint is not UTF-8".into()))?;
    Ok(match split_tcp(&bound) {
        Some(("0.0.0.0" | "*" | "[::]", port)) => format!("tcp://127.0.0.1:{port}"),
        _ => bound,
    })
}

impl Tower {
    /// Binds both sockets (port 0 = ephemeral) and starts the relay.
    pub fn new(cfg: TowerConfig) -> Result<Self> {
        let ctx = zmq::Context::new();
        let stats = Arc::new(Stats::default());
        let st = stats.clone();
        let (actor, (beacon_in, beacon_out)) =
            Actor::spawn("dafka-tower", &ctx.clone(), move |inbox, ready| {
                run(inbox, ready, &ctx, &cfg, &st)
            })?;
        Ok(Self {
            actor,
            stats,
            beacon_in,
            beacon_out,
        })
    }

    /// What nodes pass in `towers=[...]`: `tcp://HOST:IN,OUT`.
    pub fn endpoint(&self) -> String {
        let out_port = split_tcp(&self.beacon_out).map(|(_, p)| p).unwrap_or(0);
        format!("{},{out_port}", self.beacon_in)
    }
    pub fn beacon_in(&self) -> &str {
        &self.beacon_in
    }
    pub fn beacon_out(&self) -> &str {
        &self.beacon_out
    }
    pub fn stats(&self) -> &Stats {
        &self.stats
    }
    pub fn check(&self) -> Result<()> {
        self.actor.check()
    }
    pub fn close(&self) -> Result<()> {
        self.actor.close()
    }
}

fn run(
    inbox: &mut Inbox<Cmd>,
    ready: &mut Ready<(String, String)>,
    ctx: &zmq::Context,
    cfg: &TowerConfig,
    stats: &Stats,
) -> Result<()> {
    let xsub = ctx.socket(zmq::XSUB)?;
    xsub.set_linger(0)?;
    let xpub = ctx.socket(zmq::XPUB)?;
    xpub.set_linger(0)?;
    xpub.set_xpub_welcome_msg(Some(std::str::from_utf8(WELCOME).unwrap_or("W")))?;
    let bin = bind(&xsub, &cfg.beacon_in)?;
    let bout = bind(&xpub, &cfg.beacon_out)?;
    ready.send((bin, bout));
    let mut frames = Frames::default();
    loop {
        if inbox.terminated() {
            return Ok(());
        }
        let (sub_in, pub_in) = {
            let mut items = [
                inbox.poll_item(),
                xsub.as_poll_item(zmq::POLLIN),
                xpub.as_poll_item(zmq::POLLIN),
            ];
            let t = inbox.before_poll(-1);
            zmq::poll(&mut items, t)?;
            (items[1].is_readable(), items[2].is_readable())
        };
        inbox.after_poll();
        if pub_in {
            // Subscriptions from nodes go upstream, so node PUBs send beacons.
            while frames.recv(&xpub)? {
                let (s, n) = frames.slices();
                if n == 1 && !frames.too_long() {
                    xsub.send(s[0], zmq::DONTWAIT)?;
                }
            }
        }
        if sub_in {
            while frames.recv(&xsub)? {
                if frames.too_long() {
                    Stats::add(&stats.malformed, 1);
                    continue;
                }
                let peer = frames.first_mut().gets("Peer-Address").map(str::to_string);
                let (s, n) = frames.slices();
                match rewrite(&s[..n], peer.as_deref()) {
                    Some(out) => {
                        xpub.send_multipart(out, zmq::DONTWAIT)?;
                        Stats::add(&stats.beacons, 1);
                    }
                    None => Stats::add(&stats.malformed, 1),
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const U: &[u8] = b"85E3C6EBDC7B4156AD9C43611EBC09CE";

    #[test]
    fn rewrites_node_beacons() {
        let out = rewrite(&[b"B", U, b"10.0.0.7", b"4242"], Some("127.0.0.1")).unwrap();
        assert_eq!(
            out,
            vec![b"B".to_vec(), U.to_vec(), b"tcp://10.0.0.7:4242".to_vec()]
        );
        let out = rewrite(&[b"B", U, b"", b"4242"], Some("192.168.1.2")).unwrap();
        assert_eq!(out[2], b"tcp://192.168.1.2:4242");
        assert!(rewrite(&[b"B", U, b"", b"4242"], None).is_none());
        assert!(rewrite(&[b"B", U, b"tcp://x:1"], Some("h")).is_none());
        assert!(rewrite(&[b"B", U, b"h", b"0"], Some("h")).is_none());
        assert!(rewrite(&[b"X"], Some("h")).is_none());
    }
}
