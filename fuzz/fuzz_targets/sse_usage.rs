//! The reader of streamed answers (`lightsout_model::StreamedAnswer`, used by the model
//! client and the worker's metering proxy): any stream, cut into chunks anywhere, gives the same
//! usage and the same answer as the whole stream, and never panics. The first byte picks the
//! API kind and the chunk size.
#![no_main]

use libfuzzer_sys::fuzz_target;
use lightsout_api::ApiKind;
use lightsout_model::StreamedAnswer;

fuzz_target!(|data: &[u8]| {
    let Some((selector, stream)) = data.split_first() else { return };
    let kind = match selector % 3 {
        0 => ApiKind::OpenAiChat,
        1 => ApiKind::OpenAiResponses,
        _ => ApiKind::Anthropic,
    };
    let chunk = usize::from(selector / 3).max(1);
    let mut whole = StreamedAnswer::new(kind);
    whole.feed(stream);
    let mut chunked = StreamedAnswer::new(kind);
    for piece in stream.chunks(chunk) {
        chunked.feed(piece);
    }
    assert_eq!(whole.usage(), chunked.usage(), "chunking changed the usage read");
    assert_eq!(whole.into_answer(), chunked.into_answer(), "chunking changed the answer read");
});
