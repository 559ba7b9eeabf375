use super::*;

#[test]
fn notes_are_forgotten_when_taken_and_the_clock_restarts() {
    #[allow(clippy::disallowed_methods)] // a test picks its own origin of time
    let t0 = Instant::now();
    let ms = Duration::from_millis;
    let mut b = Backlog::new(0, t0);
    assert!(!b.is_full() && b.stalls_at(ms(5)).is_none());
    b.push(t0 + ms(10), None);
    b.tag_newest(b"n".to_vec().into_boxed_slice());
    assert!(b.is_full() && b.holds(b"n"));
    assert_eq!(b.stalls_at(ms(5)), Some(t0 + ms(15)), "counted from when it had something to read");
    b.push(t0 + ms(11), Some(b"n".to_vec().into_boxed_slice()));
    b.taken(t0 + ms(12), 1);
    assert!(b.holds(b"n"), "one copy is still waiting");
    assert_eq!(b.stalls_at(ms(5)), Some(t0 + ms(17)));
    b.taken(t0 + ms(13), 9);
    assert!(!b.holds(b"n") && b.len() == 0 && b.stalls_at(Duration::ZERO).is_none());
    b.push(t0 + ms(20), None);
    assert_eq!(b.stalls_at(Duration::MAX), None, "a stall time past the clock never stalls");
}
