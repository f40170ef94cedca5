//! What the terminal shows of a run.

use std::fmt::Write;

use lightsout_core::summary::RunSummary;

/// A per-variant table: outcomes, recall@k, findings per review, cost and latency.
pub fn summary_table(summary: &RunSummary) -> String {
    let mut out = String::new();
    if summary.scripted_models {
        out.push_str("SCRIPTED MODELS: answers came from the built-in scripted model server, not from real models.\n");
    }
    let recall_headers: Vec<String> = summary.k.iter().map(|k| format!("R@{k}")).collect();
    let mut rows = vec![{
        let mut header = vec!["variant".to_string(), "ok".into(), "failed".into(), "infra".into(), "pending".into()];
        header.extend(recall_headers.iter().cloned());
        header.extend(["findings".to_string(), "USD".into(), "p50 s".into()]);
        header
    }];
    for v in &summary.variants {
        let t = &v.trials;
        let mut row = vec![
            v.name.clone(),
            t.ok.to_string(),
            (t.agent_failed + t.timed_out + t.budget_exceeded).to_string(),
            t.infra_failed.to_string(),
            t.pending.to_string(),
        ];
        for k in &summary.k {
            row.push(v.recall.get(&k.to_string()).map(|r| format!("{r:.2}")).unwrap_or_else(|| "-".into()));
        }
        row.push(v.findings_per_review.map(|f| format!("{f:.1}")).unwrap_or_else(|| "-".into()));
        row.push(format!("{:.4}", v.spend.total_usd));
        row.push(v.latency_ms.map(|l| format!("{:.1}", l.p50 as f64 / 1000.0)).unwrap_or_else(|| "-".into()));
        rows.push(row);
    }
    let widths: Vec<usize> =
        (0..rows[0].len()).map(|c| rows.iter().map(|r| r[c].chars().count()).max().unwrap_or(0)).collect();
    for row in &rows {
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
        let _ = writeln!(out, "{}", cells.join("  ").trim_end());
    }
    let s = &summary.spend;
    let _ = writeln!(
        out,
        "trials: {} planned, {} pending; spend {:.4} USD (agents {:.4}, judges {:.4}){}",
        summary.trials.planned,
        summary.trials.pending,
        s.total_usd,
        s.agent_usd,
        s.judge_usd,
        if s.unpriced_calls > 0 {
            format!("; {} calls to models with no price are not included", s.unpriced_calls)
        } else {
            String::new()
        }
    );
    out
}
