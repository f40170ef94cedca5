//! The metering proxy's server-sent-event reader (`lightsout-worker`'s `UsageTracker`): any
//! stream, cut into chunks anywhere, gives the same usage as the whole stream, and never panics.
//! The first byte picks the API kind and the chunk size.
#![no_main]

// The tracker's file is compiled in directly: it depends only on lightsout-core and serde_json,
// and depending on lightsout-worker would build the S3 SDK with sanitizer coverage for nothing.
#[allow(dead_code)]
#[path = "../../worker/src/proxy/sse.rs"]
mod sse;

use libfuzzer_sys::fuzz_target;
use lightsout_core::api::ApiKind;

fuzz_target!(|data: &[u8]| {
    let Some((selector, stream)) = data.split_first() else { return };
    let kind = match selector % 3 {
        0 => ApiKind::OpenAiChat,
        1 => ApiKind::OpenAiResponses,
        _ => ApiKind::Anthropic,
    };
    let chunk = usize::from(selector / 3).max(1);
    let mut whole = sse::UsageTracker::new(kind);
    whole.feed(stream);
    let mut chunked = sse::UsageTracker::new(kind);
    for piece in stream.chunks(chunk) {
        chunked.feed(piece);
    }
    assert_eq!(whole.finish(), chunked.finish(), "chunking changed the usage read");
});
