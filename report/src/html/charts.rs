//! The report's inline SVG charts: recall@k curves, quality against cost (with the Pareto
//! frontier), and what the agents did (tool calls by action, turns per trial).

use super::*;

const W: f64 = 600.0;
const H: f64 = 340.0;
const ML: f64 = 56.0;
const MR: f64 = 20.0;
const MT: f64 = 16.0;
const MB: f64 = 48.0;

/// Horizontal grid lines and y labels over [0, 1].
fn unit_y_axis(out: &mut String, label: &str) {
    let ph = H - MT - MB;
    for i in 0..=4 {
        let value = i as f64 / 4.0;
        let y = MT + (1.0 - value) * ph;
        let _ = write!(
            out,
            "<line x1=\"{ML}\" x2=\"{:.1}\" y1=\"{y:.1}\" y2=\"{y:.1}\" stroke=\"#e3e6ec\"/>\
             <text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"end\" fill=\"#5b6475\">{value:.2}</text>",
            W - MR,
            ML - 6.0,
            y + 4.0
        );
    }
    let _ = write!(
        out,
        "<text transform=\"translate(14 {:.1}) rotate(-90)\" font-size=\"12\" text-anchor=\"middle\" fill=\"#1d2330\">{}</text>",
        MT + ph / 2.0,
        escape(label)
    );
}

pub(super) fn charts(out: &mut String, s: &RunSummary) {
    out.push_str("<h2 id=\"charts\">Recall and cost</h2>\n<div class=\"charts\">");
    recall_curves(out, s);
    pareto_chart(out, s);
    out.push_str("</div>\n");
}

fn recall_curves(out: &mut String, s: &RunSummary) {
    out.push_str("<div class=\"panel chart\"><h3>recall@k by variant</h3>");
    let (pw, ph) = (W - ML - MR, H - MT - MB);
    let _ = write!(
        out,
        "<svg id=\"chart-recall\" class=\"chart-svg\" role=\"img\" aria-label=\"recall at k by variant\" \
         viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\">"
    );
    unit_y_axis(out, "recall@k");
    let (kmin, kmax) = (s.k.iter().copied().min().unwrap_or(1) as f64, s.k.iter().copied().max().unwrap_or(1) as f64);
    let x = |k: f64| if kmax > kmin { ML + 20.0 + (k - kmin) / (kmax - kmin) * (pw - 40.0) } else { ML + pw / 2.0 };
    let y = |r: f64| MT + (1.0 - r.clamp(0.0, 1.0)) * ph;
    for k in &s.k {
        let xk = x(*k as f64);
        let _ = write!(
            out,
            "<line x1=\"{xk:.1}\" x2=\"{xk:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"#9aa3b2\"/>\
             <text x=\"{xk:.1}\" y=\"{:.1}\" font-size=\"11\" text-anchor=\"middle\" fill=\"#5b6475\">{k}</text>",
            MT + ph,
            MT + ph + 5.0,
            MT + ph + 18.0
        );
    }
    let _ = write!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\" fill=\"#1d2330\">k (findings read, by rank)</text>",
        ML + pw / 2.0,
        H - 8.0
    );
    let n = s.variants.len();
    for (i, v) in s.variants.iter().enumerate() {
        // Side by side, so that equal values stay visible.
        let dx = (i as f64 - (n as f64 - 1.0) / 2.0) * 5.0;
        let points: Vec<(u32, f64)> = s.k.iter().filter_map(|k| Some((*k, *v.recall.get(&k.to_string())?))).collect();
        if points.is_empty() {
            continue;
        }
        let c = colour(i);
        let path: Vec<String> = points.iter().map(|(k, r)| format!("{:.1},{:.1}", x(*k as f64) + dx, y(*r))).collect();
        let _ = write!(
            out,
            "<g class=\"series\"><title>{}</title><polyline fill=\"none\" stroke=\"{c}\" stroke-width=\"2.5\" points=\"{}\"/>",
            escape(&v.name),
            path.join(" ")
        );
        for (k, r) in &points {
            let xk = x(*k as f64) + dx;
            if let Some(iv) = v.recall_interval.get(&k.to_string()) {
                let _ = write!(
                    out,
                    "<line x1=\"{xk:.1}\" x2=\"{xk:.1}\" y1=\"{:.1}\" y2=\"{:.1}\" stroke=\"{c}\" stroke-width=\"1.5\" opacity=\"0.55\"/>",
                    y(iv.low),
                    y(iv.high)
                );
            }
            let _ = write!(
                out,
                "<circle cx=\"{xk:.1}\" cy=\"{:.1}\" r=\"4\" fill=\"{c}\" stroke=\"#fff\" stroke-width=\"1\"><title>{} recall@{k} = {r:.2}</title></circle>",
                y(*r),
                escape(&v.name)
            );
        }
        out.push_str("</g>");
    }
    out.push_str("</svg>");
    variant_legend(out, s);
    let _ = write!(
        out,
        "<p class=\"note\">Vertical bars: {:.0}% bootstrap intervals. Variants are drawn slightly apart so equal values stay visible.</p></div>",
        s.bootstrap.confidence * 100.0
    );
}

/// The quality the cost chart plots: the composite under SWE-PRBench, else recall at the first k.
fn quality(s: &RunSummary) -> (String, Vec<Option<f64>>) {
    if s.protocol == ScoringProtocol::SwePrBench {
        ("SWE-PRBench composite".to_string(), s.variants.iter().map(composite_of).collect())
    } else {
        // The first k of spec.judges.k: the headline cut-off.
        let k = s.k.first().copied().unwrap_or(1);
        (format!("recall@{k}"), s.variants.iter().map(|v| v.recall.get(&k.to_string()).copied()).collect())
    }
}

fn pareto_chart(out: &mut String, s: &RunSummary) {
    let (label, qualities) = quality(s);
    let _ = write!(
        out,
        "<div class=\"panel chart\"><h3>Cost against quality ({}), Pareto frontier marked</h3>",
        escape(&label)
    );
    let points: Vec<(f64, f64)> = s
        .variants
        .iter()
        .zip(&qualities)
        .map(|(v, q)| (v.agent_usd_per_trial.unwrap_or(f64::NAN), q.unwrap_or(f64::NAN)))
        .collect();
    let frontier = pareto_frontier(&points);
    let (pw, ph) = (W - ML - MR, H - MT - MB);
    let _ = write!(
        out,
        "<svg id=\"chart-pareto\" class=\"chart-svg\" role=\"img\" aria-label=\"cost against quality\" \
         viewBox=\"0 0 {W} {H}\" width=\"{W}\" height=\"{H}\">"
    );
    unit_y_axis(out, &label);
    let max_cost = points.iter().map(|p| p.0).filter(|c| c.is_finite()).fold(0.0f64, f64::max);
    let step = nice_step(if max_cost > 0.0 { max_cost * 1.1 / 4.0 } else { 0.25 });
    let ticks = ((max_cost * 1.1 / step).ceil() as usize).max(1);
    let top = step * ticks as f64;
    let digits = (-step.log10().floor()).max(0.0) as usize;
    let x = |c: f64| ML + 10.0 + (c / top) * (pw - 20.0);
    let y = |q: f64| MT + (1.0 - q.clamp(0.0, 1.0)) * ph;
    for i in 0..=ticks {
        let c = step * i as f64;
        let _ = write!(
            out,
            "<line x1=\"{0:.1}\" x2=\"{0:.1}\" y1=\"{1:.1}\" y2=\"{2:.1}\" stroke=\"#9aa3b2\"/>\
             <text x=\"{0:.1}\" y=\"{3:.1}\" font-size=\"11\" text-anchor=\"middle\" fill=\"#5b6475\">{4:.5$}</text>",
            x(c),
            MT + ph,
            MT + ph + 5.0,
            MT + ph + 18.0,
            c,
            digits
        );
    }
    let _ = write!(
        out,
        "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"middle\" fill=\"#1d2330\">agent USD per trial</text>",
        ML + pw / 2.0,
        H - 8.0
    );
    // The frontier as a staircase: each frontier point's quality holds until the next, cheaper
    // variants' region ends; past the last, everything to the right and below is dominated.
    if let Some(&last) = frontier.last() {
        let mut path = Vec::new();
        for (n, &i) in frontier.iter().enumerate() {
            let (px, py) = (x(points[i].0), y(points[i].1));
            if n > 0 {
                let prev = frontier[n - 1];
                path.push(format!("{px:.1},{:.1}", y(points[prev].1)));
            }
            path.push(format!("{px:.1},{py:.1}"));
        }
        path.push(format!("{:.1},{:.1}", W - MR, y(points[last].1)));
        let _ = write!(
            out,
            "<polyline class=\"frontier\" fill=\"none\" stroke=\"#1d2330\" stroke-width=\"1.5\" stroke-dasharray=\"5 4\" points=\"{}\"/>",
            path.join(" ")
        );
    }
    // Variants drawn at the same place share one label ("3,4").
    let mut labels: Vec<((f64, f64), Vec<String>)> = Vec::new();
    for (i, (c, q)) in points.iter().enumerate() {
        if c.is_finite() && q.is_finite() {
            let at = (x(*c), y(*q));
            match labels.iter_mut().find(|(p, _)| (p.0 - at.0).abs() < 10.0 && (p.1 - at.1).abs() < 10.0) {
                Some((_, names)) => names.push((i + 1).to_string()),
                None => labels.push((at, vec![(i + 1).to_string()])),
            }
        }
    }
    let mut missing = Vec::new();
    for (i, (v, (c, q))) in s.variants.iter().zip(&points).enumerate() {
        if !(c.is_finite() && q.is_finite()) {
            missing.push(escape(&v.name));
            continue;
        }
        let on = frontier.contains(&i);
        let (px, py) = (x(*c), y(*q));
        if on {
            let _ = write!(out, "<circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"10\" fill=\"none\" stroke=\"#1d2330\" stroke-width=\"1.5\"/>");
        }
        let _ = write!(
            out,
            "<circle cx=\"{px:.1}\" cy=\"{py:.1}\" r=\"6\" fill=\"{}\" stroke=\"#fff\"><title>{}: {} USD per trial, {} {q:.3}{}</title></circle>\
             {}",
            colour(i),
            escape(&v.name),
            format_usd(*c),
            escape(&label),
            if on { " (Pareto frontier)" } else { "" },
            match labels.iter().position(|(_, names)| names.first() == Some(&(i + 1).to_string())) {
                Some(l) => format!(
                    "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" font-weight=\"600\" fill=\"#1d2330\">{}</text>",
                    px + 9.0,
                    py - 9.0,
                    labels[l].1.join(",")
                ),
                None => String::new(),
            }
        );
    }
    out.push_str("</svg>");
    variant_legend(out, s);
    let _ = write!(
        out,
        "<p class=\"note\">Ringed: the Pareto frontier, the variants no other variant beats on both cost and {}; \
         below and right of the dashed staircase, a variant is dominated.{}</p></div>",
        escape(&label),
        if missing.is_empty() {
            String::new()
        } else {
            format!(" Not plotted (no cost or no score): {}.", missing.join(", "))
        }
    );
}

/// 1, 2 or 5 times a power of ten, at least `raw`.
fn nice_step(raw: f64) -> f64 {
    let magnitude = 10f64.powf(raw.log10().floor());
    [1.0, 2.0, 5.0, 10.0].iter().map(|m| m * magnitude).find(|s| *s >= raw).unwrap_or(10.0 * magnitude)
}

pub(super) fn trajectories(out: &mut String, s: &RunSummary) {
    out.push_str("<h2 id=\"trajectories\">What the agents did</h2>\n");
    let with: Vec<(usize, &VariantSummary)> =
        s.variants.iter().enumerate().filter(|(_, v)| v.trajectory.is_some()).collect();
    if with.is_empty() {
        out.push_str(
            "<div class=\"panel\"><p class=\"small\">No trajectories: no variant's trials recorded one \
             (the single-shot harness makes one model call and runs no tool).</p></div>\n",
        );
        return;
    }
    let row_h = 30.0;
    let label_w = 210.0;
    let height = MT + row_h * with.len() as f64 + 12.0;
    let bar_w = W - label_w - 70.0;
    out.push_str("<div class=\"charts\">");
    // Tool calls per trial, stacked by action kind.
    let max_calls =
        with.iter().filter_map(|(_, v)| v.trajectory.as_ref()).map(|t| t.tool_calls_per_trial).fold(0.0f64, f64::max);
    let _ = write!(
        out,
        "<div class=\"panel chart\"><h3>Tool calls per trial, by action</h3><svg id=\"chart-actions\" class=\"chart-svg\" role=\"img\" \
         aria-label=\"tool calls per trial by action\" viewBox=\"0 0 {W} {height}\" width=\"{W}\" height=\"{height}\">"
    );
    for (row, (i, v)) in with.iter().enumerate() {
        let t = v.trajectory.as_ref().expect("filtered");
        let y = MT + row as f64 * row_h;
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"12\" text-anchor=\"end\" fill=\"#1d2330\">{}. {}</text>",
            label_w - 8.0,
            y + row_h / 2.0 + 2.0,
            i + 1,
            escape(&truncate(&v.name, 28))
        );
        let mut x = label_w;
        for action in Action::ALL {
            let calls = t.action_mix.get(action.as_str()).copied().unwrap_or(0);
            let per_trial = if t.trials > 0 { calls as f64 / t.trials as f64 } else { 0.0 };
            let w = if max_calls > 0.0 { per_trial / max_calls * bar_w } else { 0.0 };
            if w > 0.0 {
                let _ = write!(
                    out,
                    "<rect x=\"{x:.1}\" y=\"{:.1}\" width=\"{w:.1}\" height=\"{:.1}\" fill=\"{}\"><title>{}: {}: {calls} calls ({per_trial:.1} per trial)</title></rect>",
                    y + 4.0,
                    row_h - 8.0,
                    action_colour(action),
                    escape(&v.name),
                    action.as_str(),
                );
            }
            x += w;
        }
        let _ = write!(
            out,
            "<text x=\"{:.1}\" y=\"{:.1}\" font-size=\"11\" fill=\"#5b6475\">{:.1}</text>",
            x + 6.0,
            y + row_h / 2.0 + 2.0,
            t.tool_calls_per_trial
        );
    }
    out.push_str("</svg><div class=\"legend\">");
    for action in Action::ALL {
        let _ = write!(
            out,
            "<span><span class=\"swatch\" style=\"background:{}\"></span>{}</span>",
            action_colour(action),
            action.as_str()
        );
    }
    out.push_str(
        "</div><p class=\"note\">Bar length: mean tool calls per trial; segments: the action kinds' shares.</p></div>",
    );

    // Turns per trial: mean bar, p50 and p95 marks.
    let max_turns = with
        .iter()
        .filter_map(|(_, v)| v.trajectory.as_ref())
        .map(|t| (t.turns.p95 as f64).max(t.turns_per_trial))
        .fold(0.0f64, f64::max);
    let _ = write!(
        out,
        "<div class=\"panel chart\"><h3>Turns per trial</h3><svg id=\"chart-turns\" class=\"chart-svg\" role=\"img\" \
         aria-label=\"turns per trial\" viewBox=\"0 0 {W} {height}\" width=\"{W}\" height=\"{height}\">"
    );
    // Room on the right for the value label.
    let scale = |n: f64| if max_turns > 0.0 { n / max_turns * (bar_w - 90.0) } else { 0.0 };
    for (row, (i, v)) in with.iter().enumerate() {
        let t = v.trajectory.as_ref().expect("filtered");
        let y = MT + row as f64 * row_h;
        let (label_x, text_y, top, bottom) = (label_w - 8.0, y + row_h / 2.0 + 2.0, y + 2.0, y + row_h - 2.0);
        let (p50_x, p95_x) = (label_w + scale(t.turns.p50 as f64), label_w + scale(t.turns.p95 as f64));
        let (bar_y, bar_len, bar_h) = (y + 4.0, scale(t.turns_per_trial), row_h - 8.0);
        let value_x = label_w + scale(t.turns_per_trial.max(t.turns.p95 as f64)) + 6.0;
        let (number, name, full, fill) = (i + 1, escape(&truncate(&v.name, 28)), escape(&v.name), colour(*i));
        let (mean, trials, p50, p95) = (t.turns_per_trial, t.trials, t.turns.p50, t.turns.p95);
        let _ = write!(
            out,
            "<text x=\"{label_x:.1}\" y=\"{text_y:.1}\" font-size=\"12\" text-anchor=\"end\" fill=\"#1d2330\">{number}. {name}</text>\
             <rect x=\"{label_w}\" y=\"{bar_y:.1}\" width=\"{bar_len:.1}\" height=\"{bar_h:.1}\" fill=\"{fill}\" opacity=\"0.85\">\
             <title>{full}: {mean:.1} turns per trial over {trials} trials (p50 {p50}, p95 {p95})</title></rect>\
             <line x1=\"{p50_x:.1}\" x2=\"{p50_x:.1}\" y1=\"{top:.1}\" y2=\"{bottom:.1}\" stroke=\"#1d2330\" stroke-width=\"2\"/>\
             <line x1=\"{p95_x:.1}\" x2=\"{p95_x:.1}\" y1=\"{top:.1}\" y2=\"{bottom:.1}\" stroke=\"#1d2330\" stroke-width=\"2\" stroke-dasharray=\"3 2\"/>\
             <text x=\"{value_x:.1}\" y=\"{text_y:.1}\" font-size=\"11\" fill=\"#5b6475\">{mean:.1} (p50 {p50}, p95 {p95})</text>"
        );
    }
    out.push_str("</svg><p class=\"note\">Bar: mean turns per trial; solid mark: median (p50); dashed mark: p95.</p></div></div>\n");
}
