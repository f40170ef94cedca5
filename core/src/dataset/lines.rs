//! Reading JSONL: one record a line, a malformed line (bad JSON, a bad field, invalid UTF-8)
//! reported with its file and line number and skipped, duplicates refused.

use std::collections::HashSet;
use std::fmt;
use std::io::BufRead;
use std::path::Path;

use serde::de::DeserializeOwned;

use super::{Dataset, LoadedTask};

/// A line of a dataset file that could not be used.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct LineError {
    pub file: String,
    pub line: usize,
    pub message: String,
}

impl fmt::Display for LineError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}:{}: {}", self.file, self.line, self.message)
    }
}

/// Parses each non-blank line as `R` and converts it; errors name the field where serde can.
pub(super) fn read_records<R: DeserializeOwned>(
    reader: impl BufRead,
    path: &Path,
    mut convert: impl FnMut(R) -> Result<LoadedTask, String>,
) -> std::io::Result<Dataset> {
    let file = path.display().to_string();
    let mut dataset = Dataset::default();
    let mut seen = HashSet::new();
    // Split on bytes, not with `lines()`: one line of invalid UTF-8 is that line's problem, not
    // the whole file's.
    for (index, line) in reader.split(b'\n').enumerate() {
        let line = line?;
        let error = |message: String| LineError { file: file.clone(), line: index + 1, message };
        let line = match std::str::from_utf8(&line) {
            Ok(line) => line,
            Err(e) => {
                dataset.skipped.push(error(format!("not valid UTF-8 (byte {} of the line)", e.valid_up_to() + 1)));
                continue;
            }
        };
        if line.trim().is_empty() {
            continue;
        }
        let mut json = serde_json::Deserializer::from_str(line);
        let record: R = match serde_path_to_error::deserialize(&mut json) {
            Ok(record) => record,
            Err(e) => {
                let field = e.path().to_string();
                let message =
                    if field == "." { e.inner().to_string() } else { format!("field {field}: {}", e.inner()) };
                dataset.skipped.push(error(message));
                continue;
            }
        };
        match convert(record) {
            Ok(task) if !seen.insert(task.task.id.clone()) => {
                dataset.skipped.push(error(format!("duplicate task_id {:?}", task.task.id)));
            }
            Ok(task) => dataset.tasks.push(task),
            Err(message) => dataset.skipped.push(error(message)),
        }
    }
    Ok(dataset)
}
