//! The metrics HTTP server: `GET /metrics` on threads of its own, apart
//! from every node thread.
//!
//! Requests are parsed by `httparse`; the server bounds what a client can
//! cost: the request head is at most [`MAX_HEAD`] bytes (431 past it), must
//! arrive within [`HEAD_WITHIN`] (408 after), at most [`MAX_CLIENTS`]
//! connections are served at once (503 for more), each on a short-lived
//! thread, and every answer closes its connection. A client that connects
//! and sends nothing, or sends headers without end, holds one of those
//! threads for [`HEAD_WITHIN`] at most and never a node's. (`tiny_http`
//! reads header lines without a bound, its issue 56.)
//!
//! Answers: `/metrics` (GET or HEAD) 200 with the OpenMetrics text; any
//! other path 404; another method 405; a head that does not parse 400.

use std::io::{Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, ToSocketAddrs};
use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering::Relaxed};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use super::Sources;
use crate::error::{Error, Result};

/// The longest request head (request line and headers) served.
pub const MAX_HEAD: usize = 8192;
/// Headers a request may have at most.
const MAX_HEADERS: usize = 64;
/// A client must have sent its whole request head within this.
pub const HEAD_WITHIN: Duration = Duration::from_secs(3);
/// Connections served at once; more are answered 503 at once.
pub const MAX_CLIENTS: usize = 16;
/// After answering, what is read of a client's leftovers before closing.
const DRAIN: usize = 4 << 20;
const DRAIN_WITHIN: Duration = Duration::from_secs(2);
/// How often the accept loop looks at its stop flag.
const ACCEPT_TICK: Duration = Duration::from_millis(20);
/// What a server grants its clients: [`Limits::DEFAULT`] in production; the tests
/// hold connections open without racing the head deadline.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Limits {
    /// See [`HEAD_WITHIN`].
    pub head_within: Duration,
    /// See [`MAX_CLIENTS`].
    pub max_clients: usize,
}

impl Limits {
    pub const DEFAULT: Self = Self {
        head_within: HEAD_WITHIN,
        max_clients: MAX_CLIENTS,
    };
}

/// The OpenMetrics media type.
const CONTENT_TYPE: &str = "application/openmetrics-text; version=1.0.0; charset=utf-8";

/// A running metrics server; stops when closed or dropped.
pub struct MetricsServer {
    addr: SocketAddr,
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl MetricsServer {
    /// Binds `listen` (`HOST:PORT`, port 0: any free one) and serves
    /// `sources` until closed.
    pub fn start(listen: &str, sources: Sources) -> Result<Self> {
        Self::start_with(listen, sources, Limits::DEFAULT)
    }

    /// [`MetricsServer::start`] with other [`Limits`].
    pub(crate) fn start_with(listen: &str, sources: Sources, limits: Limits) -> Result<Self> {
        super::check_listen("metrics address", listen)?;
        let addrs: Vec<SocketAddr> = listen
            .to_socket_addrs()
            .map_err(|e| Error::Config(format!("metrics address {listen:?}: {e}")))?
            .collect();
        let listener = TcpListener::bind(&addrs[..])
            .map_err(|e| Error::Config(format!("cannot listen for metrics on {listen}: {e}")))?;
        let addr = listener.local_addr().map_err(io("metrics listener"))?;
        listener
            .set_nonblocking(true)
            .map_err(io("metrics listener"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let flag = stop.clone();
        let thread = std::thread::Builder::new()
            .name("dafka-metrics".into())
            .spawn(move || accept_loop(&listener, &sources, &flag, limits))
            .map_err(io("metrics thread"))?;
        Ok(Self {
            addr,
            stop,
            thread: Some(thread),
        })
    }

    /// The address bound (the real port when 0 was asked).
    pub fn local_addr(&self) -> SocketAddr {
        self.addr
    }

    /// Stops accepting and waits for the accept thread (connections being
    /// served finish on their own threads, within [`HEAD_WITHIN`]).
    pub fn close(&mut self) {
        self.stop.store(true, Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

impl Drop for MetricsServer {
    fn drop(&mut self) {
        self.close();
    }
}

fn io(what: &'static str) -> impl Fn(std::io::Error) -> Error {
    move |e| Error::Config(format!("{what}: {e}"))
}

fn accept_loop(listener: &TcpListener, sources: &Sources, stop: &AtomicBool, limits: Limits) {
    let busy = Arc::new(AtomicUsize::new(0));
    while !stop.load(Relaxed) {
        let stream = match listener.accept() {
            Ok((s, _)) => s,
            Err(e) if e.kind() == std::io::ErrorKind::WouldBlock => {
                std::thread::sleep(ACCEPT_TICK);
                continue;
            }
            Err(e) => {
                // Out of file descriptors, a connection reset before accept:
                // wait a little and go on.
                tracing::debug!("metrics: accept failed: {e}");
                std::thread::sleep(ACCEPT_TICK);
                continue;
            }
        };
        if busy.fetch_add(1, Relaxed) >= limits.max_clients {
            busy.fetch_sub(1, Relaxed);
            refuse(stream, 503);
            continue;
        }
        let (busy2, sources) = (busy.clone(), sources.clone());
        let spawned = std::thread::Builder::new()
            .name("dafka-metrics-client".into())
            .spawn(move || {
                serve(stream, &sources, limits.head_within);
                busy2.fetch_sub(1, Relaxed);
            });
        if spawned.is_err() {
            busy.fetch_sub(1, Relaxed);
        }
    }
}

/// Answers a connection the server will not read: the status only.
fn refuse(mut stream: TcpStream, status: u16) {
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_write_timeout(Some(Duration::from_millis(200)));
    let _ = respond(&mut stream, status, "text/plain", &[], false);
}

/// What a request head says: the status to answer, and whether the body
/// is wanted (GET, not HEAD).
#[derive(Debug, PartialEq, Eq)]
pub(crate) enum Asked {
    Metrics { body: bool },
    Status(u16),
}

/// Reads one request head from `r` (at most [`MAX_HEAD`] bytes, until
/// `deadline`) and says what it asks.
pub(crate) fn read_head(r: &mut impl Read, deadline: Instant) -> Option<Asked> {
    let mut buf = vec![0u8; MAX_HEAD];
    let mut len = 0;
    loop {
        if Instant::now() >= deadline {
            return Some(Asked::Status(408));
        }
        let n = match r.read(&mut buf[len..]) {
            Ok(0) => return None,
            Ok(n) => n,
            Err(e) if matches!(e.kind(), std::io::ErrorKind::Interrupted) => continue,
            Err(e)
                if matches!(
                    e.kind(),
                    std::io::ErrorKind::WouldBlock | std::io::ErrorKind::TimedOut
                ) =>
            {
                return Some(Asked::Status(408))
            }
            Err(_) => return None,
        };
        len += n;
        let mut headers = [httparse::EMPTY_HEADER; MAX_HEADERS];
        let mut req = httparse::Request::new(&mut headers);
        match req.parse(&buf[..len]) {
            Ok(httparse::Status::Complete(_)) => return Some(route(&req)),
            Ok(httparse::Status::Partial) if len == MAX_HEAD => return Some(Asked::Status(431)),
            Ok(httparse::Status::Partial) => {}
            Err(httparse::Error::TooManyHeaders) => return Some(Asked::Status(431)),
            Err(_) => return Some(Asked::Status(400)),
        }
    }
}

fn route(req: &httparse::Request<'_, '_>) -> Asked {
    let path = req.path.unwrap_or("");
    let path = path.split_once('?').map_or(path, |(p, _)| p);
    if path != "/metrics" {
        return Asked::Status(404);
    }
    match req.method {
        Some("GET") => Asked::Metrics { body: true },
        Some("HEAD") => Asked::Metrics { body: false },
        _ => Asked::Status(405),
    }
}

fn serve(mut stream: TcpStream, sources: &Sources, head_within: Duration) {
    let deadline = Instant::now() + head_within;
    let _ = stream.set_nonblocking(false);
    let _ = stream.set_read_timeout(Some(head_within));
    let _ = stream.set_write_timeout(Some(head_within));
    let r = match read_head(&mut stream, deadline) {
        None => return,
        Some(Asked::Status(s)) => respond(&mut stream, s, "text/plain", reason(s).as_bytes(), true),
        Some(Asked::Metrics { body }) => {
            let text = super::encode(&sources.current());
            respond(&mut stream, 200, CONTENT_TYPE, text.as_bytes(), body)
        }
    };
    match r {
        Ok(()) => drain(&mut stream),
        Err(e) => tracing::debug!("metrics: answering a client failed: {e}"),
    }
}

fn reason(status: u16) -> &'static str {
    match status {
        200 => "OK",
        400 => "Bad Request",
        404 => "Not Found",
        405 => "Method Not Allowed",
        408 => "Request Timeout",
        431 => "Request Header Fields Too Large",
        503 => "Service Unavailable",
        _ => "Error",
    }
}

fn respond(
    stream: &mut TcpStream,
    status: u16,
    content_type: &str,
    body: &[u8],
    send_body: bool,
) -> std::io::Result<()> {
    let head = format!(
        "HTTP/1.1 {status} {}\r\nContent-Type: {content_type}\r\nContent-Length: {}\r\n\
         Connection: close\r\n\r\n",
        reason(status),
        body.len()
    );
    stream.write_all(head.as_bytes())?;
    if send_body {
        stream.write_all(body)?;
    }
    stream.flush()
}

/// After an answer: reads what the client may still send (the rest of a head too long),
/// so closing does not reset the connection before it read the answer: at
/// most [`DRAIN`] bytes for [`DRAIN_WITHIN`].
fn drain(stream: &mut TcpStream) {
    let _ = stream.shutdown(std::net::Shutdown::Write);
    let until = Instant::now() + DRAIN_WITHIN;
    let _ = stream.set_read_timeout(Some(DRAIN_WITHIN));
    let mut sink = [0u8; 16384];
    let mut drained = 0;
    while drained < DRAIN && Instant::now() < until {
        match stream.read(&mut sink) {
            Ok(n) if n > 0 => drained += n,
            _ => break,
        }
    }
}
