//! Agent harnesses. Each turns a prompt into a review, within the trial's time limit.

mod single_shot;

pub use single_shot::{SingleShot, VERSION as SINGLE_SHOT_VERSION};

use lightsout_core::api::{HarnessName, HarnessRef};

/// Harnesses this build can run. The agentic harnesses (codex, claude-code, copilot-cli,
/// mini-swe-agent) need the metering proxy and process isolation and are refused until then,
/// so that no harness ever reaches a model except through the proxy.
pub fn is_available(name: HarnessName) -> bool {
    matches!(name, HarnessName::SingleShot)
}

/// Checks that this build can run the harness at the pinned version.
pub fn check(harness: &HarnessRef) -> Result<(), String> {
    if !is_available(harness.name) {
        return Err(unavailable_reason(harness.name));
    }
    if harness.name == HarnessName::SingleShot && harness.version.trim_start_matches('v') != single_shot::VERSION {
        return Err(format!(
            "harness single-shot is pinned to {} but this build has single-shot {}",
            harness.version,
            single_shot::VERSION
        ));
    }
    Ok(())
}

/// Why a harness cannot run here, for the error that refuses it.
pub fn unavailable_reason(name: HarnessName) -> String {
    format!(
        "harness {} is not available in this build: only single-shot runs until the worker's metering proxy and isolation land",
        name.as_str()
    )
}
