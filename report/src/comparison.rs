//! The report's "What changed" section: the run, as candidate, against its baseline, exactly as
//! the comparison ([`RunComparison`], `comparison.json`) gives it — the verdict, the recall@k and
//! composite changes with their intervals and McNemar p-values, and what each run cost.

use std::fmt::Write as _;

use super::escape;
use crate::compare::{Delta, RunComparison, VariantComparison, Verdict};
use lightsout_stats::Interval;

/// CSS of the section, appended to the report's.
pub(super) const CSS: &str = r#"
.verdict { border-radius:8px; padding:14px 20px; margin:0 0 14px; font-size:15px; border:1px solid; }
.verdict strong { font-size:20px; display:block; margin-bottom:2px; letter-spacing:.02em; }
.verdict.v-Regressed { background:#fbe4e2; border-color:#e0a39d; color:#7d1a12; }
.verdict.v-Improved { background:#e3f2e6; border-color:#9fcfaa; color:#1e5a2b; }
.verdict.v-NoSignificantChange { background:#eef1f5; border-color:#cfd5de; color:#1d2330; }
.b-Regressed { background:#fbe4e2; color:#7d1a12; } .b-Improved { background:#e3f2e6; color:#1e5a2b; }
.b-NoSignificantChange { background:#eef1f5; color:#3a4252; }
.up { color:#1e6b2e; } .down { color:#a0281d; }
#change-table td.name { white-space:normal; max-width:280px; text-align:left; }
"#;

fn verdict_colour(verdict: Verdict) -> &'static str {
    match verdict {
        Verdict::Regressed => "#c0392b",
        Verdict::Improved => "#2e8540",
        Verdict::NoSignificantChange => "#6b7385",
    }
}

fn p_value(p: f64) -> String {
    if p < 0.001 {
        format!("{p:.1e}")
    } else {
        format!("{p:.3}")
    }
}

/// A cost's `base → cand (±Δ)`, each shown by `show` (`signed` for the change), a dash where a
/// side is missing; a rise is marked worse.
fn cost_cell(d: &Delta, show: impl Fn(f64, bool) -> String) -> String {
    let side = |v: Option<f64>| v.map_or("–".to_string(), |v| show(v, false));
    let change = d.delta.map_or(String::new(), |delta| {
        let class = if delta > 0.0 {
            " class=\"down\""
        } else if delta < 0.0 {
            " class=\"up\""
        } else {
            ""
        };
        format!("<br><span{class}>{}</span>", show(delta, true))
    });
    format!("{} → {}{change}", side(d.baseline), side(d.candidate))
}

fn usd(value: f64, signed: bool) -> String {
    if signed {
        format!("{value:+.4}")
    } else {
        format!("{value:.4}")
    }
}

/// Milliseconds as ms, s or min, whichever reads best.
fn duration(ms: f64, signed: bool) -> String {
    let sign = if signed && ms >= 0.0 { "+" } else { "" };
    match ms.abs() {
        a if a < 1000.0 => format!("{sign}{ms:.0} ms"),
        a if a < 120_000.0 => format!("{sign}{:.1} s", ms / 1000.0),
        _ => format!("{sign}{:.1} min", ms / 60_000.0),
    }
}

fn interval_cell(mean: (Option<f64>, Option<f64>), difference: Option<&Interval>, digits: usize) -> String {
    let side = |v: Option<f64>| v.map_or("–".to_string(), |v| format!("{v:.digits$}"));
    let change = difference.map_or(String::new(), |d| {
        format!(
            "<br><b>{:+.digits$}</b> <span class=\"ci\">[{:+.digits$}, {:+.digits$}]</span>",
            d.estimate, d.low, d.high
        )
    });
    format!("{} → {}{change}", side(mean.0), side(mean.1))
}

/// The section, placed right after the header: the first thing a reader of a compared run sees.
pub(super) fn what_changed(out: &mut String, c: &RunComparison) {
    let k = c.settings.k.unwrap_or_default();
    let _ = writeln!(out, "<h2 id=\"what-changed\">What changed since {}</h2>", escape(&c.baseline.name));
    let _ = writeln!(
        out,
        "<div class=\"verdict v-{v}\" id=\"verdict\" role=\"status\"><strong>{v}</strong>\
         {} against baseline <b>{}</b> at recall@{k} (McNemar α = {}, smallest change counted {}), trials paired by task \
         and repeat. <span class=\"small\">Baseline spec {} · {}</span></div>",
        match c.verdict {
            Verdict::Regressed => "At least one variant catches fewer bugs",
            Verdict::Improved => "At least one variant catches more bugs, none fewer",
            Verdict::NoSignificantChange => "No variant changed significantly",
        },
        escape(&c.baseline.name),
        c.settings.alpha,
        c.settings.min_delta,
        escape(c.baseline.spec_hash.get(..12).unwrap_or(&c.baseline.spec_hash)),
        escape(&c.baseline.uri),
        v = c.verdict.as_str(),
    );
    if !c.notices.is_empty() {
        out.push_str("<div class=\"notices\"><b>About this comparison</b><ul>");
        for notice in &c.notices {
            let _ = write!(out, "<li>{}</li>", escape(notice));
        }
        out.push_str("</ul></div>\n");
    }
    let spend = &c.spend_usd;
    let relative = match (spend.delta, spend.baseline) {
        (Some(d), Some(b)) if b > 0.0 => format!(" ({:+.1}%)", d / b * 100.0),
        _ => String::new(),
    };
    let regressed = c.variants.iter().filter(|v| v.verdict == Verdict::Regressed).count();
    let improved = c.variants.iter().filter(|v| v.verdict == Verdict::Improved).count();
    let _ = writeln!(
        out,
        "<div class=\"cards\">\
         <div class=\"card\"><div class=\"l\">Run spend, baseline → this run</div><div class=\"n\">{} → {} USD</div><div class=\"d\">{}{relative}, agents and judges</div></div>\
         <div class=\"card\"><div class=\"l\">Variants compared</div><div class=\"n\">{}</div><div class=\"d\">{regressed} regressed · {improved} improved · {} added · {} removed</div></div>\
         </div>",
        spend.baseline.map_or("–".into(), |v| format!("{v:.4}")),
        spend.candidate.map_or("–".into(), |v| format!("{v:.4}")),
        spend.delta.map_or("–".into(), |d| format!("{d:+.4} USD")),
        c.variants.len(),
        c.added.len(),
        c.removed.len(),
    );
    change_chart(out, c);
    change_table(out, c);
    for (names, what) in
        [(&c.added, "Added (this run only, not compared)"), (&c.removed, "Removed (baseline only, not compared)")]
    {
        if !names.is_empty() {
            let list: Vec<String> = names.iter().map(|n| escape(n)).collect();
            let _ = writeln!(out, "<p class=\"small\"><b>{what}:</b> {}</p>", list.join(", "));
        }
    }
}

/// What a variant's row of the chart plots: the recall@k change at the headline k, or the
/// composite change of a composite-only variant.
fn plotted(v: &VariantComparison, k: u32) -> Option<(Interval, &'static str)> {
    if let Some(d) = v.by_k.get(&k.to_string()).and_then(|at| at.recall_difference.difference) {
        return Some((d, "recall"));
    }
    v.composite.as_ref().and_then(|c| c.difference).map(|d| (d, "composite"))
}

/// A forest plot: one row per variant, the change (this run − baseline) with its interval,
/// zero marked and the band of changes too small to count shaded.
fn change_chart(out: &mut String, c: &RunComparison) {
    const W: f64 = 1000.0;
    const LABEL: f64 = 330.0;
    const RIGHT: f64 = 24.0;
    const TOP: f64 = 14.0;
    const ROW: f64 = 30.0;
    const BOTTOM: f64 = 44.0;
    let k = c.settings.k.unwrap_or_default();
    let rows: Vec<(&VariantComparison, Option<(Interval, &str)>)> =
        c.variants.iter().map(|v| (v, plotted(v, k))).collect();
    let reach = rows
        .iter()
        .filter_map(|(_, p)| p.map(|(d, _)| d.low.abs().max(d.high.abs()).max(d.estimate.abs())))
        .fold(c.settings.min_delta, f64::max);
    // A symmetric axis in steps of 0.05, at least ±0.1, at most ±1.
    let half = ((reach * 1.1 / 0.05).ceil() * 0.05).clamp(0.1, 1.0);
    let height = TOP + rows.len() as f64 * ROW + BOTTOM;
    let plot = W - LABEL - RIGHT;
    let x = |v: f64| LABEL + (v.clamp(-half, half) + half) / (2.0 * half) * plot;
    let _ = write!(
        out,
        "<div class=\"panel chart\"><h3>Change in recall@{k} per variant (this run − baseline), {:.0}% paired bootstrap intervals</h3>\
         <svg id=\"chart-change\" class=\"chart-svg\" role=\"img\" aria-label=\"change in recall per variant\" \
         viewBox=\"0 0 {W} {height}\" width=\"{W}\" height=\"{height}\">",
        c.bootstrap.confidence * 100.0
    );
    let bottom = TOP + rows.len() as f64 * ROW;
    if c.settings.min_delta > 0.0 {
        let (x0, x1) = (x(-c.settings.min_delta), x(c.settings.min_delta));
        let _ = write!(
            out,
            "<rect x=\"{x0:.1}\" y=\"{TOP}\" width=\"{:.1}\" height=\"{:.1}\" fill=\"#eef1f5\"><title>changes within ±{} do not count</title></rect>",
            x1 - x0,
            bottom - TOP,
            c.settings.min_delta
        );
    }
    for i in 0..=4 {
        let value = -half + i as f64 * half / 2.0;
        let xv = x(value);
        let _ = write!(
            out,
            "<line x1=\"{xv:.1}\" x2=\"{xv:.1}\" y1=\"{TOP}\" y2=\"{bottom:.1}\" stroke=\"{}\"/>\
             <text x=\"{xv:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\" fill=\"#5b6475\">{value:+.2}</text>",
            if i == 2 { "#1d2330" } else { "#e3e6ec" },
            bottom + 16.0
        );
    }
    let _ = write!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\" fill=\"#1d2330\">← fewer bugs caught · more bugs caught →</text>",
        LABEL + plot / 2.0,
        height - 6.0
    );
    for (i, (v, point)) in rows.iter().enumerate() {
        let y = TOP + (i as f64 + 0.5) * ROW;
        let label: String = if v.variant.chars().count() > 46 {
            v.variant.chars().take(45).chain(['…']).collect()
        } else {
            v.variant.clone()
        };
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"end\" fill=\"#1d2330\">{}<title>{}</title></text>",
            LABEL - 10.0,
            y + 4.0,
            escape(&label),
            escape(&v.variant)
        );
        let colour = verdict_colour(v.verdict);
        if i > 0 {
            let _ = write!(
                out,
                "<line x1=\"12\" x2=\"{:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#eef1f5\"/>",
                W - RIGHT,
                y - ROW / 2.0,
                y - ROW / 2.0
            );
        }
        match point {
            Some((d, what)) => {
                let _ = write!(
                    out,
                    "<g class=\"change\"><title>{}: {what} {:+.3} [{:+.3}, {:+.3}], {}</title>\
                     <line x1=\"{:.1}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"{colour}\" stroke-width=\"2.5\"/>\
                     <circle cx=\"{:.1}\" cy=\"{y:.1}\" r=\"5.5\" fill=\"{colour}\" stroke=\"#fff\" stroke-width=\"1\"/></g>",
                    escape(&v.variant),
                    d.estimate,
                    d.low,
                    d.high,
                    v.verdict,
                    x(d.low),
                    x(d.high),
                    x(d.estimate),
                );
            }
            None => {
                let _ = write!(
                    out,
                    "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" fill=\"#5b6475\">nothing paired</text>",
                    LABEL + 8.0,
                    y + 4.0
                );
            }
        }
    }
    out.push_str("</svg><p class=\"note\">Each row: the change with its interval, coloured by the variant's verdict \
         (red regressed, green improved, grey no significant change). A composite-only variant plots its composite change.");
    if c.settings.min_delta > 0.0 {
        out.push_str(" The shaded band holds changes too small to count.");
    }
    out.push_str("</p></div>\n");
}

fn change_table(out: &mut String, c: &RunComparison) {
    let composite = c.variants.iter().any(|v| v.composite.is_some());
    let confidence = c.bootstrap.confidence * 100.0;
    out.push_str("<div class=\"panel\"><table id=\"change-table\"><thead><tr><th class=\"l\">variant</th><th class=\"l\">verdict</th><th>pairs<br><span class=\"ci\">tasks</span></th>");
    for k in &c.k {
        let _ = write!(
            out,
            "<th>recall@{k}<br><span class=\"ci\">baseline → this run<br>Δ [{confidence:.0}% CI]<br>McNemar p, hits lost / gained</span></th>"
        );
    }
    if composite {
        let _ = write!(out, "<th>composite<br><span class=\"ci\">Δ [{confidence:.0}% CI]</span></th>");
    }
    out.push_str(
        "<th>USD / trial<br><span class=\"ci\">agent</span></th><th>spend USD<br><span class=\"ci\">agent + judge</span></th>\
         <th>latency p50</th><th>latency p95</th><th class=\"l\">why</th></tr></thead><tbody>\n",
    );
    for v in &c.variants {
        let _ = write!(
            out,
            "<tr><td class=\"name\"><b>{}</b></td><td class=\"l\"><span class=\"badge b-{}\">{}</span></td><td>{}<br><span class=\"ci\">{}</span></td>",
            // Long names break after a slash, not inside a model's name.
            escape(&v.variant).replace('/', "/<wbr>"),
            v.verdict.as_str(),
            v.verdict.as_str(),
            v.pairs,
            v.tasks
        );
        for k in &c.k {
            match v.by_k.get(&k.to_string()) {
                Some(at) => {
                    let d = &at.recall_difference;
                    let m = &at.mcnemar;
                    let _ = write!(
                        out,
                        "<td>{}<br><span class=\"ci\">p {} · {} / {}</span></td>",
                        interval_cell((d.baseline_mean, d.candidate_mean), d.difference.as_ref(), 2),
                        p_value(m.p_value),
                        m.baseline_only,
                        m.candidate_only
                    );
                }
                None => out.push_str("<td>–</td>"),
            }
        }
        if composite {
            let cell = v
                .composite
                .as_ref()
                .map_or("–".to_string(), |cc| interval_cell((cc.baseline, cc.candidate), cc.difference.as_ref(), 3));
            let _ = write!(out, "<td>{cell}</td>");
        }
        let _ = writeln!(
            out,
            "<td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l wrap\">{}</td></tr>",
            cost_cell(&v.agent_usd_per_trial, usd),
            cost_cell(&v.spend_usd, usd),
            cost_cell(&v.latency_p50_ms, duration),
            cost_cell(&v.latency_p95_ms, duration),
            escape(&v.reason)
        );
    }
    out.push_str(
        "</tbody></table><p class=\"small\">Paired by (task, repeat). Δ = this run − baseline, with the paired bootstrap \
         interval over tasks; McNemar's exact two-sided test on hit@k (lost: the baseline caught a bug the run missed; \
         gained: the reverse). Cost and latency are the two summaries' own figures.</p></div>\n",
    );
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A comparison with one regressed variant (recall@5 down 0.30, p 0.004) and one with
    /// nothing paired; run text carries markup.
    fn comparison() -> RunComparison {
        let interval = |estimate: f64, low: f64, high: f64| serde_json::json!({"estimate": estimate, "low": low, "high": high, "confidence": 0.95, "resamples": 100, "seed": 1});
        let delta = |b: f64, c: f64| serde_json::json!({"baseline": b, "candidate": c, "delta": c - b});
        serde_json::from_value(serde_json::json!({
            "schema": crate::compare::COMPARISON_SCHEMA,
            "baseline": {"name": "nightly-<1>", "spec_hash": "abc", "uri": "file:///r/runs/\"nightly\""},
            "candidate": {"name": "nightly-2", "spec_hash": "def", "uri": "file:///r/runs/nightly-2"},
            "settings": {"k": 5, "alpha": 0.05, "min_delta": 0.02},
            "k": [5],
            "bootstrap": {"resamples": 100, "seed": 1, "confidence": 0.95},
            "variants": [
                {
                    "variant": "<b>m</b>/low/single-shot@1.0.0/default",
                    "baseline_id": "v1", "candidate_id": "v1",
                    "pairs": 20, "tasks": 20, "unpaired_baseline": 0, "unpaired_candidate": 0,
                    "by_k": {"5": {
                        "mcnemar": {"pairs": 20, "unpaired_baseline": 0, "unpaired_candidate": 0, "both_hit": 8,
                                    "both_miss": 6, "baseline_only": 6, "candidate_only": 0,
                                    "p_value": 0.03125, "ln_p_value": (0.03125f64).ln()},
                        "recall_difference": {"tasks": 20, "pairs": 20, "unpaired_baseline": 0, "unpaired_candidate": 0,
                                              "baseline_mean": 0.7, "candidate_mean": 0.4,
                                              "difference": interval(-0.3, -0.5, -0.1)}
                    }},
                    "agent_usd_per_trial": delta(0.01, 0.02),
                    "spend_usd": delta(1.0, 1.5),
                    "latency_p50_ms": delta(900.0, 300_000.0),
                    "latency_p95_ms": delta(2000.0, 1500.0),
                    "verdict": "Regressed",
                    "reason": "recall@5 <down>"
                },
                {
                    "variant": "other", "baseline_id": "v2", "candidate_id": "v2",
                    "pairs": 0, "tasks": 0, "unpaired_baseline": 3, "unpaired_candidate": 3, "by_k": {},
                    "agent_usd_per_trial": delta(0.01, 0.01), "latency_p50_ms": {}, "latency_p95_ms": {},
                    "verdict": "NoSignificantChange", "reason": "nothing paired"
                }
            ],
            "added": ["new <model>"],
            "removed": [],
            "verdict": "Regressed",
            "spend_usd": delta(2.0, 2.5),
            "notices": ["<i>scripted</i>"]
        }))
        .unwrap()
    }

    #[test]
    fn the_section_shows_the_comparisons_own_numbers_and_escapes_run_text() {
        let mut html = String::new();
        what_changed(&mut html, &comparison());
        assert!(html.contains("<strong>Regressed</strong>") && html.contains("id=\"chart-change\""));
        // The recall cell: means, difference with interval, McNemar p and the discordant counts.
        assert!(
            html.contains("0.70 → 0.40<br><b>-0.30</b> <span class=\"ci\">[-0.50, -0.10]</span><br><span class=\"ci\">p 0.031 · 6 / 0</span>"),
            "{html}"
        );
        // Costs: a rise is marked worse, a fall better; durations read as ms, s or min.
        assert!(html.contains("0.0100 → 0.0200<br><span class=\"down\">+0.0100</span>"));
        assert!(html.contains("900 ms → 5.0 min<br><span class=\"down\">+5.0 min</span>"));
        assert!(html.contains("2.0 s → 1.5 s<br><span class=\"up\">-500 ms</span>"));
        assert!(html.contains("2.0000 → 2.5000 USD") && html.contains("+0.5000 USD (+25.0%)"));
        // One plotted interval; the variant with no pair says so; the ±min_delta band is drawn.
        assert_eq!(html.matches("<g class=\"change\">").count(), 1);
        assert!(html.contains("nothing paired</text>") && html.contains("changes within ±0.02 do not count"));
        for raw in ["<b>m</b>", "<1>", "<down>", "<model>", "<i>scripted", "\"nightly\""] {
            assert!(!html.contains(raw), "{raw} is not escaped");
        }
        assert!(html.contains("&lt;b&gt;m&lt;/<wbr>b&gt;/<wbr>low") && html.contains("new &lt;model&gt;"));
    }

    #[test]
    fn the_chart_axis_covers_the_largest_change_symmetrically() {
        let mut c = comparison();
        let mut html = String::new();
        change_chart(&mut html, &c);
        // Largest reach 0.5 → ±0.55 in steps of 0.05: ticks at ±0.55 and ±0.275 (shown ±0.28).
        assert!(html.contains(">-0.55</text>") && html.contains(">+0.55</text>"), "{html}");
        c.variants.truncate(1);
        c.variants[0].by_k.clear();
        html.clear();
        change_chart(&mut html, &c);
        // Nothing plotted: the smallest axis, ±0.1.
        assert!(html.contains(">-0.10</text>") && html.contains(">+0.10</text>"), "{html}");
    }
}
