//! Cluster (task-level) percentile bootstrap of weighted means.
//!
//! Rules:
//! - The statistic of a column is the weighted mean of its sample values, each sample carrying its
//!   task's weight: `Σ_tasks w·Σ values / Σ_tasks w·(number of values)`. With unit weights this is
//!   the plain mean over samples; SWE-PRBench weights a task by `ln(human comments + 1)`.
//! - Tasks are sorted by key; every task given is one cluster, including one with weight 0 or no
//!   values (it is drawn like any other and adds nothing to either sum). Leave out tasks that are
//!   not part of the population, e.g. tasks with no scored trial yet.
//! - A resample draws as many tasks as there are, uniformly with replacement, and evaluates every
//!   column on the same draw. A resample whose drawn tasks have zero total weight in a column has
//!   no value for that column and is left out of that column's percentiles; `Interval::resamples`
//!   counts the resamples that had one.
//! - A task's *row* holds, for every column of the call, the task's weight total
//!   `w·(number of values)` and weighted sum `w·Σ values`. A resample's statistics depend on its
//!   draw only through how often each distinct row was drawn, so a call resamples by one of two
//!   paths, chosen once for the whole call (all its columns together). With `n` tasks whose rows
//!   take `G` distinct values (equal bit for bit):
//!   - *Grouped*, when `G ≤ max(64, ⌊n/128⌋)` (e.g. 0/1 hits with unit weights and a fixed number
//!     of repeats): the tasks of one row form a group, groups numbered in the order of their first
//!     task by key, `size_g` tasks in group `g`. Resample `b` (0-based) reads the ChaCha8 stream `b`
//!     keyed by `ChaCha8Rng::seed_from_u64(seed)` and draws the group counts, which are
//!     Multinomial(n; size_g/n), as sequential conditional binomials: with `r` draws left (`n` at
//!     first) and `S` tasks in groups `g..G`, group `g < G − 1` gets a count drawn from
//!     `rand_distr::Binomial::new(r, size_g/S)` (rand_distr 0.5: exact inversion when
//!     `r·min(p, 1 − p) < 10`, exact BTPE rejection otherwise) — or 0, reading nothing, when
//!     `r = 0`; group `G − 1` gets the `r` draws left. The resample's sums are
//!     `Σ_g count_g·row_g`, each product rounded once, then added in group order. This is the
//!     bootstrap distribution of the by-task path (a product `count·row` differs from adding the
//!     row `count` times by rounding at most; for 0/1 values neither rounds) at O(G) work per
//!     resample instead of O(n).
//!   - *By task*, otherwise: resample `b` reads consecutive little-endian `u32` words of the same
//!     stream `b`; a word `x` gives task index `(x·n) >> 32` unless `(x·n) mod 2³² < (2³² − n) mod n`,
//!     in which case it is skipped (Lemire's unbiased bounded draw). A resample's sums add the
//!     drawn tasks at even and at odd positions separately, each in draw order, then the two.
//!
//!   Either way resamples are independent streams, so splitting them across threads cannot change
//!   a result. On the by-task path the draws depend only on `n` and the seed, so a column gets the
//!   same bits alone as together with other columns over the same tasks when both calls take the
//!   by-task path; when either call is grouped, the two results are different draws from the same
//!   bootstrap distribution, equal up to Monte Carlo error (columns in one call still share each
//!   resample's draw, so e.g. recall@1 ≤ recall@3 holds resample by resample).
//! - Interval: the resample statistics of a column, sorted ascending, `v[0..B)`; the quantile at
//!   `q` is `v[⌊h⌋] + (h − ⌊h⌋)·(v[⌊h⌋+1] − v[⌊h⌋])` with `h = q·(B − 1)` (linear interpolation,
//!   Hyndman–Fan type 7, numpy's default); `low` is the quantile at `(1 − confidence)/2` and `high`
//!   at `(1 + confidence)/2`.
//! - A task's values are summed in ascending order, so the order of samples within a task does not
//!   matter either. Means are clamped to the column's range of sample values, which they can only
//!   leave by rounding.
//! - No task (or zero total weight) → no interval; one task → every resample is that task, so the
//!   interval is degenerate at the estimate.

use std::collections::HashMap;
use std::fmt::Debug;

use rand::{Rng, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Binomial, Distribution};
use serde::{Deserialize, Serialize};

use super::{check_finite, StatsError};

pub const DEFAULT_RESAMPLES: u32 = 10_000;
pub const DEFAULT_CONFIDENCE: f64 = 0.95;

/// Below this many task draws in total (a binomial counting as [`DRAWS_PER_BINOMIAL`]),
/// resampling stays on the calling thread.
const PARALLEL_DRAWS: u64 = 1 << 22;
/// The grouped path is taken with at most this many distinct rows, whatever the number of tasks …
const MIN_GROUPS: usize = 64;
/// … or with at most one distinct row per this many tasks.
const TASKS_PER_GROUP: usize = 128;
/// Roughly what one binomial draw of a group count costs, in task draws.
const DRAWS_PER_BINOMIAL: u64 = 32;
/// Words of the ChaCha stream generated at a time.
const WORDS_PER_FILL: usize = 256;

#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct BootstrapConfig {
    pub resamples: u32,
    pub seed: u64,
    /// Coverage of the interval, in (0, 1).
    pub confidence: f64,
}

impl BootstrapConfig {
    /// 10,000 resamples, 95% intervals, with the given seed.
    pub fn with_seed(seed: u64) -> Self {
        BootstrapConfig { resamples: DEFAULT_RESAMPLES, seed, confidence: DEFAULT_CONFIDENCE }
    }

    pub(crate) fn check(&self) -> Result<(), StatsError> {
        if self.resamples == 0 {
            return Err(StatsError::InvalidConfig("resamples must be at least 1"));
        }
        if !(self.confidence > 0.0 && self.confidence < 1.0) {
            return Err(StatsError::InvalidConfig("confidence must be strictly between 0 and 1"));
        }
        Ok(())
    }
}

impl Default for BootstrapConfig {
    fn default() -> Self {
        BootstrapConfig::with_seed(0)
    }
}

/// A point estimate with its percentile bootstrap interval.
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Interval {
    pub estimate: f64,
    pub low: f64,
    pub high: f64,
    pub confidence: f64,
    /// Resamples in which the statistic was defined (see the module rules).
    pub resamples: u32,
    pub seed: u64,
}

/// One task's samples for one statistic.
#[derive(Debug, Clone, PartialEq)]
pub struct Cluster<K> {
    pub task: K,
    /// The weight each of the task's samples carries; 1 for a plain mean over samples.
    pub weight: f64,
    /// One value per sample (e.g. per repeat): hit@k as 0/1, a score, ….
    pub values: Vec<f64>,
}

impl<K> Cluster<K> {
    /// A cluster with unit weight.
    pub fn new(task: K, values: Vec<f64>) -> Self {
        Cluster { task, weight: 1.0, values }
    }

    pub fn weighted(task: K, weight: f64, values: Vec<f64>) -> Self {
        Cluster { task, weight, values }
    }
}

/// The bootstrap interval of one weighted mean (see the module rules); `None` when there is no
/// task or the total weight is zero.
pub fn bootstrap_mean<K: Ord + Debug>(
    clusters: &[Cluster<K>],
    config: &BootstrapConfig,
) -> Result<Option<Interval>, StatsError> {
    Ok(bootstrap_columns(&[clusters], config)?.pop().flatten())
}

/// Intervals for several weighted means over the same tasks from one set of task draws, e.g.
/// recall@1, @3 and @5, or a recall and a weighted score. Every column must hold exactly the same
/// task keys (each once); weights may differ between columns. One entry per column, `None` where
/// the column has no task or zero total weight.
///
/// The call resamples by the grouped or the by-task path, chosen for all its columns together (see
/// the module rules): a column gets the same bits here as alone when both calls take the by-task
/// path, and the same distribution in any case.
pub fn bootstrap_columns<K: Ord + Debug, C: AsRef<[Cluster<K>]>>(
    columns: &[C],
    config: &BootstrapConfig,
) -> Result<Vec<Option<Interval>>, StatsError> {
    bootstrap_columns_on(columns, config, None)
}

/// [`bootstrap_columns`] on `threads` threads (default: by the amount of work); the result is the
/// same for any number.
pub(crate) fn bootstrap_columns_on<K: Ord + Debug, C: AsRef<[Cluster<K>]>>(
    columns: &[C],
    config: &BootstrapConfig,
    threads: Option<usize>,
) -> Result<Vec<Option<Interval>>, StatsError> {
    config.check()?;
    let table = Table::from_columns(columns)?;
    if table.tasks == 0 {
        return Ok(vec![None; table.columns]);
    }
    let resampled = table.resample(config, threads.unwrap_or_else(|| default_threads(&table, config)));
    Ok((0..table.columns)
        .map(|column| {
            let estimate = table.estimate(column)?;
            let statistics: Vec<f64> =
                resampled.chunks_exact(table.columns).map(|row| row[column]).filter(|v| !v.is_nan()).collect();
            Some(percentile_interval(estimate, statistics, config))
        })
        .collect())
}

/// Per-task sums, ready to resample. A row per task (in canonical order) holds the distinct
/// per-task weight totals (columns with the same weights share one, e.g. recall@k for every k),
/// then each column's weighted sum.
pub(crate) struct Table {
    pub(crate) tasks: usize,
    pub(crate) columns: usize,
    /// Row length; rows longer than [`WIDE`] are padded with zeros to a multiple of it.
    stride: usize,
    /// Per column, the position of its weight total in a row.
    weight_slot: Vec<usize>,
    /// Position of column 0's weighted sum in a row; column `c`'s is `sums_at + c`.
    sums_at: usize,
    cells: Vec<f64>,
    /// Per column, the smallest and largest value of a sample with positive weight.
    ranges: Vec<Option<(f64, f64)>>,
    /// The distinct rows, when few enough for the grouped path.
    groups: Option<Groups>,
}

/// The distinct rows of a [`Table`] (see the module rules for the grouped path).
struct Groups {
    /// The rows, `stride` cells each, in the order of their first task.
    rows: Vec<f64>,
    /// Tasks per row, in the same order; each at least 1.
    sizes: Vec<u64>,
}

impl Groups {
    /// The distinct rows (bit for bit) of `cells` in order of first occurrence; `None` when there are
    /// more than the grouped path allows for `tasks` rows.
    fn of(cells: &[f64], stride: usize, tasks: usize) -> Option<Groups> {
        let limit = MIN_GROUPS.max(tasks / TASKS_PER_GROUP);
        let mut index: HashMap<Vec<u64>, usize> = HashMap::new();
        let mut groups = Groups { rows: Vec::new(), sizes: Vec::new() };
        let mut key = Vec::with_capacity(stride);
        for row in cells.chunks_exact(stride) {
            key.clear();
            key.extend(row.iter().map(|cell| cell.to_bits()));
            match index.get(key.as_slice()) {
                Some(&group) => groups.sizes[group] += 1,
                None if groups.sizes.len() == limit => return None,
                None => {
                    index.insert(key.clone(), groups.sizes.len());
                    groups.rows.extend_from_slice(row);
                    groups.sizes.push(1);
                }
            }
        }
        Some(groups)
    }

    /// Draws how many of the resample's `tasks` draws fall in each group (`counts`, in group
    /// order) by sequential conditional binomials (see the module rules).
    fn draw_counts(&self, tasks: usize, rng: &mut ChaCha8Rng, counts: &mut [u64]) {
        let mut left = tasks as u64;
        let mut rest = tasks as u64;
        for (&size, count) in self.sizes.iter().zip(counts.iter_mut()) {
            *count = if left == 0 {
                0
            } else if size == rest {
                // The last group (every group holds a task): the draws left.
                left
            } else {
                let p = size as f64 / rest as f64;
                Binomial::new(left, p).expect("0 < size < rest, so 0 < p < 1").sample(rng)
            };
            left -= *count;
            rest -= size;
        }
    }

    /// `totals[j]` = Σ over groups, in order, of `count·row[j]`.
    fn sum_counts(&self, counts: &[u64], totals: &mut [f64]) {
        totals.fill(0.0);
        for (&count, row) in counts.iter().zip(self.rows.chunks_exact(totals.len())) {
            let count = count as f64;
            for (total, cell) in totals.iter_mut().zip(row) {
                *total += count * cell;
            }
        }
    }
}

/// Row elements summed at once in registers.
const WIDE: usize = 16;

/// Per-column data for a [`Table`]: each task's weight total and weighted sum, in task order.
pub(crate) struct ColumnSums {
    pub(crate) weights: Vec<f64>,
    pub(crate) sums: Vec<f64>,
    pub(crate) range: Option<(f64, f64)>,
}

impl ColumnSums {
    pub(crate) fn with_capacity(tasks: usize) -> Self {
        ColumnSums { weights: Vec::with_capacity(tasks), sums: Vec::with_capacity(tasks), range: None }
    }

    /// Appends the next task's weight total and weighted sum.
    pub(crate) fn push(&mut self, weight: f64, sum: f64) -> Result<(), StatsError> {
        check_finite("task weight × samples", weight)?;
        check_finite("weighted sum", sum)?;
        self.weights.push(weight);
        self.sums.push(sum);
        Ok(())
    }

    /// Records that the column has positively weighted values in `[min, max]`.
    pub(crate) fn widen_range(&mut self, min: f64, max: f64) {
        let range = self.range.get_or_insert((min, max));
        range.0 = range.0.min(min);
        range.1 = range.1.max(max);
    }
}

impl Table {
    pub(crate) fn from_columns<K: Ord + Debug, C: AsRef<[Cluster<K>]>>(columns: &[C]) -> Result<Table, StatsError> {
        let mut sorted: Vec<Vec<&Cluster<K>>> = Vec::with_capacity(columns.len());
        for column in columns {
            let mut clusters: Vec<&Cluster<K>> = column.as_ref().iter().collect();
            clusters.sort_by(|a, b| a.task.cmp(&b.task));
            if let Some(pair) = clusters.windows(2).find(|pair| pair[0].task == pair[1].task) {
                return Err(StatsError::DuplicateTask(format!("{:?}", pair[0].task)));
            }
            sorted.push(clusters);
        }
        if let Some(first) = sorted.first() {
            for (index, other) in sorted.iter().enumerate().skip(1) {
                if other.len() != first.len() || other.iter().zip(first).any(|(a, b)| a.task != b.task) {
                    return Err(StatsError::MismatchedTasks { column: index });
                }
            }
        }
        let tasks = sorted.first().map_or(0, Vec::len);
        let mut sums = Vec::with_capacity(sorted.len());
        let mut scratch = Vec::new();
        for clusters in &sorted {
            let mut column = ColumnSums::with_capacity(tasks);
            for cluster in clusters {
                check_finite("task weight", cluster.weight)?;
                if cluster.weight < 0.0 {
                    return Err(StatsError::NegativeWeight(cluster.weight));
                }
                scratch.clear();
                scratch.extend_from_slice(&cluster.values);
                for value in &scratch {
                    check_finite("sample value", *value)?;
                }
                scratch.sort_unstable_by(f64::total_cmp);
                let sum: f64 = scratch.iter().sum();
                column.push(cluster.weight * scratch.len() as f64, cluster.weight * sum)?;
                if let (Some(min), Some(max)) = (scratch.first(), scratch.last()) {
                    if cluster.weight > 0.0 {
                        column.widen_range(*min, *max);
                    }
                }
            }
            sums.push(column);
        }
        Ok(Table::new(tasks, sums))
    }

    /// Lays out columns of `tasks` entries each as rows.
    pub(crate) fn new(tasks: usize, columns: Vec<ColumnSums>) -> Table {
        let mut distinct_weights: Vec<&[f64]> = Vec::new();
        let weight_slot: Vec<usize> = columns
            .iter()
            .map(|column| {
                let same = distinct_weights
                    .iter()
                    .position(|weights| weights.iter().zip(&column.weights).all(|(a, b)| a.to_bits() == b.to_bits()));
                same.unwrap_or_else(|| {
                    distinct_weights.push(&column.weights);
                    distinct_weights.len() - 1
                })
            })
            .collect();
        let sums_at = distinct_weights.len();
        let length = sums_at + columns.len();
        let stride = if length <= WIDE { length.max(1) } else { length.div_ceil(WIDE) * WIDE };
        let mut cells = vec![0.0; tasks * stride];
        for (task, row) in cells.chunks_exact_mut(stride).enumerate() {
            for (slot, weights) in distinct_weights.iter().enumerate() {
                row[slot] = weights[task];
            }
            for (column, sums) in columns.iter().enumerate() {
                row[sums_at + column] = sums.sums[task];
            }
        }
        Table {
            tasks,
            columns: columns.len(),
            stride,
            weight_slot,
            sums_at,
            groups: Groups::of(&cells, stride, tasks),
            cells,
            ranges: columns.iter().map(|column| column.range).collect(),
        }
    }

    /// The number of distinct rows when the table takes the grouped path, `None` when it is
    /// resampled by task.
    #[cfg(test)]
    pub(crate) fn groups(&self) -> Option<usize> {
        self.groups.as_ref().map(|groups| groups.sizes.len())
    }

    /// The same table, resampled by task whatever its rows: to compare the two paths.
    #[cfg(test)]
    pub(crate) fn by_task(mut self) -> Table {
        self.groups = None;
        self
    }

    /// What one resample costs, in task draws.
    fn draws_per_resample(&self) -> u64 {
        match &self.groups {
            Some(groups) => groups.sizes.len() as u64 * DRAWS_PER_BINOMIAL,
            None => self.tasks as u64,
        }
    }

    /// The column's weighted mean over all tasks, each sum taken in task order.
    pub(crate) fn estimate(&self, column: usize) -> Option<f64> {
        let (mut weight, mut sum) = (0.0, 0.0);
        for row in self.cells.chunks_exact(self.stride) {
            weight += row[self.weight_slot[column]];
            sum += row[self.sums_at + column];
        }
        self.mean(column, weight, sum)
    }

    fn mean(&self, column: usize, weight: f64, sum: f64) -> Option<f64> {
        let (min, max) = self.ranges[column]?;
        (weight > 0.0).then(|| (sum / weight).clamp(min, max))
    }

    /// Resample statistics, resample-major (`out[b·columns + column]`), NaN where a column has
    /// zero weight in a resample. The result does not depend on `threads`.
    pub(crate) fn resample(&self, config: &BootstrapConfig, threads: usize) -> Vec<f64> {
        let resamples = config.resamples as usize;
        let mut out = vec![f64::NAN; resamples * self.columns];
        if self.tasks == 0 || self.columns == 0 {
            return out;
        }
        let key = ChaCha8Rng::seed_from_u64(config.seed).get_seed();
        let per_thread = resamples.div_ceil(threads.max(1));
        if threads <= 1 {
            self.resample_range(key, 0, &mut out);
        } else {
            std::thread::scope(|scope| {
                for (index, part) in out.chunks_mut(per_thread * self.columns).enumerate() {
                    scope.spawn(move || self.resample_range(key, index * per_thread, part));
                }
            });
        }
        out
    }

    /// Fills `out` with the statistics of resamples `first..`, one row of columns each.
    fn resample_range(&self, key: [u8; 32], first: usize, out: &mut [f64]) {
        let mut drawn = Vec::new();
        let mut counts = vec![0; self.groups.as_ref().map_or(0, |groups| groups.sizes.len())];
        let mut totals = vec![0.0; self.stride];
        for (offset, row) in out.chunks_exact_mut(self.columns).enumerate() {
            let mut rng = ChaCha8Rng::from_seed(key);
            rng.set_stream((first + offset) as u64);
            match &self.groups {
                Some(groups) => {
                    groups.draw_counts(self.tasks, &mut rng, &mut counts);
                    groups.sum_counts(&counts, &mut totals);
                }
                None => {
                    self.draw(&mut rng, &mut drawn);
                    self.sum_rows(&drawn, &mut totals);
                }
            }
            for (column, statistic) in row.iter_mut().enumerate() {
                let weight = totals[self.weight_slot[column]];
                *statistic = self.mean(column, weight, totals[self.sums_at + column]).unwrap_or(f64::NAN);
            }
        }
    }

    /// Draws `tasks` task indices with replacement by the module's rule.
    fn draw(&self, rng: &mut ChaCha8Rng, drawn: &mut Vec<u32>) {
        let n = u32::try_from(self.tasks).expect("fewer than 2³² tasks");
        let reject_below = n.wrapping_neg() % n;
        let mut words = [0u32; WORDS_PER_FILL];
        drawn.resize(self.tasks, 0);
        let mut filled = 0;
        while filled < self.tasks {
            // Ask for no more words than the draws still needed, so small tables stay cheap; then
            // `filled` stays below `tasks` at every write.
            let batch = &mut words[..(self.tasks - filled).min(WORDS_PER_FILL)];
            rng.fill(batch);
            for &word in batch.iter() {
                let product = u64::from(word) * u64::from(n);
                // Written unconditionally and kept only if accepted: no branch in the loop.
                drawn[filled] = (product >> 32) as u32;
                filled += usize::from(product as u32 >= reject_below);
            }
        }
    }

    /// `totals[j]` = Σ over `drawn` of the row's element `j`.
    fn sum_rows(&self, drawn: &[u32], totals: &mut [f64]) {
        // A row length known at compile time keeps the running sums in registers.
        macro_rules! by_length {
            ($($length:literal)*) => {
                match self.stride {
                    $($length => totals.copy_from_slice(&sum_slices::<$length>(&self.cells, $length, 0, drawn)),)*
                    _ => {
                        for (chunk, part) in totals.chunks_exact_mut(WIDE).enumerate() {
                            part.copy_from_slice(&sum_slices::<WIDE>(&self.cells, self.stride, chunk * WIDE, drawn));
                        }
                    }
                }
            };
        }
        by_length!(1 2 3 4 5 6 7 8 9 10 11 12 13 14 15 16)
    }
}

/// Σ over `drawn` of `cells[task·stride + offset ..][..N]`: draws at even positions and at odd
/// positions are summed separately, each in draw order, then added (even + odd), which halves the
/// chain of dependent additions.
fn sum_slices<const N: usize>(cells: &[f64], stride: usize, offset: usize, drawn: &[u32]) -> [f64; N] {
    let row = |task: u32| -> &[f64; N] {
        let start = task as usize * stride + offset;
        cells[start..start + N].try_into().expect("rows hold N elements from offset")
    };
    let (mut even, mut odd) = ([0.0; N], [0.0; N]);
    let pairs = drawn.chunks_exact(2);
    let last = pairs.remainder().first().copied();
    for pair in pairs {
        let (first, second) = (row(pair[0]), row(pair[1]));
        for j in 0..N {
            even[j] += first[j];
            odd[j] += second[j];
        }
    }
    if let Some(task) = last {
        for (total, cell) in even.iter_mut().zip(row(task)) {
            *total += cell;
        }
    }
    for (total, partial) in even.iter_mut().zip(odd) {
        *total += partial;
    }
    even
}

pub(crate) fn default_threads(table: &Table, config: &BootstrapConfig) -> usize {
    let draws = table.draws_per_resample() * u64::from(config.resamples);
    if draws < PARALLEL_DRAWS {
        1
    } else {
        std::thread::available_parallelism().map_or(1, |n| n.get())
    }
}

/// The percentile interval of `statistics` around `estimate` (see the module rules).
pub(crate) fn percentile_interval(estimate: f64, mut statistics: Vec<f64>, config: &BootstrapConfig) -> Interval {
    statistics.sort_unstable_by(f64::total_cmp);
    let tail = (1.0 - config.confidence) / 2.0;
    let (low, high) = if statistics.is_empty() {
        // Every resample was undefined (possible only with zero-weight tasks): no spread is known.
        (estimate, estimate)
    } else {
        (quantile(&statistics, tail), quantile(&statistics, 1.0 - tail))
    };
    Interval {
        estimate,
        low,
        high,
        confidence: config.confidence,
        resamples: statistics.len() as u32,
        seed: config.seed,
    }
}

/// Linearly interpolated quantile (type 7) of ascending, non-empty `sorted`.
pub(crate) fn quantile(sorted: &[f64], q: f64) -> f64 {
    let h = q * (sorted.len() - 1) as f64;
    let below = h.floor() as usize;
    let fraction = h - below as f64;
    match sorted.get(below + 1) {
        // Clamped so rounding cannot carry the value past its neighbours.
        Some(&above) if fraction > 0.0 => {
            (sorted[below] + fraction * (above - sorted[below])).clamp(sorted[below], above)
        }
        _ => sorted[below],
    }
}
