//! Paired comparison of two variants evaluated on the same tasks.
//!
//! Pairing rule: a baseline sample and a candidate sample form a pair when they have the same task
//! and the same repeat index. Tasks present on one side only, and repeats present on one side only,
//! are dropped and counted (`unpaired_baseline`, `unpaired_candidate`). A (task, repeat) given
//! twice on one side is an error. Pairs are ordered by (task, repeat).
//!
//! The paired bootstrap resamples tasks (with all their pairs) as in [`super::bootstrap`], with the
//! same paths, draws, seeding and percentile rule; its statistic is `mean(candidate) −
//! mean(baseline)` over the drawn pairs, each pair weighing the same. Its table has, per task, the
//! number of pairs and the baseline's and the candidate's sum of values, in repeat order, for every
//! column; the grouped path applies when these rows take few distinct values (e.g. one 0/1 hit
//! column per k: at most `(r + 1)^(2·columns)` rows with `r` repeats, far fewer when hits grow with
//! k). [`paired_bootstrap_columns`] compares several columns (e.g. recall@k for every k) on one
//! pairing and one set of draws: every sample carries one value per column, so every column has
//! the same pairs. A column's result there is, bit for bit, [`paired_bootstrap`]'s for that column
//! alone when both tables are resampled by task; otherwise the two are different draws from the
//! same bootstrap distribution.

use std::cmp::Ordering;
use std::fmt::Debug;

use serde::{Deserialize, Serialize};

use super::bootstrap::{default_threads, percentile_interval, BootstrapConfig, ColumnSums, Interval, Table};
use super::{check_finite, StatsError};

/// One scored sample of a variant: a trial's value on a task at a repeat index.
#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Sample<K, V> {
    pub task: K,
    pub repeat: u32,
    pub value: V,
}

/// Samples of two variants matched by (task, repeat).
#[derive(Debug, Clone, PartialEq)]
pub struct Pairing<'a, K, V> {
    /// Per task that has at least one pair, in task order: its (baseline, candidate) values in
    /// repeat order.
    pub tasks: Vec<(&'a K, Vec<(V, V)>)>,
    pub pairs: u64,
    pub unpaired_baseline: u64,
    pub unpaired_candidate: u64,
}

/// Matches baseline and candidate samples by the pairing rule (see the module rules).
pub fn pair_samples<'a, K: Ord + Debug, V: Copy>(
    baseline: &'a [Sample<K, V>],
    candidate: &'a [Sample<K, V>],
) -> Result<Pairing<'a, K, V>, StatsError> {
    let pairing = pair_references(baseline, candidate)?;
    Ok(Pairing {
        tasks: pairing
            .tasks
            .into_iter()
            .map(|(task, pairs)| (task, pairs.into_iter().map(|(b, c)| (*b, *c)).collect()))
            .collect(),
        pairs: pairing.pairs,
        unpaired_baseline: pairing.unpaired_baseline,
        unpaired_candidate: pairing.unpaired_candidate,
    })
}

/// [`pair_samples`] for values that need not be `Copy`: the pairs refer to the samples' values.
fn pair_references<'a, K: Ord + Debug, V>(
    baseline: &'a [Sample<K, V>],
    candidate: &'a [Sample<K, V>],
) -> Result<Pairing<'a, K, &'a V>, StatsError> {
    let baseline = sorted_samples(baseline)?;
    let candidate = sorted_samples(candidate)?;
    let mut pairing = Pairing { tasks: Vec::new(), pairs: 0, unpaired_baseline: 0, unpaired_candidate: 0 };
    let (mut i, mut j) = (0, 0);
    while i < baseline.len() && j < candidate.len() {
        let (b, c) = (baseline[i], candidate[j]);
        match (&b.task, b.repeat).cmp(&(&c.task, c.repeat)) {
            Ordering::Less => {
                pairing.unpaired_baseline += 1;
                i += 1;
            }
            Ordering::Greater => {
                pairing.unpaired_candidate += 1;
                j += 1;
            }
            Ordering::Equal => {
                match pairing.tasks.last_mut() {
                    Some((task, pairs)) if *task == &b.task => pairs.push((&b.value, &c.value)),
                    _ => pairing.tasks.push((&b.task, vec![(&b.value, &c.value)])),
                }
                pairing.pairs += 1;
                i += 1;
                j += 1;
            }
        }
    }
    pairing.unpaired_baseline += (baseline.len() - i) as u64;
    pairing.unpaired_candidate += (candidate.len() - j) as u64;
    Ok(pairing)
}

fn sorted_samples<K: Ord + Debug, V>(samples: &[Sample<K, V>]) -> Result<Vec<&Sample<K, V>>, StatsError> {
    let mut sorted: Vec<&Sample<K, V>> = samples.iter().collect();
    sorted.sort_by(|a, b| (&a.task, a.repeat).cmp(&(&b.task, b.repeat)));
    if let Some(pair) = sorted.windows(2).find(|pair| pair[0].task == pair[1].task && pair[0].repeat == pair[1].repeat)
    {
        return Err(StatsError::DuplicateSample { task: format!("{:?}", pair[0].task), repeat: pair[0].repeat });
    }
    Ok(sorted)
}

/// The candidate's mean minus the baseline's over paired samples, with its bootstrap interval.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PairedDifference {
    /// Tasks with at least one pair: the clusters resampled.
    pub tasks: u64,
    pub pairs: u64,
    pub unpaired_baseline: u64,
    pub unpaired_candidate: u64,
    /// Means over the pairs; absent when there is none.
    pub baseline_mean: Option<f64>,
    pub candidate_mean: Option<f64>,
    /// `candidate_mean − baseline_mean` and its interval; absent when there is no pair.
    pub difference: Option<Interval>,
}

/// Paired cluster bootstrap of `mean(candidate) − mean(baseline)` (see the module rules).
pub fn paired_bootstrap<K: Ord + Debug>(
    baseline: &[Sample<K, f64>],
    candidate: &[Sample<K, f64>],
    config: &BootstrapConfig,
) -> Result<PairedDifference, StatsError> {
    paired_bootstrap_on(baseline, candidate, config, None)
}

/// Paired cluster bootstraps of `mean(candidate) − mean(baseline)` for several columns at once, one
/// result per column in column order: every sample carries one value per column (all the same
/// number, else [`StatsError::RaggedSample`]), so the columns share one pairing, and every
/// resample's draw is shared by all of them (see the module rules). With no sample at all there
/// is no column and the result is empty.
pub fn paired_bootstrap_columns<K: Ord + Debug, V: AsRef<[f64]>>(
    baseline: &[Sample<K, V>],
    candidate: &[Sample<K, V>],
    config: &BootstrapConfig,
) -> Result<Vec<PairedDifference>, StatsError> {
    paired_columns_on(baseline, candidate, <V as AsRef<[f64]>>::as_ref, 0, config, None)
}

/// [`paired_bootstrap`] on `threads` threads (default: by the amount of work); the result is the
/// same for any number.
pub(crate) fn paired_bootstrap_on<K: Ord + Debug>(
    baseline: &[Sample<K, f64>],
    candidate: &[Sample<K, f64>],
    config: &BootstrapConfig,
    threads: Option<usize>,
) -> Result<PairedDifference, StatsError> {
    let mut differences = paired_columns_on(baseline, candidate, std::slice::from_ref, 1, config, threads)?;
    Ok(differences.pop().expect("one column, even without samples"))
}

/// [`paired_bootstrap_columns`] on `threads` threads (default: by the amount of work), with a
/// sample's values read by `values`, and `columns_without_samples` columns when there is no
/// sample; the result is the same for any number of threads.
pub(crate) fn paired_columns_on<K: Ord + Debug, V>(
    baseline: &[Sample<K, V>],
    candidate: &[Sample<K, V>],
    values: fn(&V) -> &[f64],
    columns_without_samples: usize,
    config: &BootstrapConfig,
    threads: Option<usize>,
) -> Result<Vec<PairedDifference>, StatsError> {
    config.check()?;
    let columns =
        baseline.iter().chain(candidate).next().map_or(columns_without_samples, |sample| values(&sample.value).len());
    for sample in baseline.iter().chain(candidate) {
        let found = values(&sample.value);
        if found.len() != columns {
            return Err(StatsError::RaggedSample {
                task: format!("{:?}", sample.task),
                repeat: sample.repeat,
                expected: columns,
                found: found.len(),
            });
        }
        for value in found {
            check_finite("sample value", *value)?;
        }
    }
    let pairing = pair_references(baseline, candidate)?;
    let tasks = pairing.tasks.len();
    // Per column, a unit-weight baseline column (at `column`) and candidate column (at
    // `columns + column`) over the paired tasks, values summed in repeat order.
    let mut sums: Vec<ColumnSums> = (0..2 * columns).map(|_| ColumnSums::with_capacity(tasks)).collect();
    for (_, pairs) in &pairing.tasks {
        let count = pairs.len() as f64;
        for column in 0..columns {
            let baseline_value = |pair: &(&V, &V)| values(pair.0)[column];
            let candidate_value = |pair: &(&V, &V)| values(pair.1)[column];
            sums[column].push(count, pairs.iter().map(baseline_value).sum())?;
            sums[columns + column].push(count, pairs.iter().map(candidate_value).sum())?;
            for pair in pairs {
                let (b, c) = (baseline_value(pair), candidate_value(pair));
                sums[column].widen_range(b, b);
                sums[columns + column].widen_range(c, c);
            }
        }
    }
    let table = Table::new(tasks, sums);
    // Every task has at least one pair, so every column is defined in every resample.
    let resampled =
        (tasks > 0).then(|| table.resample(config, threads.unwrap_or_else(|| default_threads(&table, config))));
    Ok((0..columns)
        .map(|column| {
            let baseline_mean = table.estimate(column);
            let candidate_mean = table.estimate(columns + column);
            let difference = match (baseline_mean, candidate_mean, &resampled) {
                (Some(b), Some(c), Some(resampled)) => {
                    let statistics =
                        resampled.chunks_exact(2 * columns).map(|row| row[columns + column] - row[column]).collect();
                    Some(percentile_interval(c - b, statistics, config))
                }
                _ => None,
            };
            PairedDifference {
                tasks: tasks as u64,
                pairs: pairing.pairs,
                unpaired_baseline: pairing.unpaired_baseline,
                unpaired_candidate: pairing.unpaired_candidate,
                baseline_mean,
                candidate_mean,
                difference,
            }
        })
        .collect())
}
