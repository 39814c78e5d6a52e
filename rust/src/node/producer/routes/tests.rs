use super::*;
use crate::wire::Prefix;

fn sub(prefix: &[u8], subscribe: bool) -> Subscription<'_> {
    Subscription {
        subscribe,
        prefix: Prefix::parse(prefix),
    }
}

#[test]
fn ours_get_bodies_only_and_a_c_node_gets_records() {
    use Kind::{MetaRecordBatch as X, Record as M};
    let p = |k: Kind, key: &'static [u8]| Prefix::of(k, key).to_bytes();
    let mut r = Routes::new(b"logs");
    assert!(!r.meta() && !r.plain(), "nobody listens");
    // A store of ours (`X`, `M`) and a consumer of ours.
    for pre in [p(X, b""), p(M, b""), p(X, b"logs"), p(M, b"logs")] {
        r.on_subscription(&sub(&pre, true));
    }
    assert!(r.meta() && !r.plain());
    // A C consumer: `M` + topic only.
    r.on_subscription(&sub(&p(M, b"logs"), true));
    assert!(r.meta() && r.plain());
    r.on_subscription(&sub(&p(M, b"logs"), false));
    assert!(!r.plain());
    // Other topics, other messages, and a prefix of another topic.
    let others = [
        p(M, b"logs2"),
        p(X, b"other"),
        p(Kind::Head, b"logs"),
        p(Kind::Fetch, b"logs"),
        p(Kind::StoreHello, b""),
    ];
    for pre in others {
        r.on_subscription(&sub(&pre, true));
    }
    assert!(!r.plain());
    // `Mlo` matches our frames (ZeroMQ matches prefixes).
    r.on_subscription(&sub(&p(M, b"lo"), true));
    assert!(r.plain());
    let mut r = Routes::new(b"logs");
    r.on_subscription(&sub(&p(M, b""), false));
    assert!(!r.plain(), "an unsubscription never goes below nothing");
    // The empty prefix (no node of ours subscribes it) is not counted.
    r.on_subscription(&sub(b"", true));
    assert!(!r.plain() && !r.meta());
}
