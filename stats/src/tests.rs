use proptest::prelude::*;
use rand::{RngCore, SeedableRng};
use rand_chacha::ChaCha8Rng;
use rand_distr::{Binomial, Distribution};

use super::bootstrap::{bootstrap_columns_on, quantile, Table};
use super::paired::{paired_bootstrap_on, paired_columns_on};
use super::*;

fn config(seed: u64) -> BootstrapConfig {
    BootstrapConfig::with_seed(seed)
}

/// Ten tasks of ten repeats each; the first `ones` tasks score 1 on every repeat, the rest 0.
fn all_or_nothing_tasks(ones: u32) -> Vec<Cluster<u32>> {
    (0..10).map(|task| Cluster::new(task, vec![if task < ones { 1.0 } else { 0.0 }; 10])).collect()
}

fn bits(interval: &Interval) -> [u64; 4] {
    [interval.estimate.to_bits(), interval.low.to_bits(), interval.high.to_bits(), interval.confidence.to_bits()]
}

// ---- bootstrap ----

#[test]
fn percentile_rule_interpolates_linearly_between_order_statistics() {
    // h = q·(B − 1): q = 0.025 over 5 values gives h = 0.1, so 1 + 0.1·(2 − 1) = 1.1; q = 0.975
    // gives h = 3.9, so 4 + 0.9·(5 − 4) = 4.9; q = 0.5 gives h = 2 exactly, the middle value.
    let sorted = [1.0, 2.0, 3.0, 4.0, 5.0];
    assert!((quantile(&sorted, 0.025) - 1.1).abs() < 1e-15);
    assert!((quantile(&sorted, 0.975) - 4.9).abs() < 1e-15);
    assert_eq!(quantile(&sorted, 0.5), 3.0);
    assert_eq!(quantile(&sorted, 0.0), 1.0);
    assert_eq!(quantile(&sorted, 1.0), 5.0);
    assert_eq!(quantile(&[7.0], 0.025), 7.0);
}

#[test]
fn estimate_is_the_mean_over_samples_each_carrying_its_task_weight() {
    // (1·(1 + 0) + 2·1) / (1·2 + 2·1) = 3/4.
    let tasks = [Cluster::weighted("a", 1.0, vec![1.0, 0.0]), Cluster::weighted("b", 2.0, vec![1.0])];
    let interval = bootstrap_mean(&tasks, &config(1)).unwrap().unwrap();
    assert_eq!(interval.estimate, 0.75);
    // Unit weights: the plain mean over the three samples, 2/3.
    let unit = [Cluster::new("a", vec![1.0, 0.0]), Cluster::new("b", vec![1.0])];
    assert_eq!(bootstrap_mean(&unit, &config(1)).unwrap().unwrap().estimate, 2.0 / 3.0);
}

#[test]
fn resamples_whole_tasks_not_single_repeats() {
    // Five of ten tasks hit on all ten repeats. Drawing tasks, a resample's recall is X/10 with
    // X ~ Binomial(10, ½): P(X ≤ 1) = 11/1024 ≈ 1.1% and P(X ≤ 2) = 56/1024 ≈ 5.5%, so the 2.5%
    // quantile is 0.2 and, by symmetry, the 97.5% quantile 0.8 (over 10,000 resamples the counts
    // sit hundreds of resamples away from index 250). Drawing the 100 repeats independently
    // would give about 0.5 ± 0.1 instead. Two distinct rows: the grouped path.
    assert_eq!(Table::from_columns(&[all_or_nothing_tasks(5)]).unwrap().groups(), Some(2));
    let interval = bootstrap_mean(&all_or_nothing_tasks(5), &config(7)).unwrap().unwrap();
    assert_eq!((interval.estimate, interval.low, interval.high), (0.5, 0.2, 0.8));
    assert_eq!(interval.resamples, DEFAULT_RESAMPLES);
    assert_eq!((interval.confidence, interval.seed), (0.95, 7));
}

#[test]
fn interval_width_matches_the_binomial_standard_error() {
    // 500 single-sample tasks, 30% hits: the standard error is √(0.3·0.7/500) ≈ 0.0205, so the
    // 95% interval is about ±1.96·0.0205 ≈ ±0.0402 around 0.3. Two distinct rows: grouped.
    let tasks: Vec<Cluster<u32>> =
        (0..500).map(|task| Cluster::new(task, vec![if task % 10 < 3 { 1.0 } else { 0.0 }])).collect();
    assert_eq!(Table::from_columns(&[&tasks]).unwrap().groups(), Some(2));
    let interval = bootstrap_mean(&tasks, &BootstrapConfig { resamples: 4000, ..config(3) }).unwrap().unwrap();
    assert_eq!(interval.estimate, 0.3);
    assert!((interval.estimate - interval.low - 0.0402).abs() < 0.004, "{interval:?}");
    assert!((interval.high - interval.estimate - 0.0402).abs() < 0.004, "{interval:?}");
}

/// Mean and standard deviation of `values`.
fn mean_and_sd(values: &[f64]) -> (f64, f64) {
    let n = values.len() as f64;
    let mean = values.iter().sum::<f64>() / n;
    (mean, (values.iter().map(|v| (v - mean).powi(2)).sum::<f64>() / (n - 1.0)).sqrt())
}

#[test]
fn grouped_path_has_the_distribution_of_the_by_task_path() {
    // 600 tasks; a hit column (30%) and a score in {0, ⅓, ⅔, 1} weighted 1, 2 or 3: their rows
    // take 2·3·4 = 24 distinct values, so the table is grouped. Resampled by groups and
    // by task, each column's resample statistics have the same centre, spread and tails, and the
    // hit column's spread is the binomial standard error √(0.3·0.7/600) ≈ 0.01871 (the bootstrap
    // draws n tasks from the observed ones).
    let hits: Vec<Cluster<u32>> = (0..600).map(|t| Cluster::new(t, vec![f64::from(u8::from(t % 10 < 3))])).collect();
    let scores: Vec<Cluster<u32>> =
        (0..600).map(|t| Cluster::weighted(t, f64::from(1 + t % 3), vec![f64::from(t % 4) / 3.0])).collect();
    let resamples = 3000;
    let config = BootstrapConfig { resamples, ..config(17) };
    let grouped = Table::from_columns(&[&hits, &scores]).unwrap();
    assert_eq!(grouped.groups(), Some(24));
    let by_task = Table::from_columns(&[&hits, &scores]).unwrap().by_task();
    assert_eq!(by_task.groups(), None);
    let (from_groups, from_tasks) = (grouped.resample(&config, 1), by_task.resample(&config, 1));
    for column in 0..2 {
        let estimate = grouped.estimate(column).unwrap();
        let statistics = |resampled: &[f64]| -> Vec<f64> {
            let mut v: Vec<f64> = resampled.chunks_exact(2).map(|row| row[column]).collect();
            v.sort_unstable_by(f64::total_cmp);
            v
        };
        let (g, t) = (statistics(&from_groups), statistics(&from_tasks));
        let ((g_mean, g_sd), (t_mean, t_sd)) = (mean_and_sd(&g), mean_and_sd(&t));
        // Monte Carlo errors over 3,000 resamples: a mean's is sd/55, an sd's about 1.3%, a 2.5%
        // quantile's about 0.05·sd; the bounds are about four such errors (of a difference).
        assert!((g_mean - estimate).abs() < 0.07 * t_sd, "column {column}: {g_mean} vs {estimate}");
        assert!((t_mean - estimate).abs() < 0.07 * t_sd, "column {column}: {t_mean} vs {estimate}");
        assert!((g_sd / t_sd - 1.0).abs() < 0.07, "column {column}: sd {g_sd} vs {t_sd}");
        for q in [0.025, 0.5, 0.975] {
            let (a, b) = (quantile(&g, q), quantile(&t, q));
            assert!((a - b).abs() < 0.25 * t_sd, "column {column}, q = {q}: {a} vs {b}");
        }
        if column == 0 {
            let standard_error = (0.3f64 * 0.7 / 600.0).sqrt();
            assert!((g_sd / standard_error - 1.0).abs() < 0.05, "{g_sd} vs {standard_error}");
        }
    }
    // Same table, seed and rule: the same bits again; the two paths draw differently.
    assert_eq!(grouped.resample(&config, 1), from_groups);
    assert_ne!(from_groups, from_tasks);
}

#[test]
fn grouped_path_is_taken_with_at_most_max_64_n_over_128_distinct_rows() {
    let distinct = |tasks: u32, rows: u32| -> Option<usize> {
        let column: Vec<Cluster<u32>> = (0..tasks).map(|t| Cluster::new(t, vec![f64::from(t % rows)])).collect();
        Table::from_columns(&[column]).unwrap().groups()
    };
    assert_eq!(distinct(64, 64), Some(64));
    assert_eq!(distinct(65, 65), None);
    assert_eq!(distinct(1000, 64), Some(64));
    assert_eq!(distinct(1000, 65), None);
    // 12,800 tasks: up to 12,800/128 = 100 distinct rows.
    assert_eq!(distinct(12_800, 100), Some(100));
    assert_eq!(distinct(12_800, 101), None);
    assert_eq!(distinct(1, 1), Some(1));
    // A row is every column's weight total and sum, bit for bit: the same values with another
    // weight, or in another column, make another row.
    let weights: Vec<Cluster<u32>> = (0..100).map(|t| Cluster::weighted(t, f64::from(1 + t % 2), vec![1.0])).collect();
    assert_eq!(Table::from_columns(&[&weights]).unwrap().groups(), Some(2));
    let a: Vec<Cluster<u32>> = (0..100).map(|t| Cluster::new(t, vec![f64::from(t % 2)])).collect();
    let b: Vec<Cluster<u32>> = (0..100).map(|t| Cluster::new(t, vec![f64::from(t % 3)])).collect();
    assert_eq!(Table::from_columns(&[&a, &b]).unwrap().groups(), Some(6));
    // 10,000 tasks of three 0/1 repeats in two columns: each column's sum is 0..=3, so there are
    // at most 16 rows, however many tasks.
    let repeats = |k: u32| -> Vec<Cluster<u32>> {
        (0..10_000).map(|t| Cluster::new(t, (0..3).map(|r| f64::from(u8::from((t + r) % k == 0))).collect())).collect()
    };
    assert!(Table::from_columns(&[repeats(2), repeats(5)]).unwrap().groups().is_some_and(|g| g <= 16));
    // Ten thousand distinct scores: by task.
    let scores: Vec<Cluster<u32>> = (0..10_000).map(|t| Cluster::new(t, vec![f64::from(t)])).collect();
    assert_eq!(Table::from_columns(&[&scores]).unwrap().groups(), None);
}

#[test]
fn no_task_gives_no_interval_and_one_task_a_degenerate_one() {
    let none: [Cluster<u32>; 0] = [];
    assert_eq!(bootstrap_mean(&none, &config(1)).unwrap(), None);
    let one = bootstrap_mean(&[Cluster::new(1, vec![0.25, 1.0, 0.5])], &config(1)).unwrap().unwrap();
    assert_eq!(one.estimate, 1.75 / 3.0);
    assert_eq!((one.low, one.high, one.resamples), (one.estimate, one.estimate, DEFAULT_RESAMPLES));
}

#[test]
fn zero_weight_tasks_are_drawn_but_weigh_nothing() {
    // Only "b" carries weight: the estimate is its mean, and a resample that draws only "a" has
    // no value and is left out of the count.
    let tasks = [Cluster::weighted("a", 0.0, vec![1.0]), Cluster::weighted("b", 1.0, vec![0.0, 1.0])];
    let interval = bootstrap_mean(&tasks, &config(5)).unwrap().unwrap();
    assert_eq!((interval.estimate, interval.low, interval.high), (0.5, 0.5, 0.5));
    // Two tasks: a resample is all "a" with probability ¼.
    let defined = f64::from(interval.resamples) / f64::from(DEFAULT_RESAMPLES);
    assert!((defined - 0.75).abs() < 0.02, "{defined}");

    let weightless = [Cluster::weighted("a", 0.0, vec![1.0]), Cluster::new("b", vec![])];
    assert_eq!(bootstrap_mean(&weightless, &config(5)).unwrap(), None);
}

#[test]
fn columns_share_one_draw_of_tasks_on_the_by_task_path() {
    // 100 tasks and columns with more than 64 distinct rows each, alone and together: every call
    // resamples by task, from the same streams, so a column's interval in a joint call is the
    // interval it gets alone, bit for bit, whatever its weights.
    let low: Vec<Cluster<u32>> = (0..100).map(|t| Cluster::new(t, vec![f64::from(t) / 100.0])).collect();
    let high: Vec<Cluster<u32>> =
        (0..100).map(|t| Cluster::new(t, vec![f64::from(t) / 100.0 + 0.5 * f64::from(t % 2)])).collect();
    let score: Vec<Cluster<u32>> =
        (0..100).map(|t| Cluster::weighted(t, f64::from(t % 7 + 1).ln_1p(), vec![f64::from(t % 11) / 10.0])).collect();
    assert_eq!(Table::from_columns(&[&low, &high, &score]).unwrap().groups(), None);
    let joint = bootstrap_columns(&[&low, &high, &score], &config(11)).unwrap();
    for (column, clusters) in [&low, &high, &score].into_iter().enumerate() {
        assert_eq!(Table::from_columns(&[clusters]).unwrap().groups(), None, "column {column}");
        let alone = bootstrap_mean(clusters, &config(11)).unwrap().unwrap();
        assert_eq!(bits(&joint[column].unwrap()), bits(&alone));
    }
    // low ≤ high task by task, so in every resample, so at both ends of the interval too.
    let (low, high) = (joint[0].unwrap(), joint[1].unwrap());
    assert!(low.low <= high.low && low.high <= high.high);
}

#[test]
fn grouped_columns_share_each_resample_draw() {
    // hit@1 ⇒ hit@3 on every task: 3 distinct rows together (2 for each column alone), so every
    // call is grouped. Together, the columns are counted on one draw per resample, so recall@1 ≤
    // recall@3 resample by resample; alone, a column gets other draws from the same distribution.
    let hit1: Vec<Cluster<u32>> = (0..400).map(|t| Cluster::new(t, vec![f64::from(u8::from(t % 4 == 0))])).collect();
    let hit3: Vec<Cluster<u32>> = (0..400).map(|t| Cluster::new(t, vec![f64::from(u8::from(t % 2 == 0))])).collect();
    let table = Table::from_columns(&[&hit1, &hit3]).unwrap();
    assert_eq!(table.groups(), Some(3));
    let resampled = table.resample(&BootstrapConfig { resamples: 2000, ..config(11) }, 1);
    assert!(resampled.chunks_exact(2).all(|row| row[0] <= row[1]));
    // Some resample has recall@3 − recall@1 away from its mean of ¼: the draws are shared, not
    // the same for both columns by accident.
    assert!(resampled.chunks_exact(2).any(|row| row[1] - row[0] != 0.25));
    let joint = bootstrap_columns(&[&hit1, &hit3], &config(11)).unwrap();
    for (column, clusters) in [&hit1, &hit3].into_iter().enumerate() {
        let alone = bootstrap_mean(clusters, &config(11)).unwrap().unwrap();
        let joint = joint[column].unwrap();
        assert_eq!(joint.estimate, alone.estimate);
        // Two draws of intervals ±1.96·√(p(1−p)/400) ≈ ±0.042 (p = ¼) or ±0.049 (p = ½).
        assert!((joint.low - alone.low).abs() < 0.01 && (joint.high - alone.high).abs() < 0.01, "{joint:?} {alone:?}");
    }
}

#[test]
fn draws_follow_the_documented_stream_rule() {
    // 100 tasks worth their index: more than 64 distinct rows, so the table is resampled by task.
    // The test re-derives each resample's draws from the ChaCha8 stream with Lemire's rule, word by
    // word; the sums are integers, exact in any order.
    let tasks: Vec<Cluster<u32>> = (0..100).map(|t| Cluster::new(t, vec![f64::from(t)])).collect();
    let seed = 42;
    let table = Table::from_columns(&[&tasks]).unwrap();
    assert_eq!(table.groups(), None);
    let config = BootstrapConfig { resamples: 20, ..config(seed) };
    let statistics = table.resample(&config, 1);
    let key = ChaCha8Rng::seed_from_u64(seed).get_seed();
    for (resample, statistic) in statistics.iter().enumerate() {
        let mut rng = ChaCha8Rng::from_seed(key);
        rng.set_stream(resample as u64);
        let reject_below = 100u32.wrapping_neg() % 100;
        let mut sum = 0.0;
        let mut drawn = 0;
        while drawn < 100 {
            let product = u64::from(rng.next_u32()) * 100;
            if (product as u32) >= reject_below {
                sum += (product >> 32) as f64;
                drawn += 1;
            }
        }
        assert_eq!(*statistic, sum / 100.0, "resample {resample}");
    }
}

#[test]
fn grouped_draws_follow_the_documented_rule() {
    // Ten tasks, given out of order: by key, task 0 is worth 100, tasks 1–3 are worth 1 and tasks
    // 4–9 are worth 10. The groups, in order of their first task, are {0}, {1, 2, 3} and {4..9}
    // (not value order). The test re-derives each resample's counts: Binomial(10, 1/10) for group
    // 0, Binomial(left, 3/9) for group 1 from the same stream, the rest for group 2.
    let value = |t: u32| match t {
        0 => 100.0,
        1..=3 => 1.0,
        _ => 10.0,
    };
    let tasks: Vec<Cluster<u32>> = [7, 3, 0, 9, 1, 4, 8, 2, 6, 5].map(|t| Cluster::new(t, vec![value(t)])).into();
    let seed = 5;
    let table = Table::from_columns(&[&tasks]).unwrap();
    assert_eq!(table.groups(), Some(3));
    let config = BootstrapConfig { resamples: 200, ..config(seed) };
    let statistics = table.resample(&config, 1);
    let key = ChaCha8Rng::seed_from_u64(seed).get_seed();
    let mut zero_counts = 0;
    for (resample, statistic) in statistics.iter().enumerate() {
        let mut rng = ChaCha8Rng::from_seed(key);
        rng.set_stream(resample as u64);
        let first = Binomial::new(10, 1.0 / 10.0).unwrap().sample(&mut rng);
        let second = if first == 10 { 0 } else { Binomial::new(10 - first, 3.0 / 9.0).unwrap().sample(&mut rng) };
        let third = 10 - first - second;
        zero_counts += usize::from(first == 0);
        let sum = first as f64 * 100.0 + second as f64 + third as f64 * 10.0;
        assert_eq!(*statistic, sum / 10.0, "resample {resample}: counts {first}, {second}, {third}");
    }
    // P(no draw of task 0) = 0.9¹⁰ ≈ 35%.
    assert!((40..=100).contains(&zero_counts), "{zero_counts}");
}

#[test]
fn same_seed_same_bits_on_any_number_of_threads() {
    // Rows with 33 distinct values (grouped), then with 100 (by task).
    let grouped: Vec<Cluster<u32>> =
        (0..100).map(|t| Cluster::weighted(t, 1.0 + f64::from(t % 3), vec![f64::from(t % 11) / 10.0; 2])).collect();
    let by_task: Vec<Cluster<u32>> =
        (0..100).map(|t| Cluster::weighted(t, 1.0 + f64::from(t % 3), vec![f64::from(t) / 10.0, 0.5])).collect();
    for (tasks, groups) in [(&grouped, Some(33)), (&by_task, None)] {
        assert_eq!(Table::from_columns(&[tasks]).unwrap().groups(), groups);
        // An odd number of resamples, so that threads get unequal shares.
        let config = BootstrapConfig { resamples: 2001, ..config(9) };
        let reference = bootstrap_columns_on(&[tasks], &config, Some(1)).unwrap()[0].unwrap();
        for threads in [2, 3, 8] {
            let other = bootstrap_columns_on(&[tasks], &config, Some(threads)).unwrap()[0].unwrap();
            assert_eq!(bits(&other), bits(&reference), "{threads} threads, {groups:?} groups");
        }
        assert_eq!(bits(&bootstrap_mean(tasks, &config).unwrap().unwrap()), bits(&reference));

        // A different seed draws different resamples.
        let table = Table::from_columns(&[tasks]).unwrap();
        let small = |seed| table.resample(&BootstrapConfig { resamples: 50, seed, ..config }, 1);
        assert_eq!(
            small(9).iter().map(|v| v.to_bits()).collect::<Vec<_>>(),
            small(9).iter().map(|v| v.to_bits()).collect::<Vec<_>>()
        );
        assert_ne!(small(9), small(10));
    }
}

#[test]
fn bad_input_is_an_error() {
    let c = config(1);
    assert_eq!(
        bootstrap_mean(&[Cluster::new("a", vec![1.0]), Cluster::new("a", vec![0.0])], &c),
        Err(StatsError::DuplicateTask("\"a\"".into()))
    );
    assert!(matches!(bootstrap_mean(&[Cluster::new("a", vec![f64::NAN])], &c), Err(StatsError::NotFinite { .. })));
    assert!(matches!(
        bootstrap_mean(&[Cluster::weighted("a", f64::INFINITY, vec![1.0])], &c),
        Err(StatsError::NotFinite { .. })
    ));
    assert_eq!(bootstrap_mean(&[Cluster::weighted("a", -1.0, vec![1.0])], &c), Err(StatsError::NegativeWeight(-1.0)));
    let no_columns: [Vec<Cluster<&str>>; 0] = [];
    assert_eq!(bootstrap_columns(&no_columns, &c), Ok(vec![]));
    let (x, y) = (vec![Cluster::new("a", vec![1.0])], vec![Cluster::new("b", vec![1.0])]);
    assert_eq!(bootstrap_columns(&[&x, &y], &c), Err(StatsError::MismatchedTasks { column: 1 }));
    for bad in [BootstrapConfig { resamples: 0, ..c }, BootstrapConfig { confidence: 1.0, ..c }] {
        assert!(matches!(bootstrap_mean(&x, &bad), Err(StatsError::InvalidConfig(_))));
    }
}

#[test]
fn interval_serializes_as_plain_numbers() {
    let interval = Interval { estimate: 0.5, low: 0.25, high: 0.75, confidence: 0.95, resamples: 10_000, seed: 3 };
    let json = serde_json::to_string(&interval).unwrap();
    assert_eq!(json, r#"{"estimate":0.5,"low":0.25,"high":0.75,"confidence":0.95,"resamples":10000,"seed":3}"#);
    assert_eq!(serde_json::from_str::<Interval>(&json).unwrap(), interval);
}

/// Up to 100 tasks, either with any values and weights (rows mostly distinct: grouped up to 64
/// tasks, by task past that) or 0/1 values with unit weights (grouped).
fn clusters_strategy() -> impl Strategy<Value = Vec<Cluster<u32>>> {
    let any = (prop_oneof![Just(1.0), 0.0..5.0f64], prop::collection::vec(-10.0..10.0f64, 0..5));
    let hits = (Just(1.0), prop::collection::vec(prop_oneof![Just(0.0), Just(1.0)], 0..3));
    prop_oneof![prop::collection::vec(any, 1..100), prop::collection::vec(hits, 1..100)].prop_map(|tasks| {
        tasks
            .into_iter()
            .enumerate()
            .map(|(key, (weight, values))| Cluster::weighted(key as u32, weight, values))
            .collect()
    })
}

fn quick(seed: u64) -> BootstrapConfig {
    BootstrapConfig { resamples: 300, ..config(seed) }
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn interval_is_ordered_and_within_the_sample_range(tasks in clusters_strategy(), seed: u64) {
        let weighted: Vec<f64> =
            tasks.iter().filter(|t| t.weight > 0.0).flat_map(|t| t.values.iter().copied()).collect();
        match bootstrap_mean(&tasks, &quick(seed)).unwrap() {
            None => prop_assert!(weighted.is_empty()),
            Some(interval) => {
                let min = weighted.iter().copied().fold(f64::INFINITY, f64::min);
                let max = weighted.iter().copied().fold(f64::NEG_INFINITY, f64::max);
                prop_assert!(interval.low <= interval.high);
                prop_assert!(min <= interval.low && interval.high <= max);
                prop_assert!(min <= interval.estimate && interval.estimate <= max);
            }
        }
    }

    #[test]
    fn input_order_never_changes_a_bit(
        (tasks, shuffled) in clusters_strategy().prop_flat_map(|tasks| {
            let reordered = Just(tasks.clone()).prop_shuffle().prop_flat_map(|tasks| {
                tasks
                    .into_iter()
                    .map(|t| Just(t.values.clone()).prop_shuffle().prop_map(move |values| Cluster { values, ..t.clone() }))
                    .collect::<Vec<_>>()
            });
            (Just(tasks), reordered)
        }),
        seed: u64,
    ) {
        let a = bootstrap_mean(&tasks, &quick(seed)).unwrap();
        let b = bootstrap_mean(&shuffled, &quick(seed)).unwrap();
        prop_assert_eq!(a.map(|i| bits(&i)), b.map(|i| bits(&i)));
    }
}

// ---- McNemar ----

#[test]
fn mcnemar_exact_golden_values() {
    let p = |b, c| mcnemar_exact_ln_p(b, c).exp();
    // b = 1, c = 9: n = 10, P(X ≤ 1) = (C(10,0) + C(10,1))/2¹⁰ = 11/1024, doubled: 22/1024.
    assert!((p(1, 9) - 0.021484375).abs() < 1e-15);
    assert_eq!(p(1, 9), p(9, 1));
    // b = 2, c = 8: (1 + 10 + 45)/1024 doubled = 112/1024.
    assert!((p(2, 8) - 0.109375).abs() < 1e-15);
    // b = 0, c = 5: 2·(1/32) = 1/16.
    assert!((p(0, 5) - 0.0625).abs() < 1e-15);
    // No discordant pair, and any symmetric split (P(X ≤ n/2) ≥ ½): p = 1.
    assert_eq!(p(0, 0), 1.0);
    assert_eq!(p(5, 5), 1.0);
    assert_eq!(p(1000, 1000), 1.0);
    // b = 2, c = 3: P(X ≤ 2) = 16/32 = ½, so the doubled tail is exactly 1.
    assert_eq!(p(2, 3), 1.0);
}

#[test]
fn mcnemar_exact_stays_exact_for_large_counts() {
    // References computed exactly in Python: Σ_{k≤m} C(n, k) on big integers, the p-value as the
    // exact fraction 2·Σ/2ⁿ rounded once to f64, then its log.
    for (b, c, reference) in [
        (45_000, 55_000, -504.41691852997377),
        (49_800, 50_200, -1.5748482340448353),
        (30_000, 30_500, -3.15859068630803),
        (4_990, 5_010, -0.16333063927171784),
        (123, 456, -104.09451149548006),
        (1, 9, -3.8404293522411375),
    ] {
        let ln_p: f64 = mcnemar_exact_ln_p(b, c);
        assert!((ln_p - reference).abs() <= 1e-12 * reference.abs().max(1.0), "b={b} c={c}: {ln_p} vs {reference}");
    }
    // b = 0, c = 100,000: p = 2·2⁻¹⁰⁰⁰⁰⁰, far below f64's range; its log is still exact.
    let ln_p = mcnemar_exact_ln_p(0, 100_000);
    assert!((ln_p - (-99_999.0 * std::f64::consts::LN_2)).abs() < 1e-9, "{ln_p}");
}

#[test]
fn mcnemar_counts_discordant_pairs_of_paired_samples() {
    let s = |task: &'static str, repeat, value| Sample { task, repeat, value };
    // Pairs (baseline, candidate): a/0 (1,1), a/1 (1,0), b/0 (0,1), c/0 (0,1), c/1 (0,0);
    // a/2 has no candidate and d/0 no baseline.
    let baseline =
        [s("a", 0, true), s("a", 1, true), s("a", 2, true), s("b", 0, false), s("c", 0, false), s("c", 1, false)];
    let candidate =
        [s("c", 1, false), s("c", 0, true), s("b", 0, true), s("a", 1, false), s("a", 0, true), s("d", 0, true)];
    let test = mcnemar(&baseline, &candidate).unwrap();
    assert_eq!(
        (test.pairs, test.unpaired_baseline, test.unpaired_candidate, test.both_hit, test.both_miss),
        (5, 1, 1, 1, 1)
    );
    assert_eq!((test.baseline_only, test.candidate_only), (1, 2));
    // n = 3, m = 1: 2·(1 + 3)/8 = 1 exactly.
    assert_eq!(test.p_value, 1.0);
    assert_eq!(test.ln_p_value, 0.0);
}

proptest! {
    #[test]
    fn mcnemar_p_is_a_symmetric_probability(b in 0u64..600, c in 0u64..600) {
        let p = mcnemar_exact_ln_p(b, c).exp();
        prop_assert!(p > 0.0 && p <= 1.0, "{p}");
        prop_assert_eq!(p, mcnemar_exact_ln_p(c, b).exp());
        // A more lopsided split is no less significant.
        if c >= b {
            prop_assert!(mcnemar_exact_ln_p(b, c + 1) <= mcnemar_exact_ln_p(b, c));
        }
    }

    #[test]
    fn mcnemar_ln_p_is_finite_for_large_counts(b in 0u64..100_000, c in 0u64..100_000) {
        let ln_p = mcnemar_exact_ln_p(b, c);
        prop_assert!(ln_p.is_finite() && ln_p <= 0.0);
    }
}

// ---- paired ----

#[test]
fn pairing_keeps_tasks_and_repeats_present_on_both_sides() {
    let s = |task: &'static str, repeat| Sample { task, repeat, value: f64::from(repeat) };
    let baseline = [s("a", 0), s("a", 1), s("a", 2), s("b", 0)];
    let candidate = [s("c", 0), s("a", 3), s("a", 2), s("a", 0)];
    let pairing = pair_samples(&baseline, &candidate).unwrap();
    assert_eq!(pairing.tasks, vec![(&"a", vec![(0.0, 0.0), (2.0, 2.0)])]);
    assert_eq!((pairing.pairs, pairing.unpaired_baseline, pairing.unpaired_candidate), (2, 2, 2));

    assert_eq!(
        pair_samples(&[s("a", 1), s("a", 1)], &candidate),
        Err(StatsError::DuplicateSample { task: "\"a\"".into(), repeat: 1 })
    );
}

#[test]
fn paired_bootstrap_resamples_tasks() {
    // Ten tasks × ten repeats; the baseline never hits, the candidate hits every repeat of five
    // tasks. The difference per resample is X/10 with X ~ Binomial(10, ½), so, as for one
    // variant, the interval is [0.2, 0.8] around 0.5.
    let mut baseline = Vec::new();
    let mut candidate = Vec::new();
    for task in 0..10u32 {
        for repeat in 0..10 {
            baseline.push(Sample { task, repeat, value: 0.0 });
            candidate.push(Sample { task, repeat, value: if task < 5 { 1.0 } else { 0.0 } });
        }
    }
    // An extra candidate repeat has no partner and is left out.
    candidate.push(Sample { task: 0, repeat: 10, value: 1.0 });
    let result = paired_bootstrap(&baseline, &candidate, &config(7)).unwrap();
    assert_eq!((result.tasks, result.pairs, result.unpaired_baseline, result.unpaired_candidate), (10, 100, 0, 1));
    assert_eq!((result.baseline_mean, result.candidate_mean), (Some(0.0), Some(0.5)));
    let difference = result.difference.unwrap();
    assert_eq!((difference.estimate, difference.low, difference.high), (0.5, 0.2, 0.8));

    for threads in [1, 2, 5] {
        let other = paired_bootstrap_on(&baseline, &candidate, &config(7), Some(threads)).unwrap();
        assert_eq!(bits(&other.difference.unwrap()), bits(&difference));
    }
}

#[test]
fn paired_bootstrap_of_a_constant_shift_is_that_shift() {
    let baseline: Vec<Sample<u32, f64>> =
        (0..40).map(|task| Sample { task, repeat: 0, value: f64::from(task % 9) / 8.0 }).collect();
    let candidate: Vec<Sample<u32, f64>> = baseline.iter().map(|s| Sample { value: s.value + 0.125, ..*s }).collect();
    let difference = paired_bootstrap(&baseline, &candidate, &config(2)).unwrap().difference.unwrap();
    for value in [difference.estimate, difference.low, difference.high] {
        assert!((value - 0.125).abs() < 1e-12, "{difference:?}");
    }
}

#[test]
fn paired_bootstrap_without_pairs_has_no_difference() {
    let baseline = [Sample { task: "a", repeat: 0, value: 1.0 }];
    let candidate = [Sample { task: "b", repeat: 0, value: 1.0 }];
    let result = paired_bootstrap(&baseline, &candidate, &config(1)).unwrap();
    assert_eq!((result.pairs, result.unpaired_baseline, result.unpaired_candidate), (0, 1, 1));
    assert_eq!((result.baseline_mean, result.difference), (None, None));
    // No sample on either side: still one (empty) result.
    let none: [Sample<&str, f64>; 0] = [];
    let empty = paired_bootstrap(&none, &none, &config(1)).unwrap();
    assert_eq!(
        (empty.tasks, empty.pairs, empty.unpaired_baseline, empty.baseline_mean, empty.difference),
        (0, 0, 0, None, None)
    );
}

/// Per task, `repeats` samples of `columns` values from `value(task, repeat, column)`.
fn column_samples(
    tasks: u32,
    repeats: u32,
    columns: usize,
    value: impl Fn(u32, u32, usize) -> f64,
) -> Vec<Sample<u32, Vec<f64>>> {
    let mut samples = Vec::new();
    for task in 0..tasks {
        for repeat in 0..repeats {
            samples.push(Sample { task, repeat, value: (0..columns).map(|c| value(task, repeat, c)).collect() });
        }
    }
    samples
}

/// Column `column` of multi-column samples, as single-value samples.
fn column_of(samples: &[Sample<u32, Vec<f64>>], column: usize) -> Vec<Sample<u32, f64>> {
    samples.iter().map(|s| Sample { task: s.task, repeat: s.repeat, value: s.value[column] }).collect()
}

#[test]
fn paired_columns_are_the_single_column_results_on_the_by_task_path() {
    // 150 tasks × 2 repeats of three columns of distinct scores: every table (the joint one, and
    // each column's alone) has more than 64 distinct rows and is resampled by task, so each
    // column's result is, bit for bit, what `paired_bootstrap` gives that column alone.
    let score = |t: u32, r: u32, c: usize| f64::from((t * 7 + r * 3 + c as u32 * 11) % 97) / 96.0;
    let baseline = column_samples(150, 2, 3, score);
    let mut candidate = column_samples(150, 2, 3, |t, r, c| (score(t, r, c) + 0.1 * f64::from(t % 3)).min(1.0));
    candidate.retain(|s| !(s.task == 4 && s.repeat == 1)); // one unpaired baseline sample
    let joint = paired_bootstrap_columns(&baseline, &candidate, &config(4)).unwrap();
    assert_eq!(joint.len(), 3);
    for (column, difference) in joint.iter().enumerate() {
        let alone =
            paired_bootstrap(&column_of(&baseline, column), &column_of(&candidate, column), &config(4)).unwrap();
        assert_eq!((difference.pairs, difference.unpaired_baseline, difference.unpaired_candidate), (299, 1, 0));
        assert_eq!(difference.tasks, 150);
        assert_eq!(bits(&difference.difference.unwrap()), bits(&alone.difference.unwrap()), "column {column}");
        assert_eq!(difference, &alone);
    }
}

#[test]
fn paired_hit_columns_are_grouped_and_match_the_paired_standard_error() {
    // 2,000 tasks, one repeat; per task a first-hit rank for each side decides hit@1, hit@3 and
    // hit@5, so a row (pairs, three baseline hits, three candidate hits) takes at most 4·4 = 16
    // values: grouped. Per column the bootstrap spread of the mean difference is the population
    // standard deviation of the per-task differences d ∈ {−1, 0, 1} over √n.
    let rank = |t: u32, salt: u32| (t.wrapping_mul(2_654_435_761).rotate_left(salt) >> 7) % 9;
    let hits = |t: u32, salt: u32| -> Vec<f64> { [1, 3, 5].map(|k| f64::from(u8::from(rank(t, salt) < k))).to_vec() };
    let baseline = column_samples(2000, 1, 3, |t, _, c| hits(t, 5)[c]);
    let candidate = column_samples(2000, 1, 3, |t, _, c| hits(t, 13)[c]);
    let config = BootstrapConfig { resamples: 4000, ..config(8) };
    let joint = paired_bootstrap_columns(&baseline, &candidate, &config).unwrap();
    for (column, result) in joint.iter().enumerate() {
        let d: Vec<f64> = baseline.iter().zip(&candidate).map(|(b, c)| c.value[column] - b.value[column]).collect();
        let mean = d.iter().sum::<f64>() / 2000.0;
        let standard_error = (d.iter().map(|x| (x - mean).powi(2)).sum::<f64>() / 2000.0).sqrt() / 2000f64.sqrt();
        let difference = result.difference.unwrap();
        assert!((difference.estimate - mean).abs() < 1e-12, "{difference:?} vs {mean}");
        for half_width in [difference.estimate - difference.low, difference.high - difference.estimate] {
            assert!((half_width / (1.96 * standard_error) - 1.0).abs() < 0.08, "column {column}: {difference:?}");
        }
    }
    // hit@k grows with k on both sides, so each side's column means do too.
    let means: Vec<(f64, f64)> = joint.iter().map(|r| (r.baseline_mean.unwrap(), r.candidate_mean.unwrap())).collect();
    assert!(means.windows(2).all(|w| w[0].0 <= w[1].0 && w[0].1 <= w[1].1), "{means:?}");

    // The joint table is grouped; the results do not depend on threads or on input order.
    let reference = paired_columns_on(&baseline, &candidate, <Vec<f64> as AsRef<[f64]>>::as_ref, 0, &config, Some(1));
    for threads in [2, 3] {
        let other =
            paired_columns_on(&baseline, &candidate, <Vec<f64> as AsRef<[f64]>>::as_ref, 0, &config, Some(threads));
        assert_eq!(other, reference, "{threads} threads");
    }
    assert_eq!(reference.unwrap(), joint);
    let (mut b, mut c) = (baseline.clone(), candidate.clone());
    b.reverse();
    c.rotate_left(777);
    assert_eq!(paired_bootstrap_columns(&b, &c, &config).unwrap(), joint);
}

#[test]
fn paired_columns_need_one_value_per_column_in_every_sample() {
    let s = |task: &'static str, repeat, value: Vec<f64>| Sample { task, repeat, value };
    let baseline = [s("a", 0, vec![1.0, 0.0]), s("b", 0, vec![1.0, 1.0])];
    let candidate = [s("a", 0, vec![1.0, 1.0]), s("b", 0, vec![0.0])];
    assert_eq!(
        paired_bootstrap_columns(&baseline, &candidate, &config(1)),
        Err(StatsError::RaggedSample { task: "\"b\"".into(), repeat: 0, expected: 2, found: 1 })
    );
    let nan = [s("a", 0, vec![1.0, f64::NAN])];
    assert!(matches!(paired_bootstrap_columns(&nan, &baseline, &config(1)), Err(StatsError::NotFinite { .. })));
    // No sample: no column. Samples without a pair: every column without a difference.
    let none: [Sample<&str, Vec<f64>>; 0] = [];
    assert_eq!(paired_bootstrap_columns(&none, &none, &config(1)), Ok(vec![]));
    let unpaired = paired_bootstrap_columns(&baseline, &none, &config(1)).unwrap();
    assert_eq!(unpaired.len(), 2);
    assert!(unpaired.iter().all(|r| r.pairs == 0 && r.unpaired_baseline == 2 && r.difference.is_none()));
}

fn samples_strategy() -> impl Strategy<Value = Vec<Sample<u8, f64>>> {
    prop::collection::btree_map((0u8..8, 0u32..4), 0.0..1.0f64, 0..30)
        .prop_map(|samples| samples.into_iter().map(|((task, repeat), value)| Sample { task, repeat, value }).collect())
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(64))]

    #[test]
    fn paired_results_ignore_input_order(
        (baseline, shuffled_baseline) in samples_strategy().prop_flat_map(|s| (Just(s.clone()), Just(s).prop_shuffle())),
        (candidate, shuffled_candidate) in samples_strategy().prop_flat_map(|s| (Just(s.clone()), Just(s).prop_shuffle())),
        seed: u64,
    ) {
        let a = paired_bootstrap(&baseline, &candidate, &quick(seed)).unwrap();
        let b = paired_bootstrap(&shuffled_baseline, &shuffled_candidate, &quick(seed)).unwrap();
        prop_assert_eq!(a.difference.map(|i| bits(&i)), b.difference.map(|i| bits(&i)));
        prop_assert_eq!(&a, &b);
        // Two columns at once (the value and a 0/1 hit): the same, whatever the order.
        let columns = |samples: &[Sample<u8, f64>]| -> Vec<Sample<u8, [f64; 2]>> {
            samples.iter().map(|s| Sample { task: s.task, repeat: s.repeat, value: [s.value, f64::from(u8::from(s.value > 0.5))] }).collect()
        };
        let joint = paired_bootstrap_columns(&columns(&baseline), &columns(&candidate), &quick(seed)).unwrap();
        let shuffled = paired_bootstrap_columns(&columns(&shuffled_baseline), &columns(&shuffled_candidate), &quick(seed)).unwrap();
        prop_assert_eq!(&joint, &shuffled);
        for result in &joint {
            prop_assert_eq!((result.pairs, result.baseline_mean.is_some()), (a.pairs, a.baseline_mean.is_some()));
            if let Some(difference) = result.difference {
                prop_assert!(difference.low <= difference.high);
            }
        }
        // Two columns, or none when there is no sample at all.
        match joint.first() {
            Some(first) => prop_assert_eq!((joint.len(), first.baseline_mean), (2, a.baseline_mean)),
            None => prop_assert!(baseline.is_empty() && candidate.is_empty()),
        }
        if let Some(difference) = a.difference {
            prop_assert!(difference.low <= difference.high);
        }
        let hits = |samples: &[Sample<u8, f64>]| -> Vec<Sample<u8, bool>> {
            samples.iter().map(|s| Sample { task: s.task, repeat: s.repeat, value: s.value > 0.5 }).collect()
        };
        let test = mcnemar(&hits(&baseline), &hits(&candidate)).unwrap();
        prop_assert_eq!(&test, &mcnemar(&hits(&shuffled_baseline), &hits(&shuffled_candidate)).unwrap());
        prop_assert_eq!(test.pairs + test.unpaired_baseline, baseline.len() as u64);
        prop_assert_eq!(test.pairs + test.unpaired_candidate, candidate.len() as u64);
        prop_assert_eq!(test.both_hit + test.both_miss + test.baseline_only + test.candidate_only, test.pairs);
    }
}

// ---- agreement ----

/// Fleiss (1971) as tabulated on Wikipedia's "Fleiss' kappa" page: 10 items, 14 raters, 5
/// categories.
const FLEISS_EXAMPLE: [[u64; 5]; 10] = [
    [0, 0, 0, 0, 14],
    [0, 2, 6, 4, 2],
    [0, 0, 3, 5, 6],
    [0, 3, 9, 2, 0],
    [2, 2, 8, 1, 1],
    [7, 7, 0, 0, 0],
    [3, 2, 6, 3, 0],
    [2, 5, 3, 2, 2],
    [6, 5, 2, 1, 0],
    [0, 2, 2, 3, 7],
];

#[test]
fn fleiss_kappa_of_the_classic_example() {
    // Category totals 20, 28, 39, 21, 32 of T = 140 ratings: Σ C_j² = 4170, so P_e = 4170/19600
    // ≈ 0.2128. Σ n_ij² = 828, so P̄ = (828 − 140)/(140·13) = 688/1820 ≈ 0.3780.
    // κ = (688·140 − 4170·13)/(13·(19600 − 4170)) = 42110/200590 = 4211/20059 ≈ 0.2099.
    let fleiss = fleiss_kappa_counts(&FLEISS_EXAMPLE).unwrap();
    assert_eq!((fleiss.items, fleiss.raters, fleiss.excluded_items), (10, 14, 0));
    assert!((fleiss.observed_agreement.unwrap() - 688.0 / 1820.0).abs() < 1e-15);
    assert!((fleiss.expected_agreement.unwrap() - 4170.0 / 19600.0).abs() < 1e-15);
    assert!((fleiss.kappa.unwrap() - 4211.0 / 20059.0).abs() < 1e-15);
    assert!((fleiss.kappa.unwrap() - 0.210).abs() < 0.0005);

    // The same table as individual votes, with one extra item where a judge's vote failed.
    let mut votes: Vec<Vec<Option<u32>>> = FLEISS_EXAMPLE
        .iter()
        .map(|row| {
            let mut item: Vec<Option<u32>> = Vec::new();
            for (category, &count) in row.iter().enumerate() {
                item.extend(std::iter::repeat_n(Some(category as u32), count as usize));
            }
            item.reverse(); // judge order does not matter to Fleiss' kappa
            item
        })
        .collect();
    let mut failed = vec![Some(0); 14];
    failed[3] = None;
    votes.insert(4, failed);
    let from_votes = fleiss_kappa(&votes).unwrap();
    assert_eq!(from_votes, FleissKappa { excluded_items: 1, ..fleiss });
}

#[test]
fn fleiss_kappa_is_undefined_without_items_spread_or_a_second_rater() {
    let empty: [[Option<u32>; 3]; 0] = [];
    let fleiss = fleiss_kappa(&empty).unwrap();
    assert_eq!((fleiss.items, fleiss.kappa, fleiss.observed_agreement), (0, None, None));
    // Every vote "yes": P_e = 1.
    let unanimous = fleiss_kappa(&[[Some(1); 3]; 4]).unwrap();
    assert_eq!((unanimous.expected_agreement, unanimous.kappa), (Some(1.0), None));
    // Only failed votes: no item is complete.
    let failed = fleiss_kappa(&[[None, Some(1), Some(0)]; 2]).unwrap();
    assert_eq!((failed.items, failed.excluded_items, failed.kappa), (0, 2, None));
    assert_eq!(fleiss_kappa(&[[Some(0)], [Some(1)]]).unwrap().kappa, None);
    // Perfect agreement across two categories: P̄ = 1, P_e = ½, κ = 1.
    assert_eq!(fleiss_kappa(&[[Some(1); 3], [Some(0); 3]]).unwrap().kappa, Some(1.0));
}

#[test]
fn cohen_kappa_of_the_classic_example_and_pairwise_shares() {
    // Wikipedia's "Cohen's kappa" example: 50 items, yes/yes 20, yes/no 5, no/yes 10, no/no 15.
    // p_o = 35/50 = 0.7; A says yes 25 times, B 30: p_e = 0.5·0.6 + 0.5·0.4 = 0.5; κ = 0.4.
    let mut votes = Vec::new();
    for (a, b, count) in [(1, 1, 20), (1, 0, 5), (0, 1, 10), (0, 0, 15)] {
        votes.extend(std::iter::repeat_n(vec![Some(a), Some(b)], count));
    }
    let result = agreement(&votes).unwrap();
    assert_eq!(result.pairs.len(), 1);
    let pair = &result.pairs[0];
    assert_eq!((pair.first, pair.second, pair.items, pair.agreement), (0, 1, 50, Some(0.7)));
    assert!((pair.cohen_kappa.unwrap() - 0.4).abs() < 1e-15);
    assert_eq!(result.mean_pairwise_agreement, Some(0.7));
}

#[test]
fn pairwise_agreement_uses_the_items_both_judges_rated() {
    // Judge 2 fails on item 0. Pair (0,1): items 0, 1, 2, agreeing on 0 and 2 → 2/3. Pair (0,2):
    // items 1, 2, agreeing on neither → 0. Pair (1,2): items 1, 2, agreeing on 1 → ½.
    let votes = [[Some(1), Some(1), None], [Some(0), Some(1), Some(1)], [Some(1), Some(1), Some(0)]];
    let result = agreement(&votes).unwrap();
    let shares: Vec<(usize, usize, u64, Option<f64>)> =
        result.pairs.iter().map(|p| (p.first, p.second, p.items, p.agreement)).collect();
    assert_eq!(shares, vec![(0, 1, 3, Some(2.0 / 3.0)), (0, 2, 2, Some(0.0)), (1, 2, 2, Some(0.5))]);
    assert!((result.mean_pairwise_agreement.unwrap() - (2.0 / 3.0 + 0.5) / 3.0).abs() < 1e-15);
    assert_eq!((result.fleiss.items, result.fleiss.excluded_items), (2, 1));
    // Cohen's κ = (agree·N − Σ a_j·b_j)/(N² − Σ a_j·b_j). Pair (0,1): judge 0 says yes 2, no 1,
    // judge 1 yes 3: (2·3 − 6)/(9 − 6) = 0. Pair (0,2): both yes 1, no 1: (0 − 2)/(4 − 2) = −1.
    // Pair (1,2): judge 1 yes 2, judge 2 yes 1, no 1: (1·2 − 2)/(4 − 2) = 0.
    let kappas: Vec<Option<f64>> = result.pairs.iter().map(|p| p.cohen_kappa).collect();
    assert_eq!(kappas, vec![Some(0.0), Some(-1.0), Some(0.0)]);

    assert_eq!(
        agreement(&[vec![Some(1), Some(0)], vec![Some(1)]]),
        Err(StatsError::RaggedVotes { item: 1, expected: 2, found: 1 })
    );
    assert_eq!(
        fleiss_kappa_counts(&[vec![1, 2], vec![2, 2]]),
        Err(StatsError::RaggedCounts { item: 1, expected: 3, found: 4 })
    );
}

fn votes_strategy() -> impl Strategy<Value = Vec<Vec<Option<u32>>>> {
    (2usize..6).prop_flat_map(|judges| {
        let vote = prop_oneof![1 => Just(None), 6 => (0u32..3).prop_map(Some)];
        prop::collection::vec(prop::collection::vec(vote, judges), 0..40)
    })
}

proptest! {
    #[test]
    fn kappas_are_at_most_one_and_shares_are_probabilities(votes in votes_strategy()) {
        let result = agreement(&votes).unwrap();
        if let Some(kappa) = result.fleiss.kappa {
            prop_assert!(kappa <= 1.0, "{kappa}");
        }
        prop_assert_eq!(result.fleiss.items + result.fleiss.excluded_items, votes.len() as u64);
        for pair in &result.pairs {
            if let Some(share) = pair.agreement {
                prop_assert!((0.0..=1.0).contains(&share));
            }
            if let Some(kappa) = pair.cohen_kappa {
                prop_assert!((-1.0..=1.0).contains(&kappa), "{kappa}");
            }
        }
    }

    #[test]
    fn fleiss_kappa_ignores_item_order(votes in votes_strategy().prop_flat_map(|v| Just(v).prop_shuffle()), seed: u64) {
        let mut reversed = votes.clone();
        reversed.rotate_left(if votes.is_empty() { 0 } else { (seed as usize) % votes.len() });
        reversed.reverse();
        prop_assert_eq!(fleiss_kappa(&votes).unwrap(), fleiss_kappa(&reversed).unwrap());
    }
}
