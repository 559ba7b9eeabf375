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
