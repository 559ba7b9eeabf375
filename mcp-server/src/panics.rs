//! Panic diagnostics: the stack of a handler's or a gate's panic, taken by a panic hook that
//! chains to the one installed before it, and gates wrapped so that their panics are logged.
//!
//! A stack only exists at the panic point: once `catch_unwind` returns it is gone. So the hook
//! records a backtrace, on the panicking thread, but only while that thread is inside
//! [`watched`] code (a handler's poll, a gate); every other panic of the process is left to the
//! previous hook alone, as if this crate were not there.

use std::backtrace::{Backtrace, BacktraceStatus};
use std::borrow::Cow;
use std::cell::Cell;
use std::sync::{Arc, Once};

use mcp_proto::{Caller, Extension, Gate, Prompt, Resource, ResourceTemplate, Skill, Tool};

thread_local! {
    /// Whether this thread is running watched code now.
    static WATCHED: Cell<bool> = const { Cell::new(false) };
    /// The stack of the last watched panic on this thread, until the catcher takes it.
    static CAUGHT: Cell<Option<Backtrace>> = const { Cell::new(None) };
}

/// Installs the hook, once per process. The previous hook (the default one, or the
/// application's) keeps running for every panic, first-party or not, so what a panic prints
/// does not change. A hook the application sets later replaces this one: panics are still
/// caught and logged, without their stack.
pub(crate) fn install_hook() {
    static INSTALLED: Once = Once::new();
    INSTALLED.call_once(|| {
        let previous = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            if WATCHED.with(Cell::get) {
                // `capture` honours RUST_BACKTRACE / RUST_LIB_BACKTRACE and costs next to
                // nothing when they leave it disabled.
                CAUGHT.with(|c| c.set(Some(Backtrace::capture())));
            }
            previous(info);
        }));
    });
}

/// Runs `f` as watched code: a panic inside it leaves its stack for [`take_backtrace`].
pub(crate) fn watched<T>(f: impl FnOnce() -> T) -> T {
    /// Restores the flag however `f` ends, unwinding included, so that nesting and panics
    /// leave the thread as they found it.
    struct Restore(bool);
    impl Drop for Restore {
        fn drop(&mut self) {
            WATCHED.with(|w| w.set(self.0));
        }
    }
    let _restore = Restore(WATCHED.with(|w| w.replace(true)));
    f()
}

/// The stack of the panic just caught on this thread, if one was captured (RUST_BACKTRACE or
/// RUST_LIB_BACKTRACE set, and this crate's hook still installed).
pub(crate) fn take_backtrace() -> Option<Backtrace> {
    CAUGHT.with(Cell::take).filter(|b| b.status() == BacktraceStatus::Captured)
}

/// Hands a stack taken on another thread (a blocking handler's) to this one, whose catcher
/// logs the panic when it is raised again here.
pub(crate) fn stash_backtrace(backtrace: Option<Backtrace>) {
    CAUGHT.with(|c| c.set(backtrace));
}

/// A panic's message for a log line: control characters escaped, so that a panic message
/// cannot forge or break up log lines.
pub(crate) fn scrub(text: &str) -> Cow<'_, str> {
    if !text.chars().any(char::is_control) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    Cow::Owned(out)
}

/// Wraps `gate` so that a panic in it is logged, once per panic, naming `item` and the
/// caller's binding (never its roles or attributes), before it refuses as any panicking gate
/// does. A gate that does not panic costs one more indirect call.
pub(crate) fn observed_gate(gate: &Gate, item: String) -> Gate {
    let gate = gate.clone();
    let item: Arc<str> = item.into();
    Gate::new(move |caller: &Caller| match watched(|| gate.try_allows(caller)) {
        Ok(admits) => admits,
        Err(panic) => {
            let backtrace = take_backtrace();
            tracing::error!(
                gate = &*item,
                caller = caller.binding(),
                panic = %scrub(panic.message().unwrap_or("(non-string panic payload)")),
                backtrace = backtrace.as_ref().map(tracing::field::display),
                "gate panicked; the caller is refused"
            );
            false
        }
    })
}

/// An item whose gate, if it has one, [`observed_gate`] can wrap.
pub(crate) trait Gated: Sized {
    /// The item with its gate wrapped.
    fn observed(self) -> Self;
}

macro_rules! gated {
    ($($item:ty => $kind:literal, $key:ident;)*) => {$(
        impl Gated for $item {
            fn observed(self) -> Self {
                match self.declared_gate() {
                    Some(g) => {
                        let g = observed_gate(g, format!(concat!($kind, " {}"), self.$key()));
                        self.gate(g)
                    }
                    None => self,
                }
            }
        }
    )*};
}

gated! {
    Tool => "tool", name;
    Resource => "resource", uri;
    ResourceTemplate => "template", uri_template;
    Prompt => "prompt", name;
    Extension => "extension", id;
    Skill => "skill", name;
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn scrub_escapes_control_characters_only() {
        assert!(matches!(scrub("plain ünïcode"), Cow::Borrowed("plain ünïcode")));
        assert_eq!(scrub("a\nb\u{1b}[31m"), "a\\nb\\u{1b}[31m");
    }

    #[test]
    fn a_panic_outside_watched_code_leaves_no_stack() {
        install_hook();
        let _ = std::panic::catch_unwind(|| panic!("not ours"));
        assert!(CAUGHT.with(Cell::take).is_none());
        let _ = std::panic::catch_unwind(|| watched(|| panic!("ours")));
        assert!(CAUGHT.with(Cell::take).is_some(), "captured, whether or not RUST_BACKTRACE enables it");
        assert!(!WATCHED.with(Cell::get), "the flag is restored by the unwinding");
    }
}
