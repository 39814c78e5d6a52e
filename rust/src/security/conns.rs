//! The connections peers opened to a secure node's bound sockets (a node's
//! XPUB, a tower's XSUB and XPUB), each with the key that authenticated it.
//!
//! libzmq gives a bound socket no way to close one peer's connection, and
//! ZAP acts only at a handshake. Every message read carries the connection's
//! file descriptor (the `__fd` property, `ZMQ_SRCFD`) and the key ZAP
//! accepted (`User-Id`), so a node learns which connection holds which key
//! from what it reads ([`Conns::seen`]). Revoking a key then shuts down that
//! key's connections and no other ([`Conns::cut`]): libzmq's I/O thread sees
//! the end of the stream and closes the connection as if the peer had; the
//! peer's reconnect goes through ZAP again and is refused. A peer that never
//! sent anything has no subscription, so it receives nothing.
//!
//! A descriptor is checked against its two ends (peer and local address)
//! at every message and before it is shut down: a number another
//! connection took since is that connection's, and one that closed is
//! forgotten ([`Conns::closed`], when the socket's monitor says so).

use std::collections::HashMap;
use std::net::SocketAddr;

/// One peer connection to a bound socket.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Conn {
    /// The key that authenticated it.
    pub key: [u8; 32],
    /// Its two ends, when first seen: a descriptor whose ends differ now is
    /// another connection.
    ends: (SocketAddr, SocketAddr),
    /// It subscribed every RECORD-BATCH (`R`): a store of this project.
    pub store: bool,
}

impl Conn {
    /// The peer's address (`IP:PORT`), for logs.
    pub fn peer(&self) -> SocketAddr {
        self.ends.0
    }
}

/// The connections of one bound socket (or two, a tower's), by descriptor.
#[derive(Debug, Default)]
pub struct Conns {
    by_fd: HashMap<i32, Conn>,
    /// Connections the monitor said closed whose descriptor libzmq had not
    /// closed yet when asked ([`Conns::closed`]): looked at again.
    closing: Vec<i32>,
    /// [`Conns::store_keys`], while nothing changed.
    stores: Option<usize>,
}

impl Conns {
    /// A message came by connection `fd`, authenticated as `key`: returns
    /// the connection, known from now on (None if `fd` is no TCP connection
    /// open now).
    /// Messages that carry a descriptor are subscriptions and beacons, not
    /// records: the two system calls that check it cost nothing that shows.
    pub fn seen(&mut self, fd: i32, key: &[u8; 32]) -> Option<&mut Conn> {
        self.stores = None;
        let Some(ends) = tcp_ends(fd) else {
            self.by_fd.remove(&fd);
            return None;
        };
        let known = self
            .by_fd
            .get(&fd)
            .is_some_and(|c| c.key == *key && c.ends == ends);
        if !known {
            // A new connection, or a new one on a reused descriptor.
            let store = false;
            self.by_fd.insert(
                fd,
                Conn {
                    key: *key,
                    ends,
                    store,
                },
            );
        }
        self.by_fd.get_mut(&fd)
    }

    /// The socket's monitor says connection `fd` closed: forgotten once its
    /// descriptor is closed (libzmq tells before it closes it), unless the
    /// number is already another connection's that was seen since.
    pub fn closed(&mut self, fd: i32) {
        if self.by_fd.contains_key(&fd) && !self.closing.contains(&fd) {
            self.closing.push(fd);
        }
        self.settle();
    }

    /// Forgets the closing connections whose descriptor is closed now (call
    /// it now and then: each turn of a node's loop).
    pub fn settle(&mut self) {
        if self.closing.is_empty() {
            return;
        }
        self.stores = None;
        let by_fd = &mut self.by_fd;
        self.closing.retain(|fd| match by_fd.get(fd) {
            Some(c) if tcp_ends(*fd) == Some(c.ends) => true,
            Some(_) => {
                by_fd.remove(fd);
                false
            }
            None => false,
        });
    }

    /// Shuts down every connection whose key `keep` refuses (a key revoked)
    /// and forgets it; returns those cut.
    pub fn cut(&mut self, keep: impl Fn(&[u8; 32]) -> bool) -> Vec<Conn> {
        self.stores = None;
        let mut cut = Vec::new();
        self.by_fd.retain(|&fd, c| {
            if keep(&c.key) {
                return true;
            }
            if tcp_ends(fd) == Some(c.ends) {
                shutdown(fd);
                cut.push(c.clone());
            }
            false
        });
        cut
    }

    /// Shuts down connection `fd` now if it is the one known (a revoked key
    /// still talking); forgets it.
    pub fn cut_fd(&mut self, fd: i32) {
        self.stores = None;
        if let Some(c) = self.by_fd.remove(&fd) {
            if tcp_ends(fd) == Some(c.ends) {
                shutdown(fd);
            }
        }
    }

    /// Distinct keys among the connections that subscribed as stores (only
    /// a store-role key may); counted again only after a change.
    pub fn store_keys(&mut self) -> usize {
        if let Some(n) = self.stores {
            return n;
        }
        let mut keys: Vec<&[u8; 32]> = self
            .by_fd
            .values()
            .filter(|c| c.store)
            .map(|c| &c.key)
            .collect();
        keys.sort_unstable();
        keys.dedup();
        let n = keys.len();
        self.stores = Some(n);
        n
    }

    pub fn len(&self) -> usize {
        self.by_fd.len()
    }

    pub fn is_empty(&self) -> bool {
        self.by_fd.is_empty()
    }
}

/// The `__fd` property of a message read from a bound socket.
pub fn fd_of(msg: &mut zmq::Message) -> Option<i32> {
    msg.gets("__fd")?.parse().ok()
}

/// A TCP socket's (peer, local) addresses; None if `fd` is none (closed, or
/// another kind of file).
pub fn tcp_ends(fd: i32) -> Option<(SocketAddr, SocketAddr)> {
    let get = |peer: bool| {
        // SAFETY: a zeroed sockaddr_storage is a valid out-buffer of the
        // length given; getpeername/getsockname write at most that many
        // bytes and only read `fd` (a closed or unrelated descriptor gives
        // an error, not undefined behaviour).
        let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        let p = (&mut ss as *mut libc::sockaddr_storage).cast::<libc::sockaddr>();
        let rc = unsafe {
            if peer {
                libc::getpeername(fd, p, &mut len)
            } else {
                libc::getsockname(fd, p, &mut len)
            }
        };
        (rc == 0).then(|| to_socket_addr(&ss)).flatten()
    };
    Some((get(true)?, get(false)?))
}

fn to_socket_addr(ss: &libc::sockaddr_storage) -> Option<SocketAddr> {
    match i32::from(ss.ss_family) {
        libc::AF_INET => {
            // SAFETY: the family says the storage holds a sockaddr_in.
            let a = unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in>() };
            let ip = std::net::Ipv4Addr::from(u32::from_be(a.sin_addr.s_addr));
            Some(SocketAddr::new(ip.into(), u16::from_be(a.sin_port)))
        }
        libc::AF_INET6 => {
            // SAFETY: the family says the storage holds a sockaddr_in6.
            let a = unsafe { &*(ss as *const libc::sockaddr_storage).cast::<libc::sockaddr_in6>() };
            let ip = std::net::Ipv6Addr::from(a.sin6_addr.s6_addr);
            Some(SocketAddr::new(ip.into(), u16::from_be(a.sin6_port)))
        }
        _ => None,
    }
}

fn shutdown(fd: i32) {
    // SAFETY: shutdown only reads `fd`, checked just before to be the TCP
    // connection recorded; it does not close the descriptor, which stays
    // libzmq's to close when it sees the end of the stream.
    unsafe {
        libc::shutdown(fd, libc::SHUT_RDWR);
    }
}

#[cfg(test)]
mod tests;
