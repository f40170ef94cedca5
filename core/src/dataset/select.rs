//! Choosing a run's tasks: the filter, then a seeded sample.

use rand::seq::index;
use rand::SeedableRng;
use rand_chacha::ChaCha8Rng;

use super::LoadedTask;
use lightsout_api::{SampleSpec, TaskFilter};

/// Keeps the tasks that pass every non-empty filter list, then draws `sample.size` of them.
///
/// The result is sorted by task id and depends only on the set of tasks, the filter and the
/// seed, never on the order of lines in the file, so a sample is reproducible from its spec.
pub fn select_tasks(mut tasks: Vec<LoadedTask>, filter: &TaskFilter, sample: Option<&SampleSpec>) -> Vec<LoadedTask> {
    tasks.retain(|t| matches(filter, &t.task));
    tasks.sort_by(|a, b| a.task.id.cmp(&b.task.id));
    let Some(sample) = sample else { return tasks };
    let n = usize::try_from(sample.size).unwrap_or(usize::MAX);
    if n >= tasks.len() {
        return tasks;
    }
    let mut rng = ChaCha8Rng::seed_from_u64(sample.seed as u64);
    let mut chosen = index::sample(&mut rng, tasks.len(), n).into_vec();
    chosen.sort_unstable();
    let mut chosen = chosen.into_iter().peekable();
    let mut kept = Vec::with_capacity(n);
    for (i, task) in tasks.into_iter().enumerate() {
        if chosen.peek() == Some(&i) {
            chosen.next();
            kept.push(task);
        }
    }
    kept
}

fn matches(filter: &TaskFilter, task: &super::Task) -> bool {
    let any = |list: &[String], value: &Option<String>| {
        list.is_empty() || value.as_ref().is_some_and(|v| list.iter().any(|item| item.eq_ignore_ascii_case(v)))
    };
    (filter.ids.is_empty() || filter.ids.contains(&task.id))
        && any(&filter.languages, &task.language)
        && any(&filter.difficulties, &task.difficulty)
        && (filter.tracks.is_empty() || task.track.is_some_and(|t| filter.tracks.contains(&t)))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::dataset::{Bug, GroundTruth, Task};
    use lightsout_api::Track;

    fn task(id: &str, language: &str, track: Track) -> LoadedTask {
        LoadedTask {
            task: Task {
                id: id.into(),
                repo: "r".into(),
                image: None,
                language: Some(language.into()),
                difficulty: None,
                track: Some(track),
                pr_number: None,
                pr_type: None,
                title: id.into(),
                description: String::new(),
                diff: "diff".into(),
                base_commit: None,
                head_commit: None,
                contexts: Default::default(),
            },
            truth: GroundTruth::Bugs {
                bugs: vec![Bug { description: "b".into(), file: None, line: None, source: None }],
            },
        }
    }

    fn ids(tasks: &[LoadedTask]) -> Vec<&str> {
        tasks.iter().map(|t| t.task.id.as_str()).collect()
    }

    fn many() -> Vec<LoadedTask> {
        (0..50).map(|i| task(&format!("t{i:02}"), if i % 2 == 0 { "python" } else { "go" }, Track::PreMerge)).collect()
    }

    #[test]
    fn filters_combine() {
        let tasks = vec![
            task("a", "python", Track::PreMerge),
            task("b", "go", Track::PreMerge),
            task("c", "python", Track::PostMerge),
        ];
        let filter =
            TaskFilter { languages: vec!["Python".into()], tracks: vec![Track::PreMerge], ..Default::default() };
        assert_eq!(ids(&select_tasks(tasks, &filter, None)), vec!["a"]);
    }

    #[test]
    fn a_sample_is_reproducible_and_independent_of_file_order() {
        let sample = SampleSpec { size: 7, seed: 42 };
        let first = select_tasks(many(), &TaskFilter::default(), Some(&sample));
        let mut reversed = many();
        reversed.reverse();
        let second = select_tasks(reversed, &TaskFilter::default(), Some(&sample));
        assert_eq!(first.len(), 7);
        assert_eq!(ids(&first), ids(&second));
        let other_seed = select_tasks(many(), &TaskFilter::default(), Some(&SampleSpec { size: 7, seed: 43 }));
        assert_ne!(ids(&first), ids(&other_seed));
    }

    #[test]
    fn a_sample_larger_than_the_dataset_keeps_everything() {
        let all = select_tasks(many(), &TaskFilter::default(), Some(&SampleSpec { size: 500, seed: 1 }));
        assert_eq!(all.len(), 50);
    }
}
