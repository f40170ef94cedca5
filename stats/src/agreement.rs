//! Agreement within the judge panel.
//!
//! Input: one entry per judged item (a (finding, ground-truth item) pair), holding each judge's
//! vote in a fixed judge order: `Some(category)` (0 = no, 1 = yes for the CRBugBench judge) or
//! `None` for a failed vote. Every item must list the same number of judges.
//!
//! Rules:
//! - Fleiss' kappa uses only the items where every judge voted validly; the others are counted in
//!   `excluded_items`. With `N` items, `n` raters and `n_ij` votes for category `j` on item `i`:
//!   `P̄ = (Σ n_ij² − N·n)/(N·n·(n − 1))`, `p_j = Σ_i n_ij/(N·n)`, `P_e = Σ p_j²`,
//!   `κ = (P̄ − P_e)/(1 − P_e)`. It is undefined (`None`) when `N = 0`, `n < 2` or `P_e = 1`
//!   (every vote in one category). Counts are kept as integers and κ is formed from one integer
//!   numerator and denominator, so `P_e = 1` is detected exactly.
//! - Pairwise, for each pair of judges, over the items both voted on validly: the share of items
//!   where they agree, and Cohen's kappa `(p_o − p_e)/(1 − p_e)` with
//!   `p_e = Σ_j (a_j/N)(b_j/N)` from each judge's own category shares (undefined when `N = 0` or
//!   `p_e = 1`). The mean pairwise agreement is the unweighted mean over pairs with at least one
//!   such item.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::StatsError;

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct FleissKappa {
    /// Items measured: every judge voted validly.
    pub items: u64,
    /// Items left out because at least one vote failed.
    pub excluded_items: u64,
    pub raters: u64,
    /// `P̄`, the mean agreement within an item.
    pub observed_agreement: Option<f64>,
    /// `P_e`, the agreement expected by chance from the overall category shares.
    pub expected_agreement: Option<f64>,
    pub kappa: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairAgreement {
    /// Judge positions in the votes, `first < second`.
    pub first: usize,
    pub second: usize,
    /// Items both judges voted on validly.
    pub items: u64,
    /// Share of those items on which they agree.
    pub agreement: Option<f64>,
    pub cohen_kappa: Option<f64>,
}

#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Agreement {
    pub fleiss: FleissKappa,
    pub pairs: Vec<PairAgreement>,
    pub mean_pairwise_agreement: Option<f64>,
}

/// Fleiss' kappa and pairwise agreement of a panel (see the module rules).
pub fn agreement<V: AsRef<[Option<u32>]>>(votes: &[V]) -> Result<Agreement, StatsError> {
    let fleiss = fleiss_kappa(votes)?;
    let judges = fleiss.raters as usize;
    let mut pairs = Vec::new();
    for first in 0..judges {
        for second in first + 1..judges {
            pairs.push(pair_agreement(votes, first, second));
        }
    }
    let rated: Vec<f64> = pairs.iter().filter_map(|p| p.agreement).collect();
    let mean_pairwise_agreement = (!rated.is_empty()).then(|| rated.iter().sum::<f64>() / rated.len() as f64);
    Ok(Agreement { fleiss, pairs, mean_pairwise_agreement })
}

/// Fleiss' kappa over the items where every judge voted validly (see the module rules).
pub fn fleiss_kappa<V: AsRef<[Option<u32>]>>(votes: &[V]) -> Result<FleissKappa, StatsError> {
    let raters = check_judges(votes)?;
    let mut tally = Tally::new(raters as u64);
    let mut excluded = 0;
    let mut item_votes = Vec::with_capacity(raters);
    for item in votes {
        let item = item.as_ref();
        if item.iter().any(Option::is_none) {
            excluded += 1;
            continue;
        }
        item_votes.clear();
        item_votes.extend(item.iter().flatten());
        // Sorted votes group each category into one run, whose length is n_ij.
        item_votes.sort_unstable();
        tally.add(item_votes.chunk_by(|a, b| a == b).map(|run| (run[0], run.len() as u64)));
    }
    Ok(tally.finish(excluded))
}

/// Fleiss' kappa from per-item category counts (`counts[i][j]` = raters who put item `i` in
/// category `j`); every item must have the same number of ratings, which is the panel size.
pub fn fleiss_kappa_counts<C: AsRef<[u64]>>(counts: &[C]) -> Result<FleissKappa, StatsError> {
    let raters = counts.first().map_or(0, |row| row.as_ref().iter().sum());
    let mut tally = Tally::new(raters);
    for (index, row) in counts.iter().enumerate() {
        let found: u64 = row.as_ref().iter().sum();
        if found != raters {
            return Err(StatsError::RaggedCounts { item: index, expected: raters, found });
        }
        tally.add(row.as_ref().iter().enumerate().map(|(category, &count)| (category as u32, count)));
    }
    Ok(tally.finish(0))
}

/// The number of judges, checked to be the same for every item.
fn check_judges<V: AsRef<[Option<u32>]>>(votes: &[V]) -> Result<usize, StatsError> {
    let expected = votes.first().map_or(0, |item| item.as_ref().len());
    match votes.iter().position(|item| item.as_ref().len() != expected) {
        Some(item) => Err(StatsError::RaggedVotes { item, expected, found: votes[item].as_ref().len() }),
        None => Ok(expected),
    }
}

/// Integer sums for Fleiss' kappa.
struct Tally {
    raters: u64,
    items: u64,
    /// `Σ_i Σ_j n_ij²`.
    squares: u128,
    /// `Σ_i n_ij` by category.
    totals: BTreeMap<u32, u64>,
}

impl Tally {
    fn new(raters: u64) -> Self {
        Tally { raters, items: 0, squares: 0, totals: BTreeMap::new() }
    }

    fn add(&mut self, counts: impl IntoIterator<Item = (u32, u64)>) {
        self.items += 1;
        for (category, count) in counts {
            if count > 0 {
                self.squares += u128::from(count) * u128::from(count);
                *self.totals.entry(category).or_default() += count;
            }
        }
    }

    fn finish(self, excluded_items: u64) -> FleissKappa {
        let ratings = u128::from(self.items) * u128::from(self.raters); // T = N·n
        let chance_squares: u128 = self.totals.values().map(|&c| u128::from(c) * u128::from(c)).sum(); // S = Σ C_j²
        let expected_agreement = (ratings > 0).then(|| chance_squares as f64 / (ratings * ratings) as f64);
        let defined = ratings > 0 && self.raters >= 2;
        let observed_agreement =
            defined.then(|| (self.squares - ratings) as f64 / (ratings * u128::from(self.raters - 1)) as f64);
        // κ = ((Σn² − T)·T − S·(n − 1)) / ((n − 1)·(T² − S)), exact up to the final division.
        let kappa = (defined && chance_squares < ratings * ratings).then(|| {
            let raters_less_one = i128::from(self.raters - 1);
            let numerator =
                (self.squares - ratings) as i128 * ratings as i128 - chance_squares as i128 * raters_less_one;
            let denominator = raters_less_one * (ratings * ratings - chance_squares) as i128;
            numerator as f64 / denominator as f64
        });
        FleissKappa {
            items: self.items,
            excluded_items,
            raters: self.raters,
            observed_agreement,
            expected_agreement,
            kappa,
        }
    }
}

fn pair_agreement<V: AsRef<[Option<u32>]>>(votes: &[V], first: usize, second: usize) -> PairAgreement {
    let (mut items, mut agreeing) = (0u64, 0u64);
    let mut first_totals: BTreeMap<u32, u64> = BTreeMap::new();
    let mut second_totals: BTreeMap<u32, u64> = BTreeMap::new();
    for item in votes {
        let item = item.as_ref();
        if let (Some(a), Some(b)) = (item[first], item[second]) {
            items += 1;
            agreeing += u64::from(a == b);
            *first_totals.entry(a).or_default() += 1;
            *second_totals.entry(b).or_default() += 1;
        }
    }
    let agreement = (items > 0).then(|| agreeing as f64 / items as f64);
    // κ = (agree·N − Σ a_j·b_j) / (N² − Σ a_j·b_j).
    let chance: u128 = first_totals
        .iter()
        .map(|(category, &a)| u128::from(a) * u128::from(second_totals.get(category).copied().unwrap_or(0)))
        .sum();
    let squared = u128::from(items) * u128::from(items);
    let cohen_kappa = (items > 0 && chance < squared)
        .then(|| (i128::from(agreeing) * i128::from(items) - chance as i128) as f64 / (squared - chance) as f64);
    PairAgreement { first, second, items, agreement, cohen_kappa }
}
