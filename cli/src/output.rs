//! What the terminal shows of a run.

use std::fmt::Write;
use std::io::Write as _;

use lightsout_api::ScoringProtocol;
use lightsout_core::summary::RunSummary;

/// A per-variant table: outcomes, recall@k with its interval, the SWE-PRBench composite, judge
/// agreement, findings per review, cost and latency; the run's notices first.
pub fn summary_table(summary: &RunSummary) -> String {
    let mut out = String::new();
    if summary.scripted_models {
        out.push_str("SCRIPTED MODELS: answers came from the built-in scripted model server, not from real models.\n");
    }
    for notice in &summary.notices {
        let _ = writeln!(out, "NOTE: {notice}");
    }
    let composite = summary.protocol == ScoringProtocol::SwePrBench;
    let recall_headers: Vec<String> = summary.k.iter().map(|k| format!("R@{k} [95% CI]")).collect();
    let mut rows = vec![{
        let mut header = vec!["variant".to_string(), "ok".into(), "failed".into(), "infra".into(), "pending".into()];
        header.extend(recall_headers.iter().cloned());
        if composite {
            header.push("composite [95% CI]".into());
        }
        header.extend(["kappa".to_string(), "findings".into(), "USD".into(), "p50 s".into()]);
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
            let k = k.to_string();
            row.push(match (v.recall.get(&k), v.recall_interval.get(&k)) {
                (Some(r), Some(i)) => format!("{r:.2} [{:.2},{:.2}]", i.low, i.high),
                (Some(r), None) => format!("{r:.2}"),
                _ => "-".into(),
            });
        }
        if composite {
            let score = v.swe_prbench.as_ref().filter(|s| s.records > 0);
            row.push(match score {
                Some(s) => match &s.composite_interval {
                    Some(i) => format!("{:.3} [{:.3},{:.3}]", s.composite, i.low, i.high),
                    None => format!("{:.3}", s.composite),
                },
                None => "-".into(),
            });
        }
        let kappa = v.judge_agreement.as_ref().and_then(|a| a.fleiss.kappa);
        row.push(kappa.map(|k| format!("{k:.2}")).unwrap_or_else(|| "-".into()));
        row.push(v.findings_per_review.map(|f| format!("{f:.1}")).unwrap_or_else(|| "-".into()));
        row.push(format!("{:.4}", v.spend.total_usd));
        row.push(v.latency_ms.map(|l| format!("{:.1}", l.p50 as f64 / 1000.0)).unwrap_or_else(|| "-".into()));
        rows.push(row);
    }
    out.push_str(&lightsout_report::terminal::aligned_table(&rows));
    let s = &summary.spend;
    let _ = writeln!(
        out,
        "trials: {} planned, {} pending, {} infra-failed, {} unjudged; spend {:.4} USD (agents {:.4}, judges {:.4}){}",
        summary.trials.planned,
        summary.trials.pending,
        summary.trials.infra_failed,
        summary.trials.unjudged,
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

/// Writes `text` to standard output. A reader that has gone away (`lightsout validate | head`)
/// is not an error: the rest of the output is dropped and the command ends with its own exit
/// status, quietly (Rust's `print!` would panic). Any other write error names standard output.
pub fn print(text: impl AsRef<str>) -> anyhow::Result<()> {
    let mut stdout = std::io::stdout().lock();
    match stdout.write_all(text.as_ref().as_bytes()).and_then(|()| stdout.flush()) {
        Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe => Ok(()),
        result => Ok(result.map_err(|e| anyhow::anyhow!("writing to standard output: {e}"))?),
    }
}
