use super::*;
use crate::wire::Prefix;

fn sub(kind: Kind, who: &[u8], subscribe: bool) -> Subscription<'_> {
    Subscription {
        subscribe,
        prefix: Prefix::of(kind, who),
    }
}

#[test]
fn a_requester_is_answered_once_its_direct_subscription_is_read() {
    use Kind::{DirectMetaRecordBatch as Y, DirectRecord as D, DirectRecordBatch as Q};
    let mut f = AnswerForms::default();
    assert_eq!(f.form(b"C"), None, "nothing known: FETCH again");
    f.on_subscription(&sub(D, b"C", true));
    assert_eq!(f.form(b"C"), Some(Form::Records), "a C-reference node");
    f.on_subscription(&sub(Q, b"O", true));
    f.on_subscription(&sub(D, b"O", true));
    assert_eq!(f.form(b"O"), Some(Form::Batches));
    f.on_subscription(&sub(Y, b"N", true));
    f.on_subscription(&sub(Q, b"N", true));
    f.on_subscription(&sub(D, b"N", true));
    assert_eq!(f.form(b"N"), Some(Form::Bodies));
    f.on_subscription(&sub(D, b"C", false));
    assert_eq!(f.form(b"C"), None, "gone");
}

#[test]
fn takers_know_only_their_kind_with_an_address() {
    let mut t = Takers::addressed_acks();
    t.on_subscription(&sub(Kind::Ack, b"P", true));
    t.on_subscription(&sub(Kind::AddressedAck, b"", true));
    assert!(
        !t.takes(b"P") && !t.takes(b""),
        "a plain ACK, a bare prefix"
    );
    t.on_subscription(&sub(Kind::AddressedAck, b"P", true));
    assert!(t.takes(b"P"));
    t.on_subscription(&sub(Kind::AddressedAck, b"P", false));
    assert!(!t.takes(b"P"));
    let mut many = Takers::batches();
    for i in 0..MAX_TAKERS + 10 {
        let who = i.to_string();
        many.on_subscription(&sub(Kind::DirectRecordBatch, who.as_bytes(), true));
    }
    assert!(many.full());
    assert!(
        !many.takes((MAX_TAKERS + 1).to_string().as_bytes()),
        "bounded"
    );
}
