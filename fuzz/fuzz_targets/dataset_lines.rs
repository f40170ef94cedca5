//! Dataset lines in every format (CRBugBench, SWE-PRBench, Lightsout's own JSONL): any bytes,
//! invalid UTF-8 included, are read line by line; a line is a task or a located error, never a
//! panic, and no task id is one that could leave its directory when joined into a path.
#![no_main]

use std::path::Path;

use libfuzzer_sys::fuzz_target;
use lightsout_api::DatasetFormat;
use lightsout_core::dataset::{read_lines, safe_path_component};

fuzz_target!(|data: &[u8]| {
    let Some((selector, lines)) = data.split_first() else { return };
    let format = match selector % 3 {
        0 => DatasetFormat::CrBugBench,
        1 => DatasetFormat::SwePrBench,
        _ => DatasetFormat::Jsonl,
    };
    // No annotation or context files exist beside this path: only the lines are read.
    let path = Path::new("/nonexistent/lightsout-fuzz/tasks.jsonl");
    let dataset = read_lines(format, lines, path).expect("reading from memory cannot fail");
    let line_count = lines.split(|b| *b == b'\n').count();
    for task in &dataset.tasks {
        assert!(safe_path_component(&task.task.id).is_ok(), "task id {:?} was accepted", task.task.id);
    }
    for error in &dataset.skipped {
        assert!(error.line >= 1 && error.line <= line_count, "{error} is outside 1..={line_count}");
    }
});
