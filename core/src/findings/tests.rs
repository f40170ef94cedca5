use super::*;

fn bodies(review: &ParsedReview) -> Vec<&str> {
    review.findings.iter().map(|finding| finding.body.as_str()).collect()
}

fn ranks(review: &ParsedReview) -> Vec<u32> {
    review.findings.iter().map(|finding| finding.rank).collect()
}

fn severities(review: &ParsedReview) -> Vec<Option<Severity>> {
    review.findings.iter().map(|finding| finding.severity).collect()
}

fn locations(review: &ParsedReview) -> Vec<(Option<&str>, Option<i64>)> {
    review.findings.iter().map(|finding| (finding.file.as_deref(), finding.line)).collect()
}

#[test]
fn numbered_list_with_nested_bullets_and_code() {
    let review = parse_review(
        "# Review\n\
         \n\
         Here is what I found, most severe first.\n\
         \n\
         1. **[P1] `src/page.py:42`** — off-by-one in `paginate`:\n\
         \x20  - the loop uses `<=`\n\
         \x20  - so the last page repeats\n\
         \n\
         \x20  ```python\n\
         1. not an item\n\
         # not a heading\n\
         for i in range(0, n + 1):\n\
         \x20  ```\n\
         \n\
         \x20  Continuation paragraph.\n\
         2. Missing null check in `lib/util.ts` line 7.\n\
         3. Typo in README.md\n",
    );
    assert_eq!(review.format, ReviewFormat::Markdown);
    assert_eq!(ranks(&review), vec![1, 2, 3]);
    assert_eq!(
        review.findings[0].body,
        "**[P1] `src/page.py:42`** — off-by-one in `paginate`:\n\
         - the loop uses `<=`\n\
         - so the last page repeats\n\
         \n\
         ```python\n\
         1. not an item\n\
         # not a heading\n\
         for i in range(0, n + 1):\n\
         ```\n\
         \n\
         Continuation paragraph."
    );
    assert_eq!(review.findings[1].body, "Missing null check in `lib/util.ts` line 7.");
    assert_eq!(
        locations(&review),
        vec![(Some("src/page.py"), Some(42)), (Some("lib/util.ts"), Some(7)), (Some("README.md"), None)]
    );
    assert_eq!(severities(&review), vec![Some(Severity::P1), None, None]);
    assert!(review.warnings.is_empty(), "{:?}", review.warnings);
}

#[test]
fn unindented_fence_and_paragraph_between_items_belong_to_the_item_above() {
    let review = parse_review(
        "1. First issue\n\
         ```\n\
         2. still code\n\
         ```\n\
         \n\
         More about the first issue.\n\
         \n\
         2. Second issue\n\
         \n\
         Overall the change looks fine.\n",
    );
    assert_eq!(
        bodies(&review),
        vec![
            "First issue\n```\n2. still code\n```\n\nMore about the first issue.",
            // This author writes unindented continuation paragraphs, so the paragraph after
            // the last item is taken as its continuation too.
            "Second issue\n\nOverall the change looks fine."
        ]
    );
}

#[test]
fn bulleted_list() {
    let review = parse_review(
        "Findings:\n\n\
         - Race in `cache.get` when two writers race\n\
         \x20 - nested detail\n\
         * Leaks a file handle in src/io/reader.rs:88\n\
         + Magic number in config.yaml\n",
    );
    assert_eq!(
        bodies(&review),
        vec![
            "Race in `cache.get` when two writers race\n- nested detail",
            "Leaks a file handle in src/io/reader.rs:88",
            "Magic number in config.yaml",
        ]
    );
    assert_eq!(locations(&review)[1], (Some("src/io/reader.rs"), Some(88)));
}

#[test]
fn paren_enumerators() {
    let review = parse_review("1) First\n2) Second\n   continued\n3) Third\n");
    assert_eq!(bodies(&review), vec!["First", "Second\ncontinued", "Third"]);
    let review = parse_review("(1) First\n(2) Second\n");
    assert_eq!(bodies(&review), vec!["First", "Second"]);
}

#[test]
fn bold_enumerators_are_items() {
    let review = parse_review(
        "**1. Off-by-one in paginate** (`src/page.py:42`)\n\n\
         The loop runs once too often.\n\n\
         **2. Missing test**\n\n\
         Nothing covers the empty page.\n",
    );
    assert_eq!(
        bodies(&review),
        vec![
            "**Off-by-one in paginate** (`src/page.py:42`)\n\nThe loop runs once too often.",
            "**Missing test**\n\nNothing covers the empty page.",
        ]
    );
    assert_eq!(locations(&review)[0], (Some("src/page.py"), Some(42)));
}

#[test]
fn numbered_items_win_over_bullets_at_the_same_indent() {
    let review = parse_review(
        "Files reviewed:\n\
         - src/a.py\n\
         - src/b.py\n\
         \n\
         1. Bug in a\n\
         - detail of a\n\
         2. Bug in b\n",
    );
    assert_eq!(bodies(&review), vec!["Bug in a\n- detail of a", "Bug in b"]);
}

#[test]
fn right_aligned_enumerators_are_siblings() {
    let text: String = (1..=10).map(|i| format!("{i:>2}. Finding {i}\n")).collect();
    let review = parse_review(&text);
    assert_eq!(review.findings.len(), 10);
    assert_eq!(review.findings[9].body, "Finding 10");
}

#[test]
fn closing_prose_and_breaks_end_the_last_item() {
    let review = parse_review("- one\n- two\n\nOverall fine.\n");
    assert_eq!(bodies(&review), vec!["one", "two"]);
    let review = parse_review("1. one\n\n---\n\n2. two\n\n---\n\nThanks!\n");
    assert_eq!(bodies(&review), vec!["one", "two"]);
    // An author who writes unindented continuation paragraphs keeps them on the last item.
    let review = parse_review("1. one\n\nmore on one\n\n2. two\n\nmore on two\n");
    assert_eq!(bodies(&review), vec!["one\n\nmore on one", "two\n\nmore on two"]);
}

#[test]
fn heading_per_finding() {
    let review = parse_review(
        "# Code review\n\
         \n\
         ## Issues\n\
         \n\
         ### 1. Off-by-one in paginate\n\
         **File:** `src/page.py`\n\
         **Line:** 42\n\
         \n\
         - The loop uses `<=`.\n\
         - Fix: use `<`.\n\
         \n\
         #### Suggested fix\n\
         ```python\n\
         # 2. not a heading\n\
         ```\n\
         \n\
         ## Finding 2: Unchecked error in `load()`\n\
         - **Severity:** High\n\
         - `lib/load.go:17` ignores `err`.\n\
         \n\
         ## [P2] Naming\n\
         `tmp` says nothing.\n\
         \n\
         ## Summary\n\
         - Two real bugs.\n",
    );
    assert_eq!(ranks(&review), vec![1, 2, 3]);
    assert_eq!(
        review.findings[0].body,
        "Off-by-one in paginate\n**File:** `src/page.py`\n**Line:** 42\n\n- The loop uses `<=`.\n\
         - Fix: use `<`.\n\n#### Suggested fix\n```python\n# 2. not a heading\n```"
    );
    assert!(review.findings[1].body.starts_with("Finding 2: Unchecked error in `load()`\n- **Severity:** High"));
    assert_eq!(review.findings[2].body, "[P2] Naming\n`tmp` says nothing.");
    assert_eq!(severities(&review), vec![None, Some(Severity::P1), Some(Severity::P2)]);
    assert_eq!(
        locations(&review),
        vec![(Some("src/page.py"), Some(42)), (Some("lib/load.go"), Some(17)), (None, None)]
    );
    assert_eq!(review.warnings, vec!["ignored 1 list item(s) under non-finding heading(s): Summary"]);
}

#[test]
fn headings_over_finding_headings_are_groups() {
    let review = parse_review(
        "## 1. Cache layer\n\
         Intro to the cache problems.\n\
         ### 1.1 Stale entry served\n\
         Details.\n\
         ### 1.2 Race on refill\n\
         More details.\n\
         ## 2. Off-by-one in paginate\n\
         ### Why\n\
         Because.\n",
    );
    assert_eq!(
        bodies(&review),
        vec![
            "Stale entry served\nDetails.",
            "Race on refill\nMore details.",
            "Off-by-one in paginate\n### Why\nBecause.",
        ]
    );
}

#[test]
fn plain_headings_under_an_issues_heading_are_findings() {
    let review = parse_review(
        "## Issues\n\n### Off-by-one in paginate\nThe loop overruns.\n\n\
         ### Missing null check\n`user` may be null.\n\n## Conclusion\nFine otherwise.\n",
    );
    assert_eq!(
        bodies(&review),
        vec!["Off-by-one in paginate\nThe loop overruns.", "Missing null check\n`user` may be null."]
    );
}

#[test]
fn unnumbered_heading_per_finding_fallback() {
    let review = parse_review(
        "# Review\n\n## Off-by-one in paginate\nThe loop overruns.\n\n\
         ## Missing null check\n`user` may be null.\n\n## Summary\nTwo issues.\n",
    );
    assert_eq!(
        bodies(&review),
        vec!["Off-by-one in paginate\nThe loop overruns.", "Missing null check\n`user` may be null."]
    );
    // A single such heading is a title, not a finding.
    let review = parse_review("# Add pagination\n\n## Looks fine to me\nNo issues.\n");
    assert!(review.findings.is_empty());
}

#[test]
fn numbered_category_headings_group_their_items() {
    let review = parse_review(
        "## 1. Security\n- SQL built by string concatenation\n- Token logged\n\n\
         ## 2. Performance\nThe loop in `src/a.rs:9` is quadratic.\n",
    );
    assert_eq!(
        bodies(&review),
        vec![
            "SQL built by string concatenation",
            "Token logged",
            "Performance\nThe loop in `src/a.rs:9` is quadratic.",
        ]
    );
}

#[test]
fn severity_group_headings_set_severity() {
    let review = parse_review(
        "## Issues\n\
         ### 🔴 Critical\n\
         - Data loss on retry\n\
         ### Major issues\n\
         - [P0] Marker beats the group\n\
         - Unbounded cache\n\
         ### Nits\n\
         - Rename `x`\n\
         - None\n\
         ### Testing\n\
         - No tests for retry\n",
    );
    assert_eq!(
        severities(&review),
        vec![Some(Severity::P0), Some(Severity::P0), Some(Severity::P1), Some(Severity::P2), None]
    );
    assert_eq!(review.findings.len(), 5, "the `None` placeholder is not a finding");
}

#[test]
fn non_finding_sections_are_excluded() {
    let review = parse_review(
        "## Summary\n\
         - Adds pagination\n\
         - Refactors the cache\n\
         \n\
         ## ✅ What's good\n\
         - Clear naming\n\
         \n\
         ## Issues\n\
         1. Off-by-one\n\
         2. Leak\n\
         \n\
         ## Positive notes\n\
         - Good tests\n\
         \n\
         ## Strengths\n\
         ### Tests\n\
         - Thorough\n\
         \n\
         ## Summary of issues\n\
         - Third issue listed only here\n",
    );
    assert_eq!(bodies(&review), vec!["Off-by-one", "Leak", "Third issue listed only here"]);
    assert_eq!(
        review.warnings,
        vec!["ignored 5 list item(s) under non-finding heading(s): Summary, ✅ What's good, Positive notes, Tests"]
    );
}

#[test]
fn bold_section_labels_split_lists() {
    let review = parse_review(
        "- Off-by-one in paginate\n\
         - Leaked handle\n\
         \n\
         **Nits:**\n\
         - Rename `tmp`\n\
         \n\
         **Summary**\n\
         - Solid change overall\n",
    );
    assert_eq!(bodies(&review), vec!["Off-by-one in paginate", "Leaked handle", "Rename `tmp`"]);
    assert_eq!(severities(&review), vec![None, None, Some(Severity::P2)]);
}

#[test]
fn setext_headings_split_sections() {
    let review = parse_review("Issues\n======\n\n- Bug\n\nSummary\n-------\n\n- Fine\n");
    assert_eq!(bodies(&review), vec!["Bug"]);
}

#[test]
fn severity_markers_of_each_style() {
    let review = parse_review(
        "1. [P1] bracketed\n\
         2. **P0** bold level\n\
         3. (high) parenthesised word\n\
         4. Severity: major — labelled\n\
         5. 🔴 Critical: emoji and word\n\
         6. **Critical**: bold word\n\
         7. p2 lowercase level\n\
         8. `[Nit]` code tag\n\
         9. [Bug] [Low] second tag\n\
         10. **src/a.py:3** (medium): after a location\n\
         11. High memory use in the loop\n\
         12. High-level design is unclear\n\
         13. Blocker - release stopper\n\
         14. Some text\n\
         \x20   - **Priority:** P1\n\
         15. [High severity] qualified tag\n\
         16. Priority queue is unbounded\n",
    );
    use Severity::*;
    assert_eq!(
        severities(&review),
        vec![
            Some(P1),
            Some(P0),
            Some(P1),
            Some(P1),
            Some(P0),
            Some(P0),
            Some(P2),
            Some(P2),
            Some(P2),
            Some(P2),
            None,
            None,
            Some(P0),
            Some(P1),
            Some(P1),
            None,
        ]
    );
    // The marker stays in the body.
    assert_eq!(review.findings[0].body, "[P1] bracketed");
    assert_eq!(review.findings[4].body, "🔴 Critical: emoji and word");
}

#[test]
fn normalise_severity_table() {
    use Severity::*;
    for (text, expected) in [
        ("P0", Some(P0)),
        ("p1", Some(P1)),
        ("[P2]", Some(P2)),
        ("**P1**", Some(P1)),
        ("Critical", Some(P0)),
        ("blocker", Some(P0)),
        ("SEVERE", Some(P0)),
        ("high", Some(P1)),
        ("Major", Some(P1)),
        ("important", Some(P1)),
        ("medium", Some(P2)),
        ("moderate", Some(P2)),
        ("minor", Some(P2)),
        ("low", Some(P2)),
        ("nit", Some(P2)),
        ("nitpick", Some(P2)),
        ("suggestion", Some(P2)),
        ("P3", None),
        ("info", None),
        ("very high", None),
        ("", None),
    ] {
        assert_eq!(normalise_severity(text), expected, "{text:?}");
    }
}

#[test]
fn file_and_line_variants() {
    let review = parse_review(
        "- plain src/a.py:42 ref\n\
         - in backticks `src/a.py:43`\n\
         - bold **src/a.py:44**\n\
         - L form `src/a.py` L45\n\
         - word form src/a.py line 46\n\
         - range src/a.py (lines 47-49)\n\
         - GitHub anchor [link](src/a.py#L50)\n\
         - colon range `src/a.py:51-60`\n\
         - bare name utils.py without a line\n\
         - unknown extension self.items is not a file\n\
         - slash prose and/or w/o a path\n\
         - url https://github.com/o/r/blob/main/x.py#L3 is skipped\n\
         - versions 1.2.3 and e.g. abbreviations are not files\n\
         - weak Node.js loses to `web/app.js:12`\n\
         - file then standalone: in `lib/x.rb`, around the loop, see line 52\n\
         - directory in backticks `src/utils` on line 53\n\
         - Windows-free `tests/test_a.py`: line 54\n\
         - line 55 alone has no file\n",
    );
    assert_eq!(
        locations(&review),
        vec![
            (Some("src/a.py"), Some(42)),
            (Some("src/a.py"), Some(43)),
            (Some("src/a.py"), Some(44)),
            (Some("src/a.py"), Some(45)),
            (Some("src/a.py"), Some(46)),
            (Some("src/a.py"), Some(47)),
            (Some("src/a.py"), Some(50)),
            (Some("src/a.py"), Some(51)),
            (Some("utils.py"), None),
            (None, None),
            (None, None),
            (None, None),
            (None, None),
            (Some("web/app.js"), Some(12)),
            (Some("lib/x.rb"), Some(52)),
            (Some("src/utils"), Some(53)),
            (Some("tests/test_a.py"), Some(54)),
            (None, None),
        ]
    );
}

#[test]
fn code_blocks_are_searched_for_a_file_only_when_the_prose_names_none() {
    let review = parse_review(
        "1. The retry loop never ends:\n\
         \x20  ```diff\n\
         \x20  +++ b/src/retry.py\n\
         \x20  ```\n\
         2. Wrong default in `conf/app.toml`:\n\
         \x20  ```\n\
         \x20  see other/file.rs:9\n\
         \x20  ```\n",
    );
    assert_eq!(locations(&review), vec![(Some("b/src/retry.py"), None), (Some("conf/app.toml"), None)]);
}

#[test]
fn words_blank_and_no_issue_reviews() {
    let review = parse_review("  \n\t\n");
    assert_eq!(review.format, ReviewFormat::Empty);
    assert_eq!(review.words, 0);
    assert!(review.findings.is_empty());

    let review = parse_review("LGTM. No issues found.\n");
    assert_eq!(review.format, ReviewFormat::Markdown);
    assert!(review.findings.is_empty());
    assert_eq!(review.words, 4);

    let review = parse_review("1. one two\n   three\n\n- four `five`\n");
    assert_eq!(review.words, 7);
}

#[test]
fn unclosed_fence_is_reported() {
    let review = parse_review("1. Bug\n   ```\n   2. code\n");
    assert_eq!(bodies(&review), vec!["Bug\n```\n2. code"]);
    assert_eq!(
        review.warnings,
        vec!["the code fence opened on line 2 is never closed; the rest of the review is code"]
    );
}

#[test]
fn scripted_agent_markdown_parses() {
    let review = parse_review(
        "# Review\n\n1. **[P1] src/cache.py:12** — Stale entry served after expiry.\n\
         2. **[P2] src/cache.py** — Docstring out of date.\n",
    );
    assert_eq!(severities(&review), vec![Some(Severity::P1), Some(Severity::P2)]);
    assert_eq!(locations(&review), vec![(Some("src/cache.py"), Some(12)), (Some("src/cache.py"), None)]);
}

// --- JSON ---

#[test]
fn json_plain_array() {
    let text = r#"[
        {"body": " Off-by-one ", "file": "src/a.py", "line": 42, "severity": "high"},
        {"body": "Leak", "path": "src/b.py", "line": "7", "severity": "P0"},
        {"body": "Nit", "file": "", "start_line": 3.0, "severity": "whatever"}
    ]"#;
    // The harness reads `file`, `line` and `P0|P1|P2` only.
    let harness = vec![
        Finding { rank: 1, body: "Off-by-one".into(), file: Some("src/a.py".into()), line: Some(42), severity: None },
        Finding { rank: 2, body: "Leak".into(), file: None, line: Some(7), severity: Some(Severity::P0) },
        Finding { rank: 3, body: "Nit".into(), file: None, line: None, severity: None },
    ];
    assert_eq!(parse_json_findings(text).unwrap(), harness);
    // review.md's forgiving reading also takes `path`, `start_line` and severity words.
    let findings = vec![
        Finding {
            rank: 1,
            body: "Off-by-one".into(),
            file: Some("src/a.py".into()),
            line: Some(42),
            severity: Some(Severity::P1),
        },
        Finding {
            rank: 2,
            body: "Leak".into(),
            file: Some("src/b.py".into()),
            line: Some(7),
            severity: Some(Severity::P0),
        },
        Finding { rank: 3, body: "Nit".into(), file: None, line: Some(3), severity: None },
    ];
    let review = parse_review(text);
    assert_eq!(review.format, ReviewFormat::Json);
    assert_eq!(review.findings, findings);
    assert_eq!(review.words, text.split_whitespace().count());
}

#[test]
fn json_fenced() {
    let text = "Here is my review:\n\n```json\n[{\"body\": \"Leak\", \"file\": \"a.rs\", \"line\": 3}]\n```\n\n\
                Key points:\n- one leak\n";
    let findings = parse_json_findings(text).unwrap();
    assert_eq!(bodies_of(&findings), vec!["Leak"]);
    let review = parse_review(text);
    assert_eq!(review.format, ReviewFormat::Json);
    assert_eq!(review.findings, findings);
    // A fence at the very start counts as starting like JSON.
    let review = parse_review("```json\n[]\n```");
    assert_eq!(review.format, ReviewFormat::Json);
    assert!(review.findings.is_empty());
    // One-line fence.
    assert_eq!(bodies_of(&parse_json_findings("```json [{\"body\": \"x\"}]```").unwrap()), vec!["x"]);
}

fn bodies_of(findings: &[Finding]) -> Vec<&str> {
    findings.iter().map(|finding| finding.body.as_str()).collect()
}

#[test]
fn json_prose_with_arrays_last_wins() {
    let text = "Draft: [{\"body\": \"first draft\"}]\n\
                Final answer: [{\"body\": \"use arr[0] safely\", \"tags\": [\"x\"]}, {\"body\": \"second\"}]\nDone.";
    // The harness takes the last list among the values at *every* `[`: the nested `["x"]`,
    // which holds no comment, and the answer looks structured.
    assert_eq!(parse_json_findings(text), Err(JsonFindingsError::NoComments));
    let review = parse_review(text);
    assert_eq!(review.format, ReviewFormat::Json);
    assert_eq!(bodies_of(&review.findings), vec!["use arr[0] safely", "second"]);
    assert_eq!(ranks_of(&review.findings), vec![1, 2]);
}

fn ranks_of(findings: &[Finding]) -> Vec<u32> {
    findings.iter().map(|finding| finding.rank).collect()
}

#[test]
fn json_object_with_comments() {
    let text = r#"{"summary": "ok", "comments": [{"body": "a", "line": 1}, {"body": "b"}]}"#;
    assert_eq!(bodies_of(&parse_json_findings(text).unwrap()), vec!["a", "b"]);
    let prose = format!("Result:\n{text}\nthanks");
    assert_eq!(bodies_of(&parse_json_findings(&prose).unwrap()), vec!["a", "b"]);
    assert_eq!(parse_json_findings(r#"{"comments": []}"#), Ok(vec![]));
}

#[test]
fn json_single_objects() {
    let text = "First: {\"body\": \"a\", \"file\": \"x.py\", \"meta\": {\"body\": \"nested\"}}\n\
                Then {\"note\": {\"body\": \"inner\"}} and a truncated list [{\"body\": \"b\"}, {\"body\": \"c";
    let findings = parse_json_findings(text).unwrap();
    // Every object with a string body, nested ones included (the harness's last resort).
    assert_eq!(bodies_of(&findings), vec!["a", "nested", "inner", "b"]);
    assert_eq!(bodies_of(&parse_review(text).findings), vec!["a", "inner", "b"]);
    assert_eq!(findings[0].file.as_deref(), Some("x.py"));
    // A single object as the whole answer is JSON, but not a list: no comment, and it looks
    // structured.
    assert_eq!(parse_json_findings(r#"{"body": "only"}"#), Err(JsonFindingsError::NoComments));
    assert_eq!(bodies_of(&parse_review(r#"{"body": "only"}"#).findings), vec!["only"]);
}

#[test]
fn json_keeps_the_first_thirty() {
    let items: Vec<String> = (1..=35).map(|i| format!("{{\"body\": \"c{i}\"}}")).collect();
    let text = format!("[{}]", items.join(","));
    let findings = parse_json_findings(&text).unwrap();
    assert_eq!(findings.len(), MAX_JSON_COMMENTS);
    assert_eq!(findings[29].body, "c30");
    assert_eq!(findings[29].rank, 30);
    let review = parse_review(&text);
    assert_eq!(review.warnings, vec!["kept the first 30 of 35 JSON comments"]);
}

#[test]
fn json_items_without_body_are_skipped() {
    let text = r#"[{"file": "a.py"}, "text", {"body": "  "}, {"body": 3}, {"body": "real"}]"#;
    // The harness takes `str(body)` of a number.
    let findings = parse_json_findings(text).unwrap();
    assert_eq!(bodies_of(&findings), vec!["3", "real"]);
    assert_eq!(findings[0].rank, 1);
    let review = parse_review(text);
    assert_eq!(bodies_of(&review.findings), vec!["real"]);
    assert_eq!(review.warnings, vec!["skipped 4 JSON item(s) without a non-empty string `body`"]);
}

#[test]
fn json_errors_follow_the_harness() {
    // No comment and nothing that looks structured: an empty review.
    assert_eq!(parse_json_findings(r#"[{"file": "a.py"}]"#), Ok(vec![]));
    assert_eq!(parse_json_findings("Nothing: []"), Ok(vec![]));
    assert_eq!(parse_json_findings(""), Ok(vec![]));
    // No comment from an answer with `"body":` or a json fence.
    assert_eq!(parse_json_findings(r#"{"issues": [{"body": "x"}]}"#), Err(JsonFindingsError::NoComments));
    assert_eq!(parse_json_findings("```json\n{\"ok\": true}\n```"), Err(JsonFindingsError::NoComments));
    // Nothing decodes.
    assert_eq!(parse_json_findings("Findings: [ {\"body\": "), Err(JsonFindingsError::NotJson));
    assert_eq!(parse_json_findings("No issues found."), Err(JsonFindingsError::NotJson));
}

#[test]
fn swe_prbench_answers_have_one_reading() {
    assert_eq!(parse_swe_prbench_answer("[{\"body\": \"x\"}]").format, ReviewFormat::Json);
    assert_eq!(parse_swe_prbench_answer("[]").format, ReviewFormat::Empty);
    assert_eq!(parse_swe_prbench_answer("  ").format, ReviewFormat::Empty);
    let markdown = parse_swe_prbench_answer("1. **[P1]** `a.py:3` — the loop never ends.");
    assert_eq!(markdown.format, ReviewFormat::Unparseable);
    assert_eq!(markdown.warnings, vec![JsonFindingsError::NotJson.to_string()]);
    // review.md's reading would have found a markdown finding here.
    assert_eq!(parse_review("1. **[P1]** `a.py:3` — the loop never ends.").findings.len(), 1);
}

#[test]
fn json_empty_array_is_no_findings() {
    assert_eq!(parse_json_findings("[]"), Ok(vec![]));
    assert_eq!(parse_json_findings("  [ ]\n"), Ok(vec![]));
    let review = parse_review("[]");
    assert_eq!(review.format, ReviewFormat::Json);
    assert!(review.findings.is_empty());
    assert_eq!(review.words, 1);
}

#[test]
fn broken_json_falls_back_to_markdown() {
    let review = parse_review("[{\"body\": \"oops\"\n\n- a markdown finding\n");
    assert_eq!(review.format, ReviewFormat::Markdown);
    assert_eq!(bodies(&review), vec!["a markdown finding"]);
    assert_eq!(
        review.warnings,
        vec![
            "the review starts like JSON but no comment with a non-empty `body` could be decoded from the \
             structured output; parsed it as markdown"
        ]
    );
    // A markdown review that merely opens with a tag is not JSON.
    let review = parse_review("[P1] The only finding, as a paragraph.\n\n- [P2] a listed one\n");
    assert!(review.warnings.is_empty());
    assert_eq!(bodies(&review), vec!["[P2] a listed one"]);
}

#[test]
fn json_answer_with_a_bulleted_aside() {
    let text = "Summary of the change:\n- adds a cache\n- adds a flag\n\n\
                [\n  {\"body\": \"Race on refill\", \"file\": \"src/cache.py\", \"line\": 12}\n]\n";
    let review = parse_review(text);
    assert_eq!(review.format, ReviewFormat::Json);
    assert_eq!(bodies(&review), vec!["Race on refill"]);
}

#[test]
fn group_headings_under_a_summary_title_are_findings() {
    let review = parse_review(
        "# Summary of the review\n\n- adds a cache\n\n## Critical\n- Data loss\n\n### Tests\n- Thorough\n",
    );
    assert_eq!(bodies(&review), vec!["Data loss", "Thorough"]);
    assert_eq!(severities(&review), vec![Some(Severity::P0), Some(Severity::P0)]);
}

#[test]
fn markdown_findings_with_json_snippets_stay_markdown() {
    let review = parse_review("1. The payload drops `body`:\n   ```json\n   [{\"body\": \"x\"}]\n   ```\n2. Second\n");
    assert_eq!(review.format, ReviewFormat::Markdown);
    assert_eq!(review.findings.len(), 2);
}

#[test]
fn serde_shapes() {
    assert_eq!(serde_json::to_string(&ReviewFormat::Markdown).unwrap(), "\"markdown\"");
    assert_eq!(serde_json::to_string(&ReviewFormat::Json).unwrap(), "\"json\"");
    assert_eq!(serde_json::to_string(&ReviewFormat::Empty).unwrap(), "\"empty\"");
    let finding = Finding { rank: 1, body: "b".into(), file: None, line: None, severity: Some(Severity::P0) };
    let json = serde_json::to_string(&finding).unwrap();
    assert_eq!(json, r#"{"rank":1,"body":"b","severity":"P0"}"#);
    assert_eq!(serde_json::from_str::<Finding>(r#"{"rank":1,"body":"b"}"#).unwrap().severity, None);
    let review = parse_review("- one");
    let round: ParsedReview = serde_json::from_str(&serde_json::to_string(&review).unwrap()).unwrap();
    assert_eq!(round, review);
}

// --- Hostile input ---

/// What every parse promises whatever the text (see the module docs' "Limits").
fn assert_bounded(text: &str, review: &ParsedReview) {
    for (index, finding) in review.findings.iter().enumerate() {
        assert_eq!(finding.rank as usize, index + 1, "ranks are 1..n in order");
        assert!(!finding.body.trim().is_empty(), "a finding has a body");
        assert!(finding.body.len() <= text.len(), "a body is no longer than the review");
    }
    match review.format {
        ReviewFormat::Json => assert!(review.findings.len() <= MAX_JSON_COMMENTS),
        ReviewFormat::Markdown => {
            assert!(review.findings.len() <= text.lines().count(), "at most one finding per line");
            for finding in &review.findings {
                assert!(finding.line.is_none_or(|line| (0..=999_999_999).contains(&line)));
            }
        }
        ReviewFormat::Empty | ReviewFormat::Unparseable => assert!(review.findings.is_empty()),
    }
    let fences = text.matches("```").count() + text.matches("~~~").count();
    assert!(review.warnings.len() <= 2 + fences, "{} warnings", review.warnings.len());
    assert_eq!(review.words, text.split_whitespace().count());
}

#[test]
fn pathological_reviews_parse_to_bounded_results() {
    let deep_quotes = format!("{} 1. quoted\n", ">".repeat(10_000));
    let deep_list: String = (0..2_000).map(|depth| format!("{}- level {depth}\n", "  ".repeat(depth))).collect();
    let deep_ordered: String = (0..2_000).map(|depth| format!("{}1. level {depth}\n", "   ".repeat(depth))).collect();
    let backticks = format!("1. {}\n2. after `{}` ticks\n", "`".repeat(10_000), "`".repeat(10_000));
    let fence_runs: String = (0..2_000).map(|i| format!("{} {i}\n", "`".repeat(3 + i % 7))).collect();
    let huge_line = format!("- src/a.py:1 {}\n", "word [P1] `x` ** ( [ { ".repeat(40_000));
    // The JSON readings decode a value at every `[` and `{` (as SWE-PRBench's harness does), so
    // these cost time in proportion to their square; kept small.
    let brackets = format!("Findings: {}\n- one\n", "[".repeat(2_000));
    let braces = format!("{}\n", "{\"body\": ".repeat(500));
    let emphasis = format!("1. {}\n", "**_".repeat(20_000));
    // Fences under list items that CommonMark closes early: each costs a repair, up to the cap.
    let broken_fences: String = (0..200).map(|i| format!("{}. item\n   ```\ncode {i}\n   ```\n", i + 1)).collect();
    let headings: String =
        (0..5_000).map(|i| format!("{} {i}. Heading\n- item {i}\n", "#".repeat(1 + i % 6))).collect();
    for text in [
        &deep_quotes,
        &deep_list,
        &deep_ordered,
        &backticks,
        &fence_runs,
        &huge_line,
        &brackets,
        &braces,
        &emphasis,
        &broken_fences,
        &headings,
    ] {
        let review = parse_review(text);
        assert_bounded(text, &review);
    }
    // The bounded outcomes of some of them.
    assert_eq!(parse_review(&deep_list).findings.len(), 1, "nested items are the first item's details");
    assert_eq!(parse_review(&deep_ordered).findings.len(), 1);
    // The run of backticks opens a fence in the first item, never closed: the rest is its code.
    assert_eq!(parse_review(&backticks).findings.len(), 1);
    assert_eq!(parse_review(&brackets).findings.len(), 1);
    assert!(parse_review(&deep_quotes).findings.is_empty(), "quoted text is not a finding");
    let broken = parse_review(&broken_fences);
    assert_eq!(broken.findings.len(), 200);
    assert_eq!(broken.findings[0].body, "item\n```\ncode 0\n```");
}

mod properties {
    use proptest::prelude::*;

    use super::{assert_bounded, parse_review};

    /// Lines of markdown a review is made of, hostile ones included.
    fn review_line() -> impl Strategy<Value = String> {
        prop_oneof![
            Just(String::new()),
            "[0-9]{1,3}[.)] [a-z `*\\[\\]P0-2]{0,20}",
            " {0,6}[-*+] [a-z `:/.0-9]{0,20}",
            "#{1,7} [0-9a-zA-Z .:\\[\\]]{0,20}",
            "(`{3,5}|~{3,4})[a-z]{0,4}",
            " {0,4}(```|~~~)",
            "(>+ ?){0,5}[a-z -]{0,10}",
            "\\*\\*[0-9]\\. [A-Za-z ]{0,12}\\*\\*",
            "\\([0-9]\\) [a-z]{0,10}",
            "(=+|-+|\\*\\*\\*|___)",
            "[\\[\\]{}\":,a-z ]{0,30}",
            "\\PC{0,40}",
        ]
    }

    proptest! {
        #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

        #[test]
        fn arbitrary_strings_parse_to_bounded_results(text in "\\PC{0,400}") {
            let review = parse_review(&text);
            assert_bounded(&text, &review);
        }

        #[test]
        fn markdown_like_reviews_parse_to_bounded_results(
            lines in proptest::collection::vec(review_line(), 0..40),
        ) {
            let text = lines.join("\n");
            let review = parse_review(&text);
            assert_bounded(&text, &review);
        }
    }
}
