//! How a run reads the SWE-PRBench protocol: the paper or the released harness, and
//! Lightsout's deliberate departures from the reference harness, each an option that is off by
//! default (so the defaults score exactly as the harness). README's "SWE-PRBench: where
//! Lightsout departs" lists them with the harness's and the paper's rule.

use serde::{Deserialize, Serialize};

/// Which departures are on. `Departures::default()` is the harness.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash, Serialize, Deserialize, schemars::JsonSchema)]
#[serde(rename_all = "camelCase", default)]
pub struct Departures {
    /// A readable judge answer that is incomplete (an agent comment without a usable entry, an
    /// entry for an unknown comment, a dropped entry such as `PARTIAL`, or a CONFIRMED naming no
    /// ground-truth comment) falls back as an unreadable one does: every comment PLAUSIBLE,
    /// every human comment MISSED, composite halved. The harness fills the gaps with PLAUSIBLE
    /// and actionability 3 and does not penalise.
    pub fall_back_on_incomplete_judge_answers: bool,
    /// The same-file bonus compares paths after trimming quotes and backticks, leading `./` and
    /// a git `a/`/`b/` prefix. The harness compares the strings exactly.
    pub normalise_paths: bool,
    /// Each pair's similarity counts at least 0 in semantic alignment. The harness has no floor
    /// (a negative cosine lowers the composite).
    pub alignment_floor: bool,
    /// Without embeddings, similarity is the cosine of term-count vectors (camelCase split,
    /// terms of 2+ characters). The harness uses the Jaccard overlap of `[A-Za-z0-9_]+` tokens.
    pub lexical_cosine: bool,
    /// The paper's stage 2: a comment the judge called FABRICATED cannot be matched by
    /// affinity. The harness offers every unmatched comment to stage 2.
    pub paper_stage_two: bool,
}

/// Which text rules where the paper and the released harness differ.
#[derive(
    Debug, Clone, Copy, Default, PartialEq, Eq, Hash, PartialOrd, Ord, Serialize, Deserialize, schemars::JsonSchema,
)]
#[serde(rename_all = "kebab-case")]
pub enum ProtocolReading {
    /// The released harness (the default).
    #[default]
    Harness,
    /// The paper's text: its stage 2 never matches a comment the judge called FABRICATED
    /// ([`Departures::paper_stage_two`]).
    Paper,
}
