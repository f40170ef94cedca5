//! McNemar's exact test on paired binary outcomes (e.g. hit@k of two variants on the same trials).
//!
//! Rules:
//! - Samples are paired as in [`super::paired`]: same task and repeat index; unpaired samples are
//!   dropped and counted.
//! - `b` = pairs where the baseline hits and the candidate misses, `c` = the reverse. The two-sided
//!   exact p-value is `min(1, 2·P(X ≤ min(b, c)))` for `X ~ Binomial(b + c, ½)`, and 1 when
//!   `b + c = 0`.
//! - Every pair counts as independent evidence. With repeats, pairs of one task are correlated and
//!   the test is then optimistic; [`super::paired_bootstrap`] accounts for that.

use std::fmt::Debug;

use serde::{Deserialize, Serialize};

use super::paired::{pair_samples, Sample};
use super::StatsError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct McNemar {
    pub pairs: u64,
    pub unpaired_baseline: u64,
    pub unpaired_candidate: u64,
    pub both_hit: u64,
    pub both_miss: u64,
    /// `b`: the baseline hits, the candidate misses.
    pub baseline_only: u64,
    /// `c`: the candidate hits, the baseline misses.
    pub candidate_only: u64,
    /// Two-sided exact p-value; underflows to 0 below ~1e-308 (then see `ln_p_value`).
    pub p_value: f64,
    /// Natural log of the p-value, finite for any counts.
    pub ln_p_value: f64,
}

/// McNemar's exact test on hit/miss samples of a baseline and a candidate (see the module rules).
pub fn mcnemar<K: Ord + Debug>(
    baseline: &[Sample<K, bool>],
    candidate: &[Sample<K, bool>],
) -> Result<McNemar, StatsError> {
    let pairing = pair_samples(baseline, candidate)?;
    let mut counts = [[0u64; 2]; 2];
    for (_, pairs) in &pairing.tasks {
        for &(b, c) in pairs {
            counts[usize::from(b)][usize::from(c)] += 1;
        }
    }
    let (b, c) = (counts[1][0], counts[0][1]);
    let ln_p_value = mcnemar_exact_ln_p(b, c);
    Ok(McNemar {
        pairs: pairing.pairs,
        unpaired_baseline: pairing.unpaired_baseline,
        unpaired_candidate: pairing.unpaired_candidate,
        both_hit: counts[1][1],
        both_miss: counts[0][0],
        baseline_only: b,
        candidate_only: c,
        p_value: ln_p_value.exp(),
        ln_p_value,
    })
}

/// `ln` of the two-sided exact McNemar p-value for discordant counts `b` and `c`.
///
/// With `n = b + c` and `m = min(b, c)`: `P(X ≤ m) = C(n, m)/2ⁿ · Σ_{k≤m} C(n, k)/C(n, m)`. The
/// ratios follow from `C(n, k − 1) = C(n, k)·k/(n − k + 1)` and are at most 1, so nothing
/// overflows; `ln C(n, m) = Σ_{i≤m} ln((n − m + i)/i)` and `−(n − 1)·ln 2` (with ln 2 split in two
/// parts so that the product is exact) are added in one compensated sum, because the two nearly
/// cancel when `b ≈ c`. The result is within about 1e-13 of the exact log for `n` up to
/// 100,000s. When `2m + 1 ≥ n`, `P(X ≤ m) ≥ ½` exactly and the p-value is 1.
pub fn mcnemar_exact_ln_p(b: u64, c: u64) -> f64 {
    // fdlibm's split of ln 2 (ln2_hi + ln2_lo): the high part ends in 21 zero bits, so
    // `k·LN_2_HIGH` is exact for k < 2²¹.
    const LN_2_HIGH: f64 = f64::from_bits(0x3fe6_2e42_fee0_0000);
    const LN_2_LOW: f64 = f64::from_bits(0x3dea_39ef_3579_3c76);
    let n = b + c;
    let m = b.min(c);
    if 2 * m + 1 >= n {
        return 0.0;
    }
    let mut ratio_sum = 1.0;
    let mut term = 1.0;
    for k in (1..=m).rev() {
        term *= k as f64 / (n - k + 1) as f64;
        if term == 0.0 {
            break;
        }
        ratio_sum += term;
    }
    let halvings = (n - 1) as f64;
    let ln_choose_terms = (1..=m).map(|i| ((n - m + i) as f64 / i as f64).ln());
    let terms = ln_choose_terms.chain([f64::ln(ratio_sum), -halvings * LN_2_HIGH, -halvings * LN_2_LOW]);
    compensated_sum(terms).min(0.0)
}

/// Neumaier's compensated summation.
fn compensated_sum(values: impl Iterator<Item = f64>) -> f64 {
    let (mut sum, mut compensation) = (0.0f64, 0.0f64);
    for value in values {
        let next = sum + value;
        compensation += if sum.abs() >= value.abs() { (sum - next) + value } else { (value - next) + sum };
        sum = next;
    }
    sum + compensation
}
