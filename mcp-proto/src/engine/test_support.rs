//! Helpers the engine's unit tests share.

use serde_json::Value;

use super::Output;

/// The first frame among `outs`, parsed. Panics when there is none or it is not JSON: a test
/// that expects a frame fails there.
pub(super) fn frame<H>(outs: &[Output<H>]) -> Value {
    outs.iter()
        .find_map(|o| match o {
            Output::Frame { bytes, .. } => {
                Some(serde_json::from_slice(bytes).unwrap_or_else(|e| panic!("not JSON: {e}")))
            }
            _ => None,
        })
        .unwrap_or_else(|| panic!("no frame among the outputs"))
}

/// Every output `engine` has waiting, in order.
pub(super) fn drain<H: Clone>(engine: &mut super::Engine<H>) -> Vec<Output<H>> {
    std::iter::from_fn(|| engine.poll_output()).collect()
}

/// The outputs among `outs` that `pick` takes, cloned, in order: the changes, claims or ended
/// tasks of one drain.
pub(super) fn picked<H, T: Clone>(outs: &[Output<H>], pick: impl Fn(&Output<H>) -> Option<&T>) -> Vec<T> {
    outs.iter().filter_map(pick).cloned().collect()
}
