//! A bound socket's connection events (libzmq's socket monitor): the
//! connections that closed (a tower forgets the nodes that beaconed by them)
//! and, on a secure socket, the handshakes that failed before ZAP was asked:
//! a plaintext peer, or one of another mechanism, is refused by CURVE at the
//! greeting, which no ZAP handler sees. Each failure is counted and logged,
//! once a minute per peer address and reason.
//!
//! libzmq sends monitor events from its I/O thread with a blocking send: the
//! reading end here takes any number (no high-water mark), and the monitor is
//! stopped before its socket closes ([`Monitor::stop`]), so the I/O thread
//! never waits on it.

use std::collections::HashMap;
use std::net::SocketAddr;
use std::sync::atomic::{AtomicUsize, Ordering::Relaxed};

use crate::error::Result;
use crate::security::said::Said;

/// What the events read since the last call say.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Events {
    /// Connections (file descriptors) that closed.
    pub disconnected: Vec<i32>,
    /// Handshakes that failed before ZAP was asked: refused by the security
    /// mechanism (another one, a broken CURVE handshake) or broken off by
    /// the peer.
    pub refused: u64,
}

/// The reading end of one socket's monitor.
pub struct Monitor {
    sock: zmq::Socket,
    /// Peers of connections accepted and not closed yet, for the log.
    accepted: HashMap<i32, SocketAddr>,
    /// A handshake failed: the next closed connection is its.
    failed: Option<String>,
    said: Said,
}

/// Tells the monitors' inproc endpoints apart.
static MONITORS: AtomicUsize = AtomicUsize::new(0);

/// Peers remembered between their connection and its end.
const ACCEPTED_MAX: usize = 4096;

impl Monitor {
    /// Starts monitoring `target` for closed connections and failed
    /// handshakes.
    pub fn watch(ctx: &zmq::Context, target: &zmq::Socket) -> Result<Self> {
        let sock = ctx.socket(zmq::PAIR)?;
        sock.set_linger(0)?;
        sock.set_rcvhwm(0)?;
        let endpoint = format!("inproc://dafka-monitor-{}", MONITORS.fetch_add(1, Relaxed));
        let events = zmq_sys::ZMQ_EVENT_ACCEPTED
            | zmq_sys::ZMQ_EVENT_DISCONNECTED
            | zmq_sys::ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL
            | zmq_sys::ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL;
        target.monitor(&endpoint, events as i32)?;
        sock.connect(&endpoint)?;
        Ok(Self {
            sock,
            accepted: HashMap::new(),
            failed: None,
            said: Said::default(),
        })
    }

    pub fn poll_item(&self) -> zmq::PollItem<'_> {
        self.sock.as_poll_item(zmq::POLLIN)
    }

    /// Reads every event waiting.
    pub fn drain(&mut self) -> Result<Events> {
        let mut ev = Events::default();
        loop {
            let parts = match self.sock.recv_multipart(zmq::DONTWAIT) {
                Ok(p) => p,
                Err(zmq::Error::EAGAIN) => return Ok(ev),
                Err(e) => return Err(e.into()),
            };
            // Frame 1: the event (u16) and its value (u32), in the host's
            // byte order; frame 2: the endpoint.
            let Some(f) = parts.first().filter(|f| f.len() == 6) else {
                continue;
            };
            let event = u32::from(u16::from_ne_bytes([f[0], f[1]]));
            let value = u32::from_ne_bytes([f[2], f[3], f[4], f[5]]);
            match event {
                zmq_sys::ZMQ_EVENT_ACCEPTED => {
                    if self.accepted.len() >= ACCEPTED_MAX {
                        self.accepted.clear();
                    }
                    let fd = value as i32;
                    if let Some((peer, _)) = crate::security::conns::tcp_ends(fd) {
                        self.accepted.insert(fd, peer);
                    }
                }
                zmq_sys::ZMQ_EVENT_HANDSHAKE_FAILED_PROTOCOL => {
                    ev.refused += 1;
                    self.failed = Some(protocol_error(value));
                }
                // A plaintext peer often hangs up on seeing our mechanism
                // before ours has read its: then nothing says why.
                zmq_sys::ZMQ_EVENT_HANDSHAKE_FAILED_NO_DETAIL => {
                    ev.refused += 1;
                    self.failed = Some(
                        "it left during the handshake (a plaintext peer hangs up on \
                         seeing CURVE)"
                            .to_string(),
                    );
                }
                zmq_sys::ZMQ_EVENT_DISCONNECTED => {
                    let fd = value as i32;
                    ev.disconnected.push(fd);
                    let peer = self.accepted.remove(&fd);
                    // libzmq's one I/O thread reports a failed handshake
                    // and the end of its connection one after the other.
                    if let Some(why) = self.failed.take() {
                        self.say(peer, &why);
                    }
                }
                _ => {}
            }
        }
    }

    fn say(&mut self, peer: Option<SocketAddr>, why: &str) {
        let who = peer.map_or_else(|| "a peer".to_string(), |p| p.ip().to_string());
        if self.said.due(&who, why) {
            tracing::warn!("refused a connection from {who} at its handshake: {why}");
        }
    }

    /// Stops `target`'s monitor: call before `target` closes.
    pub fn stop(target: &mut zmq::Socket) {
        // SAFETY: a live socket used from its own thread; a null endpoint
        // stops its monitor.
        unsafe {
            zmq_sys::zmq_socket_monitor(target.as_mut_ptr(), std::ptr::null(), 0);
        }
    }
}

/// A ZMTP protocol error code, in words.
fn protocol_error(code: u32) -> String {
    match code {
        zmq_sys::ZMQ_PROTOCOL_ERROR_ZMTP_MECHANISM_MISMATCH => {
            "it speaks another security mechanism (plaintext, or PLAIN): a secure cluster \
             takes CURVE only"
                .to_string()
        }
        zmq_sys::ZMQ_PROTOCOL_ERROR_ZMTP_CRYPTOGRAPHIC => {
            "its CURVE handshake failed (a wrong server key?)".to_string()
        }
        c => format!("ZMTP protocol error {c:#x}"),
    }
}
