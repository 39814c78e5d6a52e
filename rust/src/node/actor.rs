//! The actor every node runs as (czmq's zactor, in Rust): one OS thread that
//! owns all of the node's sockets, a command channel from the handle, and a
//! wake-up pipe (an inproc PAIR in the node's own context) so the thread's one
//! `zmq::poll` also wakes for commands.
//!
//! - [`Actor::spawn`] blocks until the thread calls [`Ready::send`] (bound and
//!   ready) or fails; a bind error comes back from `spawn` itself.
//! - Commands: [`Actor::send`] pushes onto an mpsc channel and writes one wake
//!   byte only if the thread is (about to be) asleep in poll, so a busy thread
//!   costs the sender no syscall.
//! - [`Actor::close`] sets `$TERM`, wakes the thread and joins it. A panic or an
//!   error in the thread is kept and reported by [`Actor::check`] and `close`,
//!   never lost. The error stays itself: [`Error::Thread`] shares it with
//!   every later call (and `spawn` returns it as it was), so a caller sees
//!   the same error, of the same type, as if it had happened in its own
//!   thread.

use std::panic::{catch_unwind, AssertUnwindSafe};
use std::sync::atomic::{AtomicBool, AtomicU64, AtomicUsize, Ordering::SeqCst};
use std::sync::mpsc::{self, Receiver, Sender, SyncSender};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

use crate::error::{Error, Result};

static NEXT_PIPE: AtomicU64 = AtomicU64::new(0);

/// State shared by the handle and the thread.
#[derive(Debug, Default)]
pub struct ActorState {
    sleeping: AtomicBool,
    term: AtomicBool,
    alive: AtomicBool,
    queued: AtomicUsize,
    /// What the thread stopped with, shared by every call that reports it.
    error: Mutex<Option<Arc<Error>>>,
}

impl ActorState {
    pub fn alive(&self) -> bool {
        self.alive.load(SeqCst)
    }
    fn fail(&self, err: Error) {
        tracing::error!("dafka node thread failed: {err}");
        let mut e = self.error.lock().unwrap_or_else(|p| p.into_inner());
        e.get_or_insert(Arc::new(err));
    }
}

/// The write end of a node's wake pipe, shared by the handle and any helper
/// thread of the node (e.g. the store's syncer) that must wake its poll.
pub struct Waker(Mutex<Option<zmq::Socket>>);

impl Waker {
    /// Writes a wake byte: the node's next (or current) poll returns at once.
    /// A no-op once the node is closing.
    pub fn wake(&self) {
        let guard = self.0.lock().unwrap_or_else(|p| p.into_inner());
        if let Some(sock) = guard.as_ref() {
            // A full pipe already holds enough wake-ups.
            let _ = sock.send(&b"w"[..], zmq::DONTWAIT);
        }
    }

    fn shut(&self) {
        self.0.lock().unwrap_or_else(|p| p.into_inner()).take();
    }
}

/// The handle side: owns the command sender, the wake socket and the thread.
pub struct Actor<C> {
    tx: Sender<C>,
    state: Arc<ActorState>,
    wake: Arc<Waker>,
    join: Mutex<Option<JoinHandle<()>>>,
}

/// The thread side: commands, the wake pipe, and `$TERM`.
pub struct Inbox<C> {
    rx: Receiver<C>,
    pipe: zmq::Socket,
    state: Arc<ActorState>,
    waker: Arc<Waker>,
}

/// Given to the thread body; [`Ready::send`] unblocks [`Actor::spawn`].
pub struct Ready<R>(Option<SyncSender<R>>);

impl<R> Ready<R> {
    /// Reports that the node is bound and running, with what the handle needs.
    pub fn send(&mut self, info: R) {
        if let Some(tx) = self.0.take() {
            let _ = tx.send(info);
        }
    }
}

impl<C: Send + 'static> Actor<C> {
    /// Starts `body` on a new thread named `name` and waits until it is ready.
    ///
    /// `body` builds its sockets in `ctx`, calls `ready.send(info)` and runs its
    /// loop until [`Inbox::terminated`]. An `Err` or a panic before `ready`
    /// becomes this function's error; after it, [`Actor::check`]'s.
    pub fn spawn<R, F>(name: &str, ctx: &zmq::Context, body: F) -> Result<(Self, R)>
    where
        R: Send + 'static,
        F: FnOnce(&mut Inbox<C>, &mut Ready<R>) -> Result<()> + Send + 'static,
    {
        let endpoint = format!("inproc://dafka-actor-{}", NEXT_PIPE.fetch_add(1, SeqCst));
        let wake = ctx.socket(zmq::PAIR)?;
        wake.set_linger(0)?;
        wake.bind(&endpoint)?;
        let pipe = ctx.socket(zmq::PAIR)?;
        pipe.set_linger(0)?;
        pipe.connect(&endpoint)?;
        let (tx, rx) = mpsc::channel();
        let state = Arc::new(ActorState::default());
        state.alive.store(true, SeqCst);
        let (rtx, rrx) = mpsc::sync_channel(1);
        let wake = Arc::new(Waker(Mutex::new(Some(wake))));
        let mut inbox = Inbox {
            rx,
            pipe,
            state: state.clone(),
            waker: wake.clone(),
        };
        let st = state.clone();
        let join = std::thread::Builder::new()
            .name(name.to_string())
            .spawn(move || {
                let mut ready = Ready(Some(rtx));
                let outcome = catch_unwind(AssertUnwindSafe(|| body(&mut inbox, &mut ready)));
                match outcome {
                    Ok(Ok(())) => {}
                    Ok(Err(e)) => st.fail(e),
                    Err(panic) => {
                        let msg = panic
                            .downcast_ref::<&str>()
                            .map(|s| s.to_string())
                            .or_else(|| panic.downcast_ref::<String>().cloned())
                            .unwrap_or_else(|| "unknown panic".into());
                        st.fail(Error::died(format!("panic: {msg}")));
                    }
                }
                st.alive.store(false, SeqCst);
                drop(ready);
                drop(inbox);
            })
            .map_err(|e| Error::died(format!("cannot start thread: {e}")))?;
        let actor = Actor {
            tx,
            state,
            wake,
            join: Mutex::new(Some(join)),
        };
        match rrx.recv() {
            Ok(info) => Ok((actor, info)),
            Err(_) => {
                actor.join_thread();
                // The thread is gone: its error is the caller's, as it was.
                let failed = actor
                    .state
                    .error
                    .lock()
                    .unwrap_or_else(|p| p.into_inner())
                    .take();
                match failed {
                    Some(e) => Err(Arc::try_unwrap(e).unwrap_or_else(Error::Thread)),
                    None => Err(Error::died("the node thread exited before it was ready")),
                }
            }
        }
    }

    /// Queues a command and wakes the thread if it sleeps.
    pub fn send(&self, cmd: C) -> Result<()> {
        self.send_quiet(cmd)?;
        self.wake_if_sleeping();
        Ok(())
    }

    /// [`Actor::send`] without waking the thread: for a thread that is sure
    /// to look at its commands soon on its own (a poll with a short timeout,
    /// e.g. a producer napping: `producer/mod.rs`), it saves the sender the
    /// wake's syscall and the thread a context switch.
    pub fn send_quiet(&self, cmd: C) -> Result<()> {
        self.check()?;
        self.state.queued.fetch_add(1, SeqCst);
        if self.tx.send(cmd).is_err() {
            return Err(self.error().unwrap_or(Error::Closed));
        }
        Ok(())
    }

    /// Wakes the thread if it is asleep in poll (e.g. after the application
    /// drained a buffer the thread was waiting on).
    pub fn wake_if_sleeping(&self) {
        if self.state.sleeping.swap(false, SeqCst) {
            self.wake();
        }
    }

    /// Writes a wake byte unconditionally: the next (or current) poll of the
    /// thread returns at once.
    pub fn wake(&self) {
        self.wake.wake();
    }

    fn error(&self) -> Option<Error> {
        let e = self.state.error.lock().unwrap_or_else(|p| p.into_inner());
        e.clone().map(Error::Thread)
    }

    /// `Ok` while the thread runs; its error once it stopped.
    pub fn check(&self) -> Result<()> {
        if self.state.alive() {
            Ok(())
        } else {
            Err(self.error().unwrap_or(Error::Closed))
        }
    }

    pub fn state(&self) -> &ActorState {
        &self.state
    }

    fn join_thread(&self) {
        let handle = self.join.lock().unwrap_or_else(|p| p.into_inner()).take();
        if let Some(h) = handle {
            let _ = h.join();
        }
    }

    /// Sends `$TERM`, joins the thread, and returns its error if it failed.
    /// Idempotent.
    pub fn close(&self) -> Result<()> {
        self.state.term.store(true, SeqCst);
        self.wake();
        self.join_thread();
        self.wake.shut();
        match self.error() {
            Some(e) => Err(e),
            None => Ok(()),
        }
    }
}

impl<C> Drop for Actor<C> {
    fn drop(&mut self) {
        self.state.term.store(true, SeqCst);
        self.wake.wake();
        self.wake.shut();
        if let Some(h) = self.join.lock().unwrap_or_else(|p| p.into_inner()).take() {
            let _ = h.join();
        }
    }
}

impl<C> Inbox<C> {
    /// True once the handle asked the thread to stop.
    pub fn terminated(&self) -> bool {
        self.state.term.load(SeqCst)
    }

    /// The next queued command, if any.
    pub fn try_recv(&self) -> Option<C> {
        let c = self.rx.try_recv().ok()?;
        self.state.queued.fetch_sub(1, SeqCst);
        Some(c)
    }

    /// Commands waiting.
    pub fn pending(&self) -> usize {
        self.state.queued.load(SeqCst)
    }

    /// The node's waker, for helper threads that must wake its poll.
    pub fn waker(&self) -> Arc<Waker> {
        self.waker.clone()
    }

    /// The poll item for the wake pipe (POLLIN).
    pub fn poll_item(&self) -> zmq::PollItem<'_> {
        self.pipe.as_poll_item(zmq::POLLIN)
    }

    /// Call right before a poll that may block: marks the thread asleep and
    /// returns the timeout to use: `0` if a command or `$TERM` slipped in,
    /// `timeout_ms` otherwise.
    pub fn before_poll(&self, timeout_ms: i64) -> i64 {
        self.state.sleeping.store(true, SeqCst);
        if self.pending() > 0 || self.terminated() {
            self.state.sleeping.store(false, SeqCst);
            0
        } else {
            timeout_ms
        }
    }

    /// Call after the poll: clears the asleep mark and drains wake bytes.
    pub fn after_poll(&self) {
        self.state.sleeping.store(false, SeqCst);
        let mut m = zmq::Message::new();
        while self.pipe.recv(&mut m, zmq::DONTWAIT).is_ok() {}
    }
}

#[cfg(test)]
mod tests;
