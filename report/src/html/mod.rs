//! The HTML report: one file, inline CSS and inline SVG charts, no script and no external
//! reference. Every text from the run (names, task ids, errors) is escaped.

use std::collections::BTreeSet;
use std::fmt::Write as _;

use super::terminal::tokens;
use super::{encode_path, escape, pareto_frontier, ReportData, TRIAL_ROWS_SHOWN};
use lightsout_api::ScoringProtocol;
use lightsout_core::summary::{RunSummary, VariantSummary};
use lightsout_core::trial::Outcome;
use lightsout_trajectory::Action;

mod charts;

use charts::{charts, trajectories};

/// Colours of variants, in order (Tableau 10).
const PALETTE: [&str; 10] =
    ["#4e79a7", "#f28e2b", "#e15759", "#76b7b2", "#59a14f", "#edc948", "#b07aa1", "#ff9da7", "#9c755f", "#bab0ac"];

fn colour(i: usize) -> &'static str {
    PALETTE[i % PALETTE.len()]
}

fn action_colour(action: Action) -> &'static str {
    match action {
        Action::Read => "#4e79a7",
        Action::Probe => "#76b7b2",
        Action::Write => "#e15759",
        Action::Execute => "#f28e2b",
        Action::Git => "#59a14f",
        Action::Other => "#bab0ac",
    }
}

const CSS: &str = r#"
:root { --fg:#1d2330; --muted:#5b6475; --line:#dfe3ea; --bg:#f6f7f9; --card:#fff; --accent:#4e79a7; }
* { box-sizing: border-box; }
body { margin:0; font: 14px/1.45 system-ui, -apple-system, "Segoe UI", Roboto, "Helvetica Neue", Arial, sans-serif; color:var(--fg); background:var(--bg); }
main { max-width: 1400px; margin: 0 auto; padding: 24px 28px 64px; }
h1 { font-size: 26px; margin: 0 0 4px; }
h2 { font-size: 18px; margin: 32px 0 10px; padding-bottom: 6px; border-bottom: 2px solid var(--line); }
h3 { font-size: 15px; margin: 18px 0 8px; }
.sub { color: var(--muted); margin: 0 0 16px; }
.scripted { background:#b3261e; color:#fff; border-radius:8px; padding:16px 20px; margin:0 0 18px; font-size:16px; box-shadow:0 2px 6px rgba(0,0,0,.15); }
.scripted strong { font-size:20px; letter-spacing:.04em; display:block; margin-bottom:4px; }
.notices { background:#fff7e0; border:1px solid #f0d58a; border-radius:8px; padding:10px 16px; margin:0 0 18px; }
.notices li { margin: 2px 0; }
.meta { display:grid; grid-template-columns: repeat(auto-fill, minmax(260px, 1fr)); gap:6px 24px; margin: 0 0 18px; }
.meta div { color: var(--muted); } .meta b { color: var(--fg); font-weight:600; }
.cards { display:flex; flex-wrap:wrap; gap:12px; margin: 0 0 8px; }
.card { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:10px 16px; min-width:180px; }
.card .n { font-size:22px; font-weight:650; } .card .l { color:var(--muted); font-size:12px; text-transform:uppercase; letter-spacing:.05em; }
.card .d { color:var(--muted); font-size:12px; }
.panel { background:var(--card); border:1px solid var(--line); border-radius:8px; padding:12px 16px; overflow-x:auto; }
.charts { display:grid; grid-template-columns: repeat(auto-fit, minmax(560px, 1fr)); gap:16px; }
.chart h3 { margin-top: 4px; } .chart p.note { color:var(--muted); font-size:12px; margin:4px 0 0; }
table { border-collapse: collapse; width: 100%; font-variant-numeric: tabular-nums; }
th, td { padding: 5px 7px; border-bottom: 1px solid var(--line); text-align: right; white-space: nowrap; vertical-align: top; }
th { background:#eef1f5; font-weight:600; font-size:12px; position: sticky; top: 0; white-space: normal; }
th.l, td.l { text-align:left; }
td.v { text-align:left; }
#trial-table { font-size: 12.5px; } #variant-table { font-size: 13px; } #trial-table td.l:first-child { max-width: 300px; overflow: hidden; text-overflow: ellipsis; }
table.heat { width:auto; } table.heat td { min-width: 52px; } table.heat th.g { text-align:center; border-left: 2px solid #fff; }
td.wrap { white-space: normal; min-width: 280px; }
.stack { display:flex; flex-direction:column; gap:16px; }
.variant-table td b { font-size: 14px; }
.swatch { display:inline-block; width:11px; height:11px; border-radius:2px; margin-right:6px; vertical-align:-1px; }
.small { color:var(--muted); font-size:12px; }
.ci { color:var(--muted); font-size:12px; }
.legend { display:flex; flex-wrap:wrap; gap:4px 16px; margin: 6px 0 0; font-size:13px; }
.badge { display:inline-block; padding:1px 7px; border-radius:10px; font-size:12px; font-weight:600; }
.o-ok { background:#e3f2e6; color:#1e6b2e; } .o-agent-failed, .o-timed-out, .o-budget-exceeded { background:#fde7d9; color:#8a3b00; }
.o-infra-failed { background:#f3dede; color:#8b1a1a; }
.hit { color:#1e6b2e; font-weight:600; } .miss { color:#8a3b00; }
td.links a { margin-right:8px; }
a { color:#2f5d8a; }
.trials { max-height: 720px; overflow-y: auto; }
.err { color:#8b1a1a; font-size:12px; white-space: normal; max-width: 360px; }
svg text { font-family: inherit; }
footer { margin-top:40px; color:var(--muted); font-size:12px; }
"#;

/// The report as one HTML document.
pub fn render_html(data: &ReportData) -> String {
    let s = &data.summary;
    let mut out = String::with_capacity(64 * 1024 + data.trials.len() * 700);
    let title = format!("Lightsout report: {}", s.run.name);
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{}</title>\n<style>{CSS}{}</style>\n</head>\n<body>\n<main>\n",
        escape(&title),
        super::comparison::CSS
    );
    header(&mut out, s, &data.notices);
    if let Some(comparison) = &data.comparison {
        super::comparison::what_changed(&mut out, comparison);
    }
    variant_table(&mut out, s);
    charts(&mut out, s);
    breakdowns(&mut out, s);
    judge_agreement(&mut out, s);
    trajectories(&mut out, s);
    comparisons(&mut out, s);
    trial_table(&mut out, data);
    let _ = write!(
        out,
        "<footer>Generated by <b>lightsout report</b> from <code>summary.json</code> (schema {}) and the stored \
         per-trial <code>result.json</code> and <code>verdicts.json</code>. Intervals: {:.0}% percentile bootstrap, \
         {} resamples over tasks, seed {}.</footer>\n</main>\n</body>\n</html>\n",
        escape(&s.schema),
        s.bootstrap.confidence * 100.0,
        s.bootstrap.resamples,
        s.bootstrap.seed
    );
    out
}

fn header(out: &mut String, s: &RunSummary, report_notices: &[String]) {
    let _ = writeln!(out, "<h1>{}</h1>", escape(&s.run.name));
    let _ = writeln!(
        out,
        "<p class=\"sub\">Lightsout evaluation report · protocol <b>{}</b> · summary generated {}</p>",
        s.protocol.as_str(),
        escape(&s.run.generated_at.format("%Y-%m-%d %H:%M:%S UTC").to_string())
    );
    if s.scripted_models {
        out.push_str(
            "<div class=\"scripted\" id=\"scripted-models\" role=\"alert\"><strong>SCRIPTED MODELS</strong>\
             Every answer in this run came from Lightsout's built-in scripted model server, not from a real model. \
             These numbers say nothing about any real model's ability to review code.</div>\n",
        );
    }
    if !s.notices.is_empty() || !report_notices.is_empty() {
        out.push_str("<div class=\"notices\"><b>Before quoting a number</b><ul>");
        for notice in s.notices.iter().chain(report_notices) {
            let _ = write!(out, "<li>{}</li>", escape(notice));
        }
        out.push_str("</ul></div>\n");
    }
    let ks: Vec<String> = s.k.iter().map(u32::to_string).collect();
    let _ = writeln!(
        out,
        "<div class=\"meta\"><div>Dataset <b>{}</b> · {}</div><div>Tasks <b>{}</b>{}</div>\
         <div>k <b>{}</b></div><div>Bootstrap <b>{} resamples</b>, seed {}, {:.0}% intervals</div>\
         <div>Spec hash <b title=\"{}\">{}</b></div></div>",
        escape(&s.dataset.format),
        escape(&s.dataset.source),
        s.dataset.tasks,
        if s.dataset.skipped_lines > 0 {
            format!(" ({} malformed lines skipped)", s.dataset.skipped_lines)
        } else {
            String::new()
        },
        ks.join(", "),
        s.bootstrap.resamples,
        s.bootstrap.seed,
        s.bootstrap.confidence * 100.0,
        escape(&s.run.spec_hash),
        escape(s.run.spec_hash.get(..12).unwrap_or(&s.run.spec_hash)),
    );
    let t = &s.trials;
    let failed = t.agent_failed + t.timed_out + t.budget_exceeded;
    let _ = writeln!(
        out,
        "<div class=\"cards\">\
         <div class=\"card\"><div class=\"l\">Trials</div><div class=\"n\">{}</div><div class=\"d\">{} ok · {} failed · {} infra · {} pending</div></div>\
         <div class=\"card\"><div class=\"l\">Variants</div><div class=\"n\">{}</div><div class=\"d\">{} comparisons with the first</div></div>\
         <div class=\"card\"><div class=\"l\">Spend</div><div class=\"n\">{:.4} USD</div><div class=\"d\">agents {:.4} · judges {:.4}{}</div></div>\
         <div class=\"card\"><div class=\"l\">Tokens</div><div class=\"n\">{}</div><div class=\"d\">agents {} · judges {}</div></div>\
         </div>",
        t.planned,
        t.ok,
        failed,
        t.infra_failed,
        t.pending,
        s.variants.len(),
        s.comparisons.len(),
        s.spend.total_usd,
        s.spend.agent_usd,
        s.spend.judge_usd,
        if s.spend.unpriced_calls > 0 {
            format!(" · {} unpriced calls not included", s.spend.unpriced_calls)
        } else {
            String::new()
        },
        tokens(s.tokens.agent.total_tokens() + s.tokens.judge.total_tokens()),
        tokens(s.tokens.agent.total_tokens()),
        tokens(s.tokens.judge.total_tokens()),
    );
}

fn opt(value: Option<f64>, digits: usize) -> String {
    value.map_or_else(|| "–".to_string(), |v| format!("{v:.digits$}"))
}

fn swatch(i: usize) -> String {
    format!("<span class=\"swatch\" style=\"background:{}\"></span>", colour(i))
}

fn composite_of(v: &VariantSummary) -> Option<f64> {
    v.swe_prbench.as_ref().filter(|s| s.records > 0).map(|s| s.composite)
}

fn variant_table(out: &mut String, s: &RunSummary) {
    let composite = s.protocol == ScoringProtocol::SwePrBench;
    out.push_str("<h2 id=\"variants\">Variants</h2>\n<div class=\"panel\"><table id=\"variant-table\"><thead><tr><th class=\"l\">#</th><th class=\"l\">variant</th>");
    for k in &s.k {
        let _ =
            write!(out, "<th>recall@{k}<br><span class=\"ci\">{:.0}% CI</span></th>", s.bootstrap.confidence * 100.0);
    }
    if composite {
        out.push_str("<th>composite<br><span class=\"ci\">CI</span></th>");
    }
    out.push_str(
        "<th>USD / trial<br><span class=\"ci\">agent</span></th><th>USD<br><span class=\"ci\">agent + judge</span></th>\
         <th>tokens<br><span class=\"ci\">agent / judge</span></th><th>latency<br><span class=\"ci\">p50 / p95</span></th>\
         <th>findings<br><span class=\"ci\">per review</span></th><th>words<br><span class=\"ci\">per review</span></th>\
         <th>trials<br><span class=\"ci\">ok / failed / infra / pending</span></th></tr></thead><tbody>\n",
    );
    for (i, v) in s.variants.iter().enumerate() {
        let _ = write!(
            out,
            "<tr><td class=\"l\">{}</td><td class=\"v\" title=\"model {} · provider {}{} · harness {} · prompt {}\">{}<b>{}</b><br><span class=\"small\">via {}</span></td>",
            i + 1,
            escape(&v.model),
            escape(&v.provider),
            v.reasoning_effort.as_deref().map(|e| format!(" · effort {}", escape(e))).unwrap_or_default(),
            escape(&v.harness),
            escape(&v.prompt),
            swatch(i),
            escape(&v.name),
            escape(&v.provider),
        );
        for k in &s.k {
            let k = k.to_string();
            match (v.recall.get(&k), v.recall_interval.get(&k)) {
                (Some(r), Some(iv)) => {
                    let _ = write!(
                        out,
                        "<td><b>{r:.2}</b><br><span class=\"ci\">[{:.2}, {:.2}]</span></td>",
                        iv.low, iv.high
                    );
                }
                (Some(r), None) => {
                    let _ = write!(out, "<td><b>{r:.2}</b></td>");
                }
                _ => out.push_str("<td>–</td>"),
            }
        }
        if composite {
            match (composite_of(v), v.swe_prbench.as_ref().and_then(|p| p.composite_interval)) {
                (Some(c), Some(iv)) => {
                    let _ = write!(
                        out,
                        "<td><b>{c:.3}</b><br><span class=\"ci\">[{:.3}, {:.3}]</span></td>",
                        iv.low, iv.high
                    );
                }
                (Some(c), None) => {
                    let _ = write!(out, "<td><b>{c:.3}</b></td>");
                }
                _ => out.push_str("<td>–</td>"),
            }
        }
        let t = &v.trials;
        let _ = writeln!(
            out,
            "<td>{}</td><td>{:.4}</td><td>{} / {}</td><td>{}</td><td>{}</td><td>{}</td><td>{} / {} / {} / {}<br><span class=\"ci\">scored {} ({} tasks)</span></td></tr>",
            opt(v.agent_usd_per_trial, 4),
            v.spend.total_usd,
            tokens(v.agent_tokens.total_tokens()),
            tokens(v.judge_tokens.total_tokens()),
            v.latency_ms.map_or("–".into(), |l| format!("{} / {}", duration(l.p50), duration(l.p95))),
            opt(v.findings_per_review, 1),
            opt(v.words_per_review, 0),
            t.ok,
            t.agent_failed + t.timed_out + t.budget_exceeded,
            t.infra_failed,
            t.pending,
            v.scored,
            v.scored_tasks,
        );
    }
    out.push_str("</tbody></table></div>\n");
}

/// A legend of the variants, numbered as in the charts.
fn variant_legend(out: &mut String, s: &RunSummary) {
    out.push_str("<div class=\"legend\">");
    for (i, v) in s.variants.iter().enumerate() {
        let _ = write!(out, "<span>{}{} {}</span>", swatch(i), i + 1, escape(&v.name));
    }
    out.push_str("</div>");
}

/// A duration in milliseconds for people: `850 ms`, `12.3 s`, `4.2 min`.
fn duration(ms: u64) -> String {
    match ms {
        0..=999 => format!("{ms} ms"),
        1_000..=119_999 => format!("{:.1} s", ms as f64 / 1000.0),
        _ => format!("{:.1} min", ms as f64 / 60_000.0),
    }
}

fn format_usd(c: f64) -> String {
    if c == 0.0 {
        "0".into()
    } else if c < 0.01 {
        format!("{c:.4}")
    } else {
        format!("{c:.3}")
    }
}

/// A cell shaded by its value in [0, 1].
fn heat_cell(value: Option<f64>, digits: usize) -> String {
    match value {
        Some(v) => {
            format!("<td style=\"background:rgba(78,121,167,{:.2})\">{v:.digits$}</td>", 0.08 + 0.5 * v.clamp(0.0, 1.0))
        }
        None => "<td>–</td>".to_string(),
    }
}

fn breakdowns(out: &mut String, s: &RunSummary) {
    out.push_str("<h2 id=\"breakdowns\">Breakdowns</h2>\n");
    type By = fn(&VariantSummary) -> &std::collections::BTreeMap<String, std::collections::BTreeMap<String, f64>>;
    let dims: [(&str, &str, By); 3] = [
        ("track", "breakdown-track", |v| &v.recall_by_track),
        ("difficulty", "breakdown-difficulty", |v| &v.recall_by_difficulty),
        ("language", "breakdown-language", |v| &v.recall_by_language),
    ];
    out.push_str("<div class=\"stack\">");
    for (dim, id, by) in dims {
        let groups: BTreeSet<&String> = s.variants.iter().flat_map(|v| by(v).keys()).collect();
        let _ = write!(out, "<div class=\"panel\" id=\"{id}\"><h3>recall@k by {dim}</h3>");
        if groups.is_empty() {
            let _ = write!(out, "<p class=\"small\">No scored task in this run has a {dim} in the dataset.</p></div>");
            continue;
        }
        out.push_str("<table class=\"heat\"><thead><tr><th class=\"l\" rowspan=\"2\">variant</th>");
        for g in &groups {
            let _ = write!(out, "<th class=\"g\" colspan=\"{}\">{}</th>", s.k.len(), escape(g));
        }
        out.push_str("</tr><tr>");
        for _ in &groups {
            for k in &s.k {
                let _ = write!(out, "<th>R@{k}</th>");
            }
        }
        out.push_str("</tr></thead><tbody>");
        for (i, v) in s.variants.iter().enumerate() {
            let _ = write!(out, "<tr><td class=\"l\">{}{}</td>", swatch(i), escape(&v.name));
            for g in &groups {
                for k in &s.k {
                    out.push_str(&heat_cell(by(v).get(*g).and_then(|m| m.get(&k.to_string())).copied(), 2));
                }
            }
            out.push_str("</tr>");
        }
        out.push_str("</tbody></table></div>");
    }
    // SWE-PRBench: the weighted composite by difficulty, the harness's `by_difficulty`.
    let difficulties: BTreeSet<&String> =
        s.variants.iter().filter_map(|v| v.swe_prbench.as_ref()).flat_map(|p| p.report.by_difficulty.keys()).collect();
    if !difficulties.is_empty() {
        out.push_str("<div class=\"panel\" id=\"breakdown-composite\"><h3>SWE-PRBench composite by difficulty</h3><table class=\"heat\"><thead><tr><th class=\"l\">variant</th>");
        for d in &difficulties {
            let _ = write!(out, "<th>{}</th>", escape(d));
        }
        out.push_str("</tr></thead><tbody>");
        for (i, v) in s.variants.iter().enumerate() {
            let _ = write!(out, "<tr><td class=\"l\">{}{}</td>", swatch(i), escape(&v.name));
            for d in &difficulties {
                let score = v.swe_prbench.as_ref().and_then(|p| p.report.by_difficulty.get(*d)).filter(|g| g.n > 0);
                out.push_str(&heat_cell(score.map(|g| g.overall_score_weighted), 3));
            }
            out.push_str("</tr>");
        }
        out.push_str("</tbody></table></div>");
    }
    out.push_str("</div>\n");
}

fn judge_agreement(out: &mut String, s: &RunSummary) {
    out.push_str("<h2 id=\"judges\">Judge agreement</h2>\n<div class=\"panel\">");
    if s.variants.iter().all(|v| v.judge_agreement.is_none()) {
        out.push_str("<p class=\"small\">No agreement figures: the panel has fewer than two judges, or the protocol is not CRBugBench.</p></div>\n");
        return;
    }
    out.push_str(
        "<table id=\"agreement-table\"><thead><tr><th class=\"l\">variant</th><th>judges</th><th>items</th><th>excluded</th>\
         <th>Fleiss' κ</th><th>mean pairwise agreement</th><th class=\"l\">pairs (agreement, Cohen's κ)</th></tr></thead><tbody>",
    );
    for (i, v) in s.variants.iter().enumerate() {
        let Some(a) = &v.judge_agreement else {
            let _ = write!(
                out,
                "<tr><td class=\"l\">{}{}</td><td colspan=\"6\" class=\"l small\">no agreement figures</td></tr>",
                swatch(i),
                escape(&v.name)
            );
            continue;
        };
        let pairs: Vec<String> = a
            .pairs
            .iter()
            .map(|p| {
                format!("judge {}–{}: {} (κ {})", p.first + 1, p.second + 1, opt(p.agreement, 2), opt(p.cohen_kappa, 2))
            })
            .collect();
        let _ = write!(
            out,
            "<tr><td class=\"l\">{}{}</td><td>{}</td><td>{}</td><td>{}</td><td><b>{}</b></td><td>{}</td><td class=\"l small wrap\">{}</td></tr>",
            swatch(i),
            escape(&v.name),
            a.fleiss.raters,
            a.fleiss.items,
            a.fleiss.excluded_items,
            opt(a.fleiss.kappa, 3),
            opt(a.mean_pairwise_agreement, 3),
            pairs.join(" · ")
        );
    }
    out.push_str(
        "</tbody></table><p class=\"small\">Judges are numbered in the panel's order (spec.judges.panel).</p></div>\n",
    );
}

fn truncate(text: &str, chars: usize) -> String {
    if text.chars().count() <= chars {
        text.to_string()
    } else {
        let mut t: String = text.chars().take(chars - 1).collect();
        t.push('…');
        t
    }
}

fn comparisons(out: &mut String, s: &RunSummary) {
    if s.comparisons.is_empty() {
        return;
    }
    out.push_str(
        "<h2 id=\"comparisons\">Against the first variant</h2>\n<div class=\"panel\"><table id=\"comparison-table\"><thead><tr>\
         <th class=\"l\">candidate</th><th class=\"l\">baseline</th><th>k</th><th>pairs</th><th>both hit</th>\
         <th>baseline only (b)</th><th>candidate only (c)</th><th>McNemar p</th><th>Δ recall <span class=\"ci\">[CI]</span></th></tr></thead><tbody>",
    );
    for c in &s.comparisons {
        let mut ks: Vec<(&String, _)> = c.by_k.iter().collect();
        ks.sort_by_key(|(k, _)| k.parse::<u32>().unwrap_or(u32::MAX));
        for (k, kc) in ks {
            let m = &kc.mcnemar;
            let diff = kc.recall_difference.difference.as_ref().map_or("–".into(), |d| {
                format!("<b>{:+.2}</b> <span class=\"ci\">[{:+.2}, {:+.2}]</span>", d.estimate, d.low, d.high)
            });
            let _ = write!(
                out,
                "<tr><td class=\"l\">{}</td><td class=\"l\">{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td></tr>",
                escape(&c.candidate),
                escape(&c.baseline),
                escape(k),
                m.pairs,
                m.both_hit,
                m.baseline_only,
                m.candidate_only,
                if m.p_value < 0.001 { format!("{:.1e}", m.p_value) } else { format!("{:.3}", m.p_value) },
                diff
            );
        }
    }
    out.push_str("</tbody></table><p class=\"small\">Paired by (task, repeat): McNemar's exact two-sided test on hit@k; paired bootstrap of the recall difference (candidate − baseline).</p></div>\n");
}

fn trial_table(out: &mut String, data: &ReportData) {
    let s = &data.summary;
    let swe = s.protocol == ScoringProtocol::SwePrBench;
    let shown = data.trials.len().min(TRIAL_ROWS_SHOWN);
    let _ = write!(
        out,
        "<h2 id=\"trials\">Trials ({})</h2>\n{}<div class=\"panel trials\"><table id=\"trial-table\"><thead><tr>\
         <th class=\"l\">variant</th><th class=\"l\">task</th><th>repeat</th><th>attempt</th><th class=\"l\">outcome</th>\
         <th>first hit</th>{}<th>findings</th><th>words</th><th>agent USD</th><th>duration</th><th>turns / tools</th>\
         <th class=\"l\">artifacts</th></tr></thead><tbody>\n",
        data.trials.len(),
        if shown < data.trials.len() {
            format!(
                "<p class=\"small\" id=\"trials-cut\">The first {shown} of {} trials, in variant, task and repeat order; \
                 every trial's artifacts are in the run's results directory, and every number above counts them all.</p>",
                data.trials.len()
            )
        } else {
            String::new()
        },
        if swe { "<th>composite</th>" } else { "" }
    );
    let colour_of: std::collections::HashMap<&str, usize> =
        s.variants.iter().enumerate().map(|(i, v)| (v.id.as_str(), i)).collect();
    for t in &data.trials[..shown] {
        let variant = match colour_of.get(t.variant_id.as_str()) {
            Some(i) => format!("{}{}", swatch(*i), escape(&t.variant)),
            None => escape(&t.variant),
        };
        let hit = match (t.outcome, t.judged, t.first_hit_rank) {
            (Outcome::Ok, false, _) => "<span class=\"small\">not judged</span>".to_string(),
            (_, _, Some(rank)) => format!("<span class=\"hit\">#{rank}</span>"),
            (_, _, None) => "<span class=\"miss\">miss</span>".to_string(),
        };
        let error = t
            .error
            .as_deref()
            .map(|e| format!("<div class=\"err\">{}</div>", escape(&truncate(e, 200))))
            .unwrap_or_default();
        let links: Vec<String> = t
            .artifacts
            .iter()
            .map(|name| {
                format!(
                    "<a href=\"{}{}\">{}</a>",
                    escape(&data.link_base),
                    escape(&encode_path(&t.artifact_path(name))),
                    escape(name.trim_end_matches(".json").trim_end_matches(".md").trim_end_matches(".jsonl.zst"))
                )
            })
            .collect();
        let _ = writeln!(
            out,
            "<tr><td class=\"l\">{variant}</td><td class=\"l\">{}</td><td>{}</td><td>{}{}</td><td class=\"l\"><span class=\"badge o-{}\">{}</span>{error}</td><td>{hit}</td>{}\
             <td>{}</td><td>{}</td><td>{}</td><td>{}</td><td>{}</td><td class=\"l links\">{}</td></tr>",
            match t.context_config {
                Some(context) => format!("{} <span class=\"small\">{}</span>", escape(&t.task_id), context.as_str()),
                None => escape(&t.task_id),
            },
            t.repeat,
            t.attempt,
            if t.attempts > 1 { format!(" <span class=\"small\">({} tries)</span>", t.attempts) } else { String::new() },
            t.outcome.as_str(),
            t.outcome.as_str(),
            if swe { format!("<td>{}</td>", opt(t.composite, 3)) } else { String::new() },
            t.findings,
            t.review_words,
            t.cost_usd.map_or("–".into(), format_usd),
            duration(t.duration_ms),
            match (t.turns, t.tool_calls) {
                (Some(turns), Some(calls)) => format!("{turns} / {calls}"),
                _ => "–".into(),
            },
            links.join("")
        );
    }
    out.push_str(
        "</tbody></table></div>\n<p class=\"small\">Links are relative to the run's results directory \
         (<code>runs/&lt;run&gt;/</code>), where this report is written: review, findings, verdicts, result, trajectory.</p>\n",
    );
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::TrialRow;
    use lightsout_core::summary::{DatasetSummary, OutcomeCounts, RunIdentity, SpendSummary, TokenSummary};

    fn summary() -> RunSummary {
        let variant = VariantSummary {
            id: "v1".into(),
            name: "m/<b>low</b>".into(),
            model: "m".into(),
            provider: "p".into(),
            reasoning_effort: Some("low".into()),
            harness: "single-shot@1.0.0".into(),
            prompt: "default".into(),
            trials: OutcomeCounts { planned: 1, ok: 1, ..Default::default() },
            scored: 1,
            scored_tasks: 1,
            recall: [("1".to_string(), 0.5)].into_iter().collect(),
            recall_interval: Default::default(),
            recall_by_track: Default::default(),
            recall_by_difficulty: Default::default(),
            recall_by_language: [("python".to_string(), [("1".to_string(), 0.5)].into_iter().collect())]
                .into_iter()
                .collect(),
            findings_per_review: Some(2.0),
            words_per_review: Some(100.0),
            judge_agreement: None,
            swe_prbench: None,
            agent_tokens: Default::default(),
            judge_tokens: Default::default(),
            spend: SpendSummary::default(),
            agent_usd_per_trial: Some(0.01),
            latency_ms: None,
            trajectory: None,
        };
        RunSummary {
            schema: lightsout_core::summary::SUMMARY_SCHEMA.into(),
            run: RunIdentity { name: "r".into(), spec_hash: "h".into(), generated_at: chrono::DateTime::UNIX_EPOCH },
            scripted_models: true,
            dataset: DatasetSummary { format: "crbugbench".into(), source: "s".into(), tasks: 1, skipped_lines: 0 },
            protocol: ScoringProtocol::CrBugBench,
            k: vec![1],
            bootstrap: lightsout_stats::BootstrapConfig::with_seed(1),
            trials: OutcomeCounts::default(),
            spend: SpendSummary::default(),
            tokens: TokenSummary::default(),
            notices: vec!["<i>note</i>".into()],
            variants: vec![variant],
            comparisons: vec![],
        }
    }

    fn row(task: usize) -> TrialRow {
        TrialRow {
            variant_id: "v1".into(),
            variant: "m".into(),
            trial_id: format!("t{task}"),
            task_id: format!("task-{task:05}"),
            context_config: None,
            repeat: 0,
            attempt: 1,
            attempts: 1,
            outcome: Outcome::Ok,
            error: None,
            findings: 1,
            review_words: 10,
            cost_usd: Some(0.01),
            duration_ms: 10,
            turns: None,
            tool_calls: None,
            judged: true,
            first_hit_rank: Some(1),
            composite: None,
            artifacts: vec!["review.md".into()],
        }
    }

    #[test]
    fn a_trial_of_the_context_axis_shows_its_configuration_beside_its_task() {
        let in_context = TrialRow { context_config: Some(lightsout_api::ContextConfig::ConfigC), ..row(1) };
        let data = ReportData {
            summary: summary(),
            trials: vec![row(0), in_context],
            link_base: String::new(),
            comparison: None,
            notices: vec![],
        };
        let html = render_html(&data);
        assert!(html.contains("task-00001 <span class=\"small\">config_C</span>"), "{html}");
        assert!(html.contains("<td class=\"l\">task-00000</td>"), "{html}");
    }

    #[test]
    fn the_trial_table_lists_at_most_the_first_rows_and_says_so() {
        let data = |trials: usize| ReportData {
            summary: summary(),
            trials: (0..trials).map(row).collect(),
            link_base: String::new(),
            comparison: None,
            notices: vec![],
        };
        let html = render_html(&data(TRIAL_ROWS_SHOWN));
        assert_eq!(html.matches("/review.md\"").count(), TRIAL_ROWS_SHOWN);
        assert!(!html.contains("id=\"trials-cut\""));
        let html = render_html(&data(TRIAL_ROWS_SHOWN + 1));
        assert_eq!(html.matches("/review.md\"").count(), TRIAL_ROWS_SHOWN, "one row too many");
        assert!(html.contains(&format!("Trials ({})", TRIAL_ROWS_SHOWN + 1)));
        assert!(html.contains(&format!("The first {TRIAL_ROWS_SHOWN} of {} trials", TRIAL_ROWS_SHOWN + 1)));
        assert!(html.contains("task-01999") && !html.contains("task-02000"));
    }

    #[test]
    fn run_text_is_escaped_everywhere() {
        let trial = TrialRow {
            variant_id: "v1".into(),
            variant: "m/<b>low</b>".into(),
            trial_id: "t\"1".into(),
            task_id: "<script>alert(1)</script>".into(),
            context_config: None,
            repeat: 0,
            attempt: 1,
            attempts: 1,
            outcome: Outcome::AgentFailed,
            error: Some("<img src=x onerror=alert(1)>".into()),
            findings: 0,
            review_words: 0,
            cost_usd: None,
            duration_ms: 10,
            turns: None,
            tool_calls: None,
            judged: false,
            first_hit_rank: None,
            composite: None,
            artifacts: vec!["result.json".into()],
        };
        let html = render_html(&ReportData {
            summary: summary(),
            trials: vec![trial],
            link_base: String::new(),
            comparison: None,
            notices: vec!["<u>report notice</u>".into()],
        });
        assert!(!html.contains("<script"), "a task id's markup must be escaped");
        assert!(html.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(!html.contains("<img") && !html.contains("<b>low") && !html.contains("<i>note"));
        assert!(html.contains("&lt;u&gt;report notice&lt;/u&gt;"));
        assert!(html.contains("href=\"v1/t%221/attempt-1/result.json\""), "{html}");
        assert!(html.contains("SCRIPTED MODELS"));
        assert!(html.contains("id=\"chart-recall\"") && html.contains("id=\"chart-pareto\""));
        // Self-contained: no absolute URL at all (inline SVG needs no namespace URL in HTML).
        assert!(!html.contains("http://") && !html.contains("https://") && !html.contains("<script"));
    }
}
