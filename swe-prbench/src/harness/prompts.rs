//! The reference harness's prompt texts, shipped as data under its MIT license
//! (`prompts/NOTICE.md`): the agent's system message and parse-retry suffix (`runner.py`) and the
//! judge's system message (`judge.py`). The agent's user message is the context file's
//! `rendered` text unchanged (the retry appends [`AGENT_RETRY_SUFFIX`] directly, no separator);
//! the judge's user message is [`super::judge_message::judge_user_message`].

/// The agent's system message.
pub const AGENT_SYSTEM_PROMPT: &str = include_str!("prompts/agent_system.txt");
/// Appended to the rendered context for the parse retry.
pub const AGENT_RETRY_SUFFIX: &str = include_str!("prompts/agent_retry_suffix.txt");
/// The judge's system message.
pub const JUDGE_SYSTEM_PROMPT: &str = include_str!("prompts/judge_system.txt");

/// The start of [`JUDGE_SYSTEM_PROMPT`], by which the scripted model server knows a SWE-PRBench
/// judging.
pub const JUDGE_SYSTEM_PREFIX: &str = "You are an expert evaluator assessing AI code review quality";

#[cfg(test)]
mod tests {
    use super::*;
    use lightsout_api::hash::sha256_hex;

    #[test]
    fn the_texts_are_the_harness_s_byte_for_byte() {
        let expected = [
            (AGENT_SYSTEM_PROMPT, 878, "32659618b779be70e4a64c357ce91987441c622f590717dc5f0fd2648f08fe65"),
            (AGENT_RETRY_SUFFIX, 181, "f94316acb73f999c14eb95b6392ef693892943644c4ba383b660dd87f7f65fb6"),
            (JUDGE_SYSTEM_PROMPT, 2066, "2d552e9f8c517c13d527e9fb5cbcb93c01ed35e9ac9b1525eab4d42d02adb7b3"),
        ];
        for (text, chars, sha) in expected {
            assert_eq!((text.chars().count(), sha256_hex(text.as_bytes()).as_str()), (chars, sha));
        }
        assert!(JUDGE_SYSTEM_PROMPT.starts_with(JUDGE_SYSTEM_PREFIX));
    }
}
