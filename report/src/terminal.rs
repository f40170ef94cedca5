//! The report in brief, for a terminal.

use std::fmt::Write as _;

use lightsout_api::ScoringProtocol;
use lightsout_core::summary::RunSummary;

/// One line per variant: trials, recall@k (the interval of the largest k), the composite,
/// agent USD per trial, tokens, latency and findings; the scripted-model warning first.
pub fn terminal_table(summary: &RunSummary) -> String {
    let mut out = String::new();
    if summary.scripted_models {
        out.push_str("SCRIPTED MODELS: these numbers come from the built-in scripted server, not from real models.\n");
    }
    let _ = writeln!(
        out,
        "run {} · {} · {} tasks · {} trials ({} ok, {} pending) · {:.4} USD",
        summary.run.name,
        summary.protocol.as_str(),
        summary.dataset.tasks,
        summary.trials.planned,
        summary.trials.ok,
        summary.trials.pending,
        summary.spend.total_usd
    );
    let composite = summary.protocol == ScoringProtocol::SwePrBench;
    let last_k = summary.k.last().map(|k| k.to_string());
    let mut header = vec!["variant".to_string(), "ok/fail/infra".into()];
    header.extend(summary.k.iter().map(|k| format!("R@{k}")));
    if let Some(k) = &last_k {
        header.push(format!("R@{k} 95% CI"));
    }
    if composite {
        header.push("composite".into());
    }
    header.extend(["USD/trial", "tok agent", "tok judge", "p50/p95 s", "findings"].map(String::from));
    let mut rows = vec![header];
    for v in &summary.variants {
        let t = &v.trials;
        let mut row = vec![
            v.name.clone(),
            format!("{}/{}/{}", t.ok, t.agent_failed + t.timed_out + t.budget_exceeded, t.infra_failed),
        ];
        for k in &summary.k {
            row.push(v.recall.get(&k.to_string()).map_or("-".into(), |r| format!("{r:.2}")));
        }
        if let Some(k) = &last_k {
            row.push(v.recall_interval.get(k).map_or("-".into(), |i| format!("[{:.2}, {:.2}]", i.low, i.high)));
        }
        if composite {
            row.push(
                v.swe_prbench.as_ref().filter(|s| s.records > 0).map_or("-".into(), |s| format!("{:.3}", s.composite)),
            );
        }
        row.push(v.agent_usd_per_trial.map_or("-".into(), |c| format!("{c:.4}")));
        row.push(tokens(v.agent_tokens.total_tokens()));
        row.push(tokens(v.judge_tokens.total_tokens()));
        row.push(
            v.latency_ms.map_or("-".into(), |l| format!("{:.1}/{:.1}", l.p50 as f64 / 1000.0, l.p95 as f64 / 1000.0)),
        );
        row.push(v.findings_per_review.map_or("-".into(), |f| format!("{f:.1}")));
        rows.push(row);
    }
    out.push_str(&aligned_table(&rows));
    out
}

/// A token count in brief: 1234 → `1.2k`, 3456789 → `3.5M`.
pub(super) fn tokens(n: u64) -> String {
    match n {
        0..=999 => n.to_string(),
        1_000..=999_999 => format!("{:.1}k", n as f64 / 1e3),
        _ => format!("{:.1}M", n as f64 / 1e6),
    }
}

/// Rows of cells as a plain-text table: the first column left-aligned, the others right-aligned,
/// two spaces apart, one line per row (the terminal tables of `lightsout run` and `report`).
pub fn aligned_table(rows: &[Vec<String>]) -> String {
    let columns = rows.iter().map(Vec::len).max().unwrap_or(0);
    let widths: Vec<usize> = (0..columns)
        .map(|c| rows.iter().filter_map(|r| r.get(c)).map(|cell| cell.chars().count()).max().unwrap_or(0))
        .collect();
    let mut out = String::new();
    for row in rows {
        let cells: Vec<String> = row
            .iter()
            .enumerate()
            .map(
                |(c, cell)| {
                    if c == 0 {
                        format!("{cell:<w$}", w = widths[c])
                    } else {
                        format!("{cell:>w$}", w = widths[c])
                    }
                },
            )
            .collect();
        out.push_str(cells.join("  ").trim_end());
        out.push('\n');
    }
    out
}
