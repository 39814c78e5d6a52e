use super::heads::AskWindows;
use super::*;
use std::time::Instant;

#[test]
fn a_round_expects_what_one_timed_ask_had_else_the_most_any_ask_had() {
    let t0 = Instant::now();
    let ms = |n: u64| t0 + Duration::from_millis(n);
    // Full round: asks as two peers connect (their answers overlap the
    // next ask), then timed re-asks every RETRY; the last one shortly
    // before the round ends.
    let mut w = AskWindows::default();
    w.asked(ms(0), false);
    w.count = 1;
    w.asked(ms(5), false);
    w.count = 3; // one late answer to the first ask, two to this one
    w.asked(ms(205), true);
    w.count = 2;
    w.asked(ms(405), true);
    w.count = 2;
    w.asked(ms(605), true);
    w.count = 1; // the round ends before the second answer is in
    assert_eq!(w.expect(ms(610)), 2, "not 3 (overlap), not 1 (cut short)");

    // A round too short for a timed re-ask: the most any ask had.
    let mut w = AskWindows::default();
    w.asked(ms(0), false);
    w.count = 1;
    w.asked(ms(5), false);
    w.count = 3;
    assert_eq!(w.expect(ms(100)), 3);

    // A quick round: one ask, its answers.
    let mut w = AskWindows::default();
    w.asked(ms(0), false);
    w.count = 4;
    assert_eq!(w.expect(ms(1)), 4);
    assert_eq!(AskWindows::default().expect(ms(1)), 0);
}
