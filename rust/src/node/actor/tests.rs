use super::*;

fn idle_loop(inbox: &mut Inbox<u32>, seen: &AtomicUsize) -> Result<()> {
    loop {
        if inbox.terminated() {
            return Ok(());
        }
        while let Some(c) = inbox.try_recv() {
            if c == 99 {
                return Err(Error::died("asked to fail"));
            }
            if c == 66 {
                panic!("asked to panic");
            }
            seen.fetch_add(c as usize, SeqCst);
        }
        let mut items = [inbox.poll_item()];
        let t = inbox.before_poll(-1);
        zmq::poll(&mut items, t)?;
        inbox.after_poll();
    }
}

fn start(seen: &Arc<AtomicUsize>) -> Actor<u32> {
    let ctx = zmq::Context::new();
    let s = seen.clone();
    let (a, info) = Actor::spawn("t", &ctx, move |inbox, ready: &mut Ready<&str>| {
        ready.send("ready");
        idle_loop(inbox, &s)
    })
    .unwrap();
    assert_eq!(info, "ready");
    a
}

#[test]
fn commands_wake_a_sleeping_thread_and_close_joins() {
    let seen = Arc::new(AtomicUsize::new(0));
    let a = start(&seen);
    for _ in 0..1000 {
        a.send(7).unwrap();
    }
    let t0 = std::time::Instant::now();
    while seen.load(SeqCst) != 7000 {
        assert!(t0.elapsed().as_secs() < 20, "commands not processed");
        std::thread::yield_now();
    }
    a.close().unwrap();
    assert!(matches!(a.send(1), Err(Error::Closed)));
    a.close().unwrap();
}

#[test]
fn errors_and_panics_are_reported_not_lost() {
    let seen = Arc::new(AtomicUsize::new(0));
    for (cmd, want) in [(99, "asked to fail"), (66, "panic: asked to panic")] {
        let a = start(&seen);
        a.send(cmd).unwrap();
        let t0 = std::time::Instant::now();
        while a.check().is_ok() {
            assert!(t0.elapsed().as_secs() < 20, "thread did not stop");
            std::thread::yield_now();
        }
        let err = a.check().unwrap_err().to_string();
        assert!(err.contains(want), "{err}");
        assert!(a.send(1).unwrap_err().to_string().contains(want));
        assert!(a.close().unwrap_err().to_string().contains(want));
    }
}

/// What the thread stopped with keeps its type: the handle's calls
/// (`check`, `send`, `close`) say [`Error::Thread`] around it, and
/// [`Error::cause`] is it.
#[test]
fn a_thread_error_keeps_its_type() {
    let ctx = zmq::Context::new();
    let (a, ()) = Actor::<u32>::spawn("t", &ctx, |_, ready: &mut Ready<()>| {
        ready.send(());
        Err(Error::TooLarge { size: 2, max: 1 })
    })
    .unwrap();
    let t0 = std::time::Instant::now();
    while a.check().is_ok() {
        assert!(t0.elapsed().as_secs() < 20, "thread did not stop");
        std::thread::yield_now();
    }
    for e in [
        a.check().unwrap_err(),
        a.send(1).unwrap_err(),
        a.close().unwrap_err(),
    ] {
        assert!(matches!(e, Error::Thread(_)), "{e:?}");
        assert!(
            matches!(e.cause(), Error::TooLarge { size: 2, max: 1 }),
            "{e:?}"
        );
        assert!(
            e.to_string()
                .starts_with("node thread stopped: a value of 2 bytes"),
            "{e}"
        );
    }
}

#[test]
fn failure_before_ready_is_the_spawn_error() {
    let ctx = zmq::Context::new();
    let r = Actor::<u32>::spawn("t", &ctx, |_, _: &mut Ready<()>| {
        Err(Error::Config("cannot bind".into()))
    });
    // The error itself, not a string of it.
    assert!(matches!(r.err(), Some(Error::Config(m)) if m == "cannot bind"));
    let r = Actor::<u32>::spawn("t", &ctx, |_, _: &mut Ready<()>| panic!("boom"));
    assert!(r.err().unwrap().to_string().contains("boom"));
}

/// A quiet command (no wake) reaches a thread that polls with a short
/// timeout of its own, as a napping producer does.
#[test]
fn quiet_commands_reach_a_napping_thread() {
    let ctx = zmq::Context::new();
    let seen = Arc::new(AtomicUsize::new(0));
    let s = seen.clone();
    let (a, ()) = Actor::<u32>::spawn("t", &ctx, move |inbox, ready: &mut Ready<()>| {
        ready.send(());
        loop {
            if inbox.terminated() {
                return Ok(());
            }
            while let Some(c) = inbox.try_recv() {
                s.fetch_add(c as usize, SeqCst);
            }
            let mut items = [inbox.poll_item()];
            let t = inbox.before_poll(1);
            zmq::poll(&mut items, t)?;
            inbox.after_poll();
        }
    })
    .unwrap();
    for _ in 0..1000 {
        a.send_quiet(3).unwrap();
    }
    let t0 = std::time::Instant::now();
    while seen.load(SeqCst) != 3000 {
        assert!(t0.elapsed().as_secs() < 20, "quiet commands not processed");
        std::thread::yield_now();
    }
    a.close().unwrap();
    assert!(matches!(a.send_quiet(1), Err(Error::Closed)));
}
