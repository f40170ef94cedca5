#!/usr/bin/env python3
"""Writes the SWE-PRBench golden inputs: a small synthetic dataset in the benchmark's
own layout, the recorded agent/judge answers (replay.json) and fixed embedding
vectors (vectors.json).

Every case is written out here explicitly; the committed files under inputs/ are the
truth, this script only documents how they were made and can regenerate them.
Usage: make_inputs.py OUT_DIR
"""
from __future__ import annotations

import json
import math
import sys
from pathlib import Path

DIM = 64
HUMAN_DIMS = 16  # human comment k of a task points along basis vector k

FULL = {
    "A": "config_A_diff_only",
    "B": "config_B_with_file_content",
    "C": "config_C_full_context",
}
SHORT = {"A": "config_A", "B": "config_B", "C": "config_C"}


class Vectors:
    """text -> vector; a text seen twice must get the same vector."""

    def __init__(self) -> None:
        self.by_text: dict[str, list[float]] = {}

    def put(self, text: str, parts: dict[int, float]) -> None:
        vec = [0.0] * DIM
        for dim, val in parts.items():
            vec[dim] = float(val)
        old = self.by_text.get(text)
        if old is not None and old != vec:
            raise ValueError(f"text given two different vectors: {text!r}")
        self.by_text[text] = vec


VECTORS = Vectors()


class Task:
    def __init__(self, task_id: str, pr: dict, diff: str) -> None:
        self.task_id = task_id
        self.pr = dict(pr)
        self.pr["diff_patch"] = diff
        self.next_noise = HUMAN_DIMS
        self.human_dim: dict[str, int] = {}
        self.annotation: dict = {"comments": []}
        self.annotation_file = f"{task_id}_human.json"
        self.contexts: dict[str, dict] = {}
        self.records: dict[str, dict] = {}

    # -- vectors -----------------------------------------------------------
    def noise(self) -> int:
        dim = self.next_noise
        self.next_noise += 1
        if dim >= DIM:
            raise ValueError(f"{self.task_id}: out of noise dimensions")
        return dim

    def human(self, comment: dict, ground_truth_dim: int | None = None) -> dict:
        self.annotation["comments"].append(comment)
        if ground_truth_dim is not None:
            VECTORS.put(str(comment.get("body") or ""), {ground_truth_dim: 1})
            self.human_dim[str(comment["comment_id"])] = ground_truth_dim
        return comment

    def agent_text(self, body: str, toward: str | None = None, a: float = 0, b: float = 1,
                   extra: dict[int, float] | None = None) -> str:
        """Vector a*e(human) + b*e(fresh noise dim) (+extra); cosine to that human = a/sqrt(a^2+b^2)."""
        if body in VECTORS.by_text:
            return body
        parts: dict[int, float] = {}
        if toward is not None:
            parts[self.human_dim[toward]] = a
        if b:
            parts[self.noise()] = b
        for dim, val in (extra or {}).items():
            parts[dim] = val
        VECTORS.put(body, parts)
        return body

    # -- contexts and answers ---------------------------------------------
    def context(self, cfg: str, rel_path: str, config_name: str | None = "full",
                extra_text: str = "", pipeline_version: str | None = "v0.4.1") -> None:
        name = FULL[cfg] if config_name == "full" else config_name
        marker = f"Golden review context {self.task_id} / {FULL[cfg]}"
        rendered = (
            f"{marker}\n\n# Pull request {self.pr.get('repo')}#{self.pr.get('pr_number') or self.pr.get('number')}\n\n"
            f"## Diff\n{self.pr['diff_patch']}\n{extra_text}"
        )
        body: dict = {"task_id": self.task_id, "rendered": rendered, "total_tokens": len(rendered) // 4}
        if name is not None:
            body["config_name"] = name
        if pipeline_version is not None:
            body["pipeline_version"] = pipeline_version
        body["pr_number"] = self.pr.get("pr_number") or self.pr.get("number")
        body["repo"] = self.pr.get("repo")
        self.contexts[cfg] = {"path": rel_path, "body": body, "marker": marker, "config_name": name or FULL[cfg]}

    def comment_id(self, cfg: str, index: int) -> str:
        return f"{self.task_id}_{self.contexts[cfg]['config_name']}_{index}"

    def record(self, cfg: str, agent: list, judge: list, covers: list[str]) -> None:
        self.records[cfg] = {"agent": agent, "judge": judge, "covers": covers}


def c(body: str, file: str | None, line, severity) -> dict:
    return {"body": body, "file": file, "line": line, "severity": severity}


def cls(cid: str, classification: str, human: str | None, score, reasoning: str = "golden") -> dict:
    return {
        "comment_id": cid,
        "classification": classification,
        "matched_human_comment_id": human,
        "actionability_score": score,
        "reasoning": reasoning,
    }


def judge_answer(classes: list, statuses: list | None = None) -> str:
    payload: dict = {"agent_classifications": classes}
    if statuses is not None:
        payload["human_comment_statuses"] = statuses
    return json.dumps(payload, indent=2)


def st(cid, status: str, agent: str | None) -> dict:
    return {"comment_id": cid, "status": status, "matched_agent_comment_id": agent}


def arr(items: list) -> str:
    return json.dumps(items, indent=2)


TASKS: list[Task] = []


def new_task(task_id: str, pr: dict, diff: str) -> Task:
    t = Task(task_id, pr, diff)
    TASKS.append(t)
    return t


# ---------------------------------------------------------------------------
# T1 alpha__101 — Type1, ground truth by substantive_comment_ids, answer shapes
# ---------------------------------------------------------------------------
ALPHA_DIFF = """diff --git a/app/cache.py b/app/cache.py
index 1111111..2222222 100644
--- a/app/cache.py
+++ b/app/cache.py
@@ -10,6 +10,9 @@ class Cache:
     def get(self, key):
-        return self._store[key]
+        if key not in self._store:
+            return None
+        value = self._store[key]
+        return value
 
     def put(self, key, value):
         self._store[key] = value
"""
t = new_task("alpha__101", {"task_id": "alpha__101", "repo": "org/alpha", "pr_number": 101,
                            "difficulty": "Type1_Direct", "pr_type": "bugfix", "language": "python"}, ALPHA_DIFF)
t.annotation["substantive_comment_ids"] = ["a1", "a2", "a3"]
t.human({"comment_id": "a1", "file": "app/cache.py", "line": 11, "severity": "P1", "is_initiating_comment": True,
         "body": "get() now returns None for missing keys, which hides KeyError from callers that relied on it in the alpha cache."}, 0)
t.human({"comment_id": "a2", "file": "app/cache.py", "line": 13, "severity": "P2", "is_initiating_comment": True,
         "body": "The temporary variable value in alpha get adds nothing; return the lookup directly."}, 1)
t.human({"comment_id": "a3", "file": "app/cache.py", "line": 16, "severity": "P0", "is_initiating_comment": True,
         "body": "put() in the alpha cache never evicts entries, so memory grows without bound under load."}, 2)
t.human({"comment_id": "a4", "file": "app/cache.py", "line": 11, "severity": "P2", "is_initiating_comment": False,
         "body": "Agreed with the above, thanks for the quick fix on alpha."})
for cfg in "ABC":
    t.context(cfg, f"contexts/{SHORT[cfg]}/alpha__101.json", extra_text="" if cfg == "A" else f"\n## Files ({cfg})\napp/cache.py\n")
A0 = t.agent_text("alpha get() swallows the missing-key error by returning None; callers expecting KeyError will misbehave.", "a1", 4, 3)
A1 = t.agent_text("alpha put() has no eviction policy, so the store grows forever.", "a3", 3, 4)
A2 = t.agent_text("alpha Cache lacks a docstring for get.")
A3 = t.agent_text("alpha get() reads self._cache, which does not exist.")
t.record("A",
         [arr([c(A0, "app/cache.py", 11, "P1"), c(A1, "app/cache.py", 16, "P1"), c(A2, "app/cache.py", 10, "P2"), c(A3, "app/cache.py", 12, "P0")])],
         [judge_answer([cls(t.comment_id("A", 0), "CONFIRMED", "a1", 4), cls(t.comment_id("A", 1), "CONFIRMED", "a3", 5),
                        cls(t.comment_id("A", 2), "PLAUSIBLE", None, 2), cls(t.comment_id("A", 3), "FABRICATED", None, 1)],
                       [st("a1", "CAUGHT", t.comment_id("A", 0)), st("a2", "MISSED", None), st("a3", "CAUGHT", t.comment_id("A", 1))])],
         ["bare JSON array answer", "substantive_comment_ids selects ground truth (a4 excluded)", "stage-1 CONFIRMED pairs",
          "severity_accuracy 1 of 2", "FABRICATED counts in hallucination/false_positive_rate", "context path contexts/config_X/{task_id}.json"])
B1 = t.agent_text("alpha get adds a needless temporary named value before returning.", "a2", 1, 1)
t.record("B",
         ["```json\n" + arr([c(A0, "app/cache.py", 11, "p1"), c(B1, "app/cache.py", 13, "P2"), c(A1, "app/cache.py", 16, "P0")]) + "\n```"],
         [judge_answer([cls(t.comment_id("B", 0), "CONFIRMED", "a1", "4"), cls(t.comment_id("B", 1), "CONFIRMED", "a2", 4.7),
                        cls(t.comment_id("B", 2), "CONFIRMED", "a3", 9)],
                       [st("a1", "CAUGHT", t.comment_id("B", 0)), st("a2", "CAUGHT", t.comment_id("B", 1)), st("a3", "CAUGHT", t.comment_id("B", 2))])],
         ["```json fenced answer", "severity 'p1' normalised to P1", "actionability '4' -> 4, 4.7 -> int 4, 9 -> clamp 5",
          "severity_accuracy 1.0", "detection_rate 1.0 / coverage 1"])
C1 = t.agent_text("alpha put() should cap the store size; unbounded growth is a memory leak.", "a3", 4, 3)
VECTORS.put("alpha put() should cap store size since unbounded growth leaks memory.", dict(
    (i, v) for i, v in enumerate(VECTORS.by_text[C1]) if v))
C2 = "alpha put() should cap store size since unbounded growth leaks memory."
t.record("C",
         ["I reviewed the change carefully. Findings:\n\n" + arr([c(A0, "app/cache.py", 40, "P1"), c(C1, "app/cache.py", 16, "P0"), c(C2, "app/cache.py", 16, "P0")])
          + "\n\nThese are the main risks."],
         [judge_answer([cls(t.comment_id("C", 0), "CONFIRMED", "a1", 3), cls(t.comment_id("C", 1), "CONFIRMED", "a3", 4),
                        cls(t.comment_id("C", 2), "CONFIRMED", "a3", 4)],
                       [st("a1", "CAUGHT", t.comment_id("C", 0)), st("a2", "MISSED", None), st("a3", "CAUGHT", t.comment_id("C", 1))])],
         ["prose-wrapped JSON array (raw_decode candidates)", "stage-1 tie (same actionability and similarity): judge order wins",
          "stage 2 below 0.3 with same-file+line bonus (0.25)", "duplicate cluster (cosine 1) -> redundancy_penalty 1/3",
          "Type1 in config C: adjacent_detection_rate 0 although line 40 is outside the diff"])

# ---------------------------------------------------------------------------
# T2 beta__202 — Type2, ground truth by is_initiating_comment, adjacency
# ---------------------------------------------------------------------------
BETA_DIFF = """diff --git a/server/handler.go b/server/handler.go
index 3333333..4444444 100644
--- a/server/handler.go
+++ b/server/handler.go
@@ -20,7 +20,9 @@ func (h *Handler) Serve(w http.ResponseWriter, r *http.Request) {
 	ctx := r.Context()
-	data, _ := h.store.Load(ctx, r.URL.Path)
+	data, err := h.store.Load(ctx, r.URL.Path)
+	if err != nil {
+		return
+	}
 	w.Write(data)
 }
 
@@ -50,4 +52,5 @@ func (h *Handler) Close() error {
 	h.mu.Lock()
+	h.closed = true
 	h.mu.Unlock()
 	return nil
"""
t = new_task("beta__202", {"task_id": "beta__202", "repo": "org/beta", "pr_number": 202,
                           "difficulty": "Type2_Contextual", "pr_type": "bugfix", "language": "go"}, BETA_DIFF)
t.human({"comment_id": "b1", "file": "server/handler.go", "line": 23, "severity": "P1", "is_initiating_comment": True,
         "body": "beta Serve returns silently on a Load error; the client gets an empty 200 instead of a 500."}, 0)
t.human({"comment_id": "b2", "file": "server/handler.go", "line": 53, "severity": "", "is_initiating_comment": True,
         "body": "beta Close sets closed but Serve never checks h.closed, so requests after Close still hit the store."}, 1)
t.human({"comment_id": "b3", "file": "server/handler.go", "line": 53, "severity": "P2", "is_initiating_comment": False,
         "body": "Good point, I will add the check to beta Serve in a follow-up."})
t.human({"comment_id": "b4", "file": "server/store.go", "line": 88, "is_initiating_comment": True,
         "body": "beta store.Load ignores context cancellation, so the new error path rarely fires."}, 2)
t.context("A", "contexts/config_A/beta__202_config_A.json")
t.context("B", "contexts/beta__202_config_B.json", extra_text="\n## File server/handler.go\n(package server)\n")
t.context("C", "contexts/beta__202_config_C_full_context.json", extra_text="\n## Related\nserver/store.go\n")
BA0 = t.agent_text("beta Serve swallows the Load error and writes nothing, so clients see an empty success response.", "b1", 4, 3)
BA1 = t.agent_text("beta Close should also wait for in-flight requests before returning.", "b2", 1, 2)
t.record("A",
         [json.dumps({"comments": [c(BA0, "server/handler.go", 22, "P1"), c(BA1, "server/handler.go", 53, "P2")]})],
         [judge_answer([cls(t.comment_id("A", 0), "CONFIRMED", "b1", 4), cls(t.comment_id("A", 1), "PLAUSIBLE", None, 3)],
                       [st("b1", "CAUGHT", t.comment_id("A", 0)), st("b2", "MISSED", None), st("b4", "MISSED", None)])],
         ["{\"comments\": [...]} answer", "is_initiating_comment selects ground truth (no substantive_comment_ids; b3 excluded)",
          "stage 2 promotes a judge-PLAUSIBLE comment (0.447 + 0.15 + 0.10) with the judge's actionability",
          "context path contexts/config_X/{task_id}_config_X.json"])
t.record("B",
         [json.dumps({"issues": [c(BA0, "server/handler.go", 22, "P1")]}), arr([c(BA0, "server/handler.go", 22, "P1")])],
         [judge_answer([cls(t.comment_id("B", 0), "CONFIRMED", "b1", 5)],
                       [st("b1", "CAUGHT", t.comment_id("B", 0)), st("b2", "MISSED", None), st("b4", "MISSED", None)])],
         ["{\"issues\": [...]} extracts no comments, looks structured -> parse retry", "retry answer used (raw_response = retry)",
          "context path contexts/{task_id}_config_X.json"])
BC1 = t.agent_text("beta Load in store.go drops ctx cancellation, so errors are rare.", "b4", 4, 3)
BC2 = t.agent_text("beta handler has no request logging.")
BC3 = t.agent_text("beta Close flag is never read by Serve.", "b2", 3, 1)
BC4 = t.agent_text("beta metrics counter is never incremented in Serve.")
t.record("C",
         [arr([c(BA0, "server/handler.go", 25, "P1"), c(BC1, "server/store.go", 88, "p2"), c(BC2, None, None, "critical"),
               c(BC3, "server/handler.go", "53", "P3"), c(BC4, "server/handler.go", "n/a", "P1")])],
         [judge_answer([cls(t.comment_id("C", 0), "CONFIRMED", "b1", 4), cls(t.comment_id("C", 1), "CONFIRMED", "b4", 4),
                        cls(t.comment_id("C", 2), "PLAUSIBLE", None, 2), cls(t.comment_id("C", 3), "CONFIRMED", "b2", "5"),
                        cls(t.comment_id("C", 4), "FABRICATED", None, 1)])],
         ["adjacent_detection_rate 2/5: a context line (25) and another file's line (88) count as outside, null and 'n/a' lines do not",
          "line '53' parsed with int()", "severity 'critical'/'P3' -> none", "severity_accuracy skips pairs missing a severity",
          "context path contexts/{task_id}_config_C_full_context.json"])

# ---------------------------------------------------------------------------
# T3 gamma__7 — Type3, files named by PR number, short config name in C
# ---------------------------------------------------------------------------
GAMMA_DIFF = """diff --git a/src/parser.rs b/src/parser.rs
index 5555555..6666666 100644
--- a/src/parser.rs
+++ b/src/parser.rs
@@ -1,5 +1,6 @@
 pub fn parse(input: &str) -> Result<Ast, Error> {
-    let tokens = lex(input);
+    let tokens = lex(input)?;
+    check_depth(&tokens)?;
     build(tokens)
 }
"""
t = new_task("gamma__7", {"task_id": "gamma__7", "repo": "org/gamma", "pr_number": 7,
                          "difficulty": "Type3_Latent_Candidate", "pr_type": "feature", "language": "rust"}, GAMMA_DIFF)
t.annotation_file = "7_human.json"
t.annotation["substantive_comment_ids"] = ["g1", "g2"]
t.human({"comment_id": "g1", "file": "src/lexer.rs", "line": 40, "severity": "P0", "is_initiating_comment": True,
         "body": "gamma lex() now returns a Result but lexer.rs still panics on invalid UTF-8 instead of returning an error."}, 0)
t.human({"comment_id": "g2", "file": "src/parser.rs", "line": 3, "severity": "P2", "is_initiating_comment": True,
         "body": "gamma check_depth is called but its limit of 64 is hard-coded in depth.rs; make it configurable."}, 1)
t.human({"comment_id": "g3", "file": "src/parser.rs", "line": 2, "severity": "P2", "is_initiating_comment": True,
         "body": "gamma nit: the question mark could move to the next line."})
t.context("A", "contexts/config_A/7_config_A.json")
t.context("B", "contexts/config_B/7_config_B_with_file_content.json", extra_text="\n## File src/parser.rs\n")
t.context("C", "contexts/7_config_C.json", config_name="config_C", extra_text="\n## Related\nsrc/lexer.rs\nsrc/depth.rs\n")
GA0 = t.agent_text("gamma lexer.rs panics on invalid UTF-8 even though lex now returns Result.", "g1", 4, 3)
GA1 = t.agent_text("gamma parse should document the new error cases.")
t.record("A",
         [arr([c(GA0, "src/lexer.rs", 40, "P0"), c(GA1, "src/parser.rs", 1, "P2")])],
         [judge_answer([cls(t.comment_id("A", 0), "CONFIRMED", "g1", 5), cls(t.comment_id("A", 1), "PLAUSIBLE", None, 2)],
                       [st("g1", "CAUGHT", t.comment_id("A", 0)), st("g2", "MISSED", None)])],
         ["annotation file {pr_number}_human.json", "substantive ids exclude an initiating comment (g3)",
          "context path contexts/config_X/{pr_number}_config_X.json", "stage 2 at 0.25 (< 0.3) stays PLAUSIBLE"])
t.record("B",
         ["Findings below.\n" + json.dumps([c(GA0, "src/lexer.rs", 40, "P0")]) + "\nSee note [1].",
          arr([c(GA0, "src/lexer.rs", 40, "P0"), c(GA1, "src/parser.rs", 1, "P2")])],
         [judge_answer([cls(t.comment_id("B", 0), "CONFIRMED", "g1", 5), cls(t.comment_id("B", 1), "PLAUSIBLE", None, 2)],
                       [st("g1", "CAUGHT", t.comment_id("B", 0)), st("g2", "MISSED", None)])],
         ["prose answer whose last JSON candidate is '[1]': list wins, no comments, looks structured -> retry",
          "context path contexts/config_X/{pr_number}_{full config name}.json"])
GC1 = t.agent_text("gamma depth limit in depth.rs is hard-coded at 64.", "g2", 3, 4)
t.record("C",
         [arr([c(GA0, "src/lexer.rs", 40, "P0"), c(GC1, "src/depth.rs", 12, "P2")])],
         [judge_answer([cls(t.comment_id("C", 0), "CONFIRMED", "g1", 4), cls(t.comment_id("C", 1), "CONFIRMED", "g2", 3)],
                       [st("g1", "CAUGHT", t.comment_id("C", 0)), st("g2", "CAUGHT", t.comment_id("C", 1))])],
         ["context config_name 'config_C' (short): adjacent_detection_rate 0 for a Type3 PR with outside-diff comments",
          "comment ids use the context's config_name (gamma__7_config_C_<i>)", "aggregate groups 'config_C' with config_C",
          "context path contexts/{pr_number}_config_X.json"])

# ---------------------------------------------------------------------------
# T4 delta__7 — same PR number as gamma (total_prs), plausible-only record
# ---------------------------------------------------------------------------
DELTA_DIFF = """diff --git a/web/api.ts b/web/api.ts
index 7777777..8888888 100644
--- a/web/api.ts
+++ b/web/api.ts
@@ -30,3 +30,4 @@ export async function fetchUser(id: string) {
   const res = await fetch(`/users/${id}`);
+  if (!res.ok) throw new Error(`status ${res.status}`);
   return res.json();
 }
"""
t = new_task("delta__7", {"task_id": "delta__7", "repo": "org/delta", "pr_number": 7,
                          "difficulty": "Type3_Latent_Candidate", "pr_type": "bugfix", "language": "typescript"}, DELTA_DIFF)
t.annotation["substantive_comment_ids"] = ["d1"]
t.human({"comment_id": "d1", "file": "web/client.ts", "line": 12, "severity": "P1",
         "body": "delta callers in client.ts catch nothing, so the new throw in fetchUser crashes the page."}, 0)
t.context("A", "contexts/config_A/delta__7.json", pipeline_version=None)
t.context("B", "contexts/config_B/delta__7.json", extra_text="\n## File web/api.ts\n")
t.context("C", "contexts/config_C/delta__7.json", config_name=None, extra_text="\n## Related\nweb/client.ts\n")
DA0 = t.agent_text("delta fetchUser now throws but client.ts never catches it, crashing the page.", "d1", 4, 3)
DA1 = t.agent_text("delta error message should include the user id.")
t.record("A",
         [arr([c(DA0, "web/client.ts", 12, "P1"), c(DA1, "web/api.ts", 31, "P2")])],
         [judge_answer([cls(t.comment_id("A", 0), "CONFIRMED", "d1", 4), cls(t.comment_id("A", 1), "PLAUSIBLE", None, 3)],
                       [st("d1", "CAUGHT", t.comment_id("A", 0))])],
         ["second task with pr_number 7: total_prs counts distinct PR numbers", "context without pipeline_version -> ''"])
DB0 = t.agent_text("delta fetchUser could add retries for transient failures.")
DB1 = t.agent_text("delta res.json() can also throw on malformed bodies.")
t.record("B",
         [arr([c(DB0, "web/api.ts", 31, "P2"), c(DB1, "web/api.ts", 32, "P1")])],
         [judge_answer([cls(t.comment_id("B", 0), "PLAUSIBLE", None, 5), cls(t.comment_id("B", 1), "PLAUSIBLE", None, 4)],
                       [st("d1", "MISSED", None)])],
         ["plausible-only: confirmed 0 -> actionability weighted x0.2 in the composite (small positive score)",
          "fewer than 3 comments -> plausible_penalty 0", "coverage 0"])
DC1 = t.agent_text("delta the thrown Error loses the response body.")
DC2 = t.agent_text("delta fetchUser ignores the AbortSignal of the caller.")
t.record("C",
         [arr([c(DA0, "web/client.ts", 12, "P1"), c(DC1, "web/api.ts", 31, "P2"), c(DC2, "web/api.ts", 29, "P2")])],
         [judge_answer([cls(t.comment_id("C", 0), "CONFIRMED", "d1", 4), cls(t.comment_id("C", 1), "PLAUSIBLE", None, 3),
                        cls(t.comment_id("C", 2), "FABRICATED", None, 2)],
                       [st("d1", "CAUGHT", t.comment_id("C", 0))])],
         ["context without config_name -> the full name config_C_full_context -> adjacency computed (2/3)",
          "diff line set is not per file (web/client.ts:12 vs web/api.ts lines)"])

# ---------------------------------------------------------------------------
# T5 epsilon__55 — no task_id, 'number' field, no ground truth (weight 0)
# ---------------------------------------------------------------------------
EPS_DIFF = """diff --git a/lib/util.py b/lib/util.py
index 9999999..aaaaaaa 100644
--- a/lib/util.py
+++ b/lib/util.py
@@ -3,4 +3,5 @@ import unicodedata
 def normalize(s):
-    return s.strip().lower()
+    s = s.lower()
+    return s.strip()
 
"""
t = new_task("epsilon__55", {"repo": "org/epsilon", "number": 55, "difficulty": "Type1_Direct",
                             "pr_type": "refactor", "language": "python"}, EPS_DIFF)
t.context("A", "contexts/55_config_A_diff_only.json")
t.context("B", "contexts/config_B/epsilon__55_config_B.json")
t.context("C", "contexts/config_C/epsilon__55.json")
EA0 = t.agent_text("epsilon normalize() lower-cases before stripping, so leading Unicode spaces survive.")
EA1 = t.agent_text("epsilon normalize() recurses on itself forever.")
t.record("A",
         [arr([c(EA0, "lib/util.py", 5, "P2"), c(EA1, "lib/util.py", 6, "P0")])],
         [judge_answer([cls(t.comment_id("A", 0), "PLAUSIBLE", None, 3), cls(t.comment_id("A", 1), "FABRICATED", None, 1)], [])],
         ["PR record without task_id and with 'number': task id derived as <repo name>__<number>",
          "annotation with no comments: no ground truth, difficulty_weight log(1) = 0", "empty human_comment_statuses",
          "context path contexts/{pr_number}_{full config name}.json"])
EB1 = t.agent_text("epsilon normalize() should accept bytes too.")
t.record("B",
         [arr([c(EA0, "lib/util.py", 5, "P2"), c(EB1, "lib/util.py", 4, "P2")])],
         [judge_answer([cls(t.comment_id("B", 0), "CONFIRMED", "h-404", 5), cls(t.comment_id("B", 1), "CONFIRMED", None, 4)])],
         ["CONFIRMED naming an unknown human id -> PLAUSIBLE, keeps the judge's actionability 5",
          "CONFIRMED with null matched_human_comment_id -> PLAUSIBLE, keeps actionability 4",
          "human_comment_statuses missing from the judge answer"])
t.record("C",
         ["[]"],
         [judge_answer([], [])],
         ["answer [] : parse success with zero comments, judge still called with '(Agent produced no comments)'",
          "failure_type no_attempt, attempt_rate 0, composite hard 0"])

# ---------------------------------------------------------------------------
# T6 zeta__606 — 9 ground-truth comments (medium), stage-2 affinity rules
# ---------------------------------------------------------------------------
zeta_lines = "\n".join(f"+        step{i}();" for i in range(31))
ZETA_DIFF = f"""diff --git a/src/main/java/Zeta.java b/src/main/java/Zeta.java
index bbbbbbb..ccccccc 100644
--- a/src/main/java/Zeta.java
+++ b/src/main/java/Zeta.java
@@ -99,2 +99,33 @@ public class Zeta {{
     void run() {{
{zeta_lines}
     }}
"""
t = new_task("zeta__606", {"task_id": "zeta__606", "repo": "org/zeta", "pr_number": 606,
                           "difficulty": "Type2_Contextual", "pr_type": "feature", "language": "java"}, ZETA_DIFF)
ZF = "src/main/java/Zeta.java"
OF = "src/main/java/Other.java"
zeta_humans = [
    ("z1", ZF, 105, "zeta step6 runs before the lock is taken in run()."),
    ("z2", ZF, 110, "zeta step11 repeats the network call already made by step10."),
    ("z3", ZF, 120, "zeta step21 swallows InterruptedException."),
    ("z4", OF, 105, "zeta Other.helper is now unused after this change."),
    ("z5", ZF, None, "zeta run() should document the new ordering of steps."),
    ("z6", ZF, "abc", "zeta step3 allocates a buffer per call in a hot loop."),
    ("z7", ZF, 200, "zeta shutdown path does not flush the queue."),
    ("z8", ZF, 210, "zeta shutdown path does not close the socket."),
    ("z9", ZF, 220, "zeta finalizer duplicates the close logic."),
]
for i, (cid, f, line, body) in enumerate(zeta_humans):
    h = {"comment_id": cid, "file": f, "body": body, "is_initiating_comment": True}
    if line is not None:
        h["line"] = line
    t.human(h, i)
for cfg in "ABC":
    t.context(cfg, f"contexts/config_{cfg}/zeta__606.json")
Z0 = t.agent_text("zeta step6 ordering looks fragile.", "z1", 1, 4)               # 0.2425 + 0.25 with z1
Z1 = t.agent_text("zeta step11 may duplicate work.", "z2", 1, 6)                 # 0.1644 + 0.15 + 0.05 (dist 15)
Z2 = t.agent_text("zeta step21 exception handling is lossy.", "z3", 1, 9)         # 0.1104 + 0.25 (dist 1)
Z3 = t.agent_text("zeta Other.helper may be dead code.", "z4", 1, 4)              # path './...' != '...' -> no bonus
Z4 = t.agent_text("zeta run() ordering deserves a comment.", "z5", 1, 6)         # human line missing: file bonus only
Z5 = t.agent_text("zeta step3 allocation could be hoisted.", "z6", 1, 9)          # human line 'abc': file bonus only
z6_dim = t.noise()
Z6 = "zeta shutdown does not release resources."
VECTORS.put(Z6, {t.human_dim["z7"]: 1, t.human_dim["z8"]: 1, z6_dim: 2})        # equal affinity with z7 and z8
Z7 = t.agent_text("zeta step6 is executed before acquiring the lock.", "z1", 1, 3)  # 0.3162 + 0.25, beats Z0 for z1
t.record("A",
         [arr([c(Z0, ZF, 106, None), c(Z1, ZF, 125, None), c(Z2, ZF, 121, None), c(Z3, "./" + OF, 105, None),
               c(Z4, ZF, 101, None), c(Z5, ZF, 102, None), c(Z6, ZF, 205, None), c(Z7, ZF, 105, None)])],
         [judge_answer([cls(t.comment_id("A", 0), "PLAUSIBLE", None, 2), cls(t.comment_id("A", 1), "PLAUSIBLE", None, 3),
                        cls(t.comment_id("A", 2), "FABRICATED", None, 4), cls(t.comment_id("A", 3), "PLAUSIBLE", None, 5),
                        cls(t.comment_id("A", 4), "PLAUSIBLE", None, 3), cls(t.comment_id("A", 5), "PLAUSIBLE", None, 2),
                        cls(t.comment_id("A", 6), "PLAUSIBLE", None, 4), cls(t.comment_id("A", 7), "PLAUSIBLE", None, 3)])],
         ["9 ground-truth comments -> pr_difficulty_tag medium", "stage 2 only (judge confirmed nothing)",
          "affinity bonuses: +0.25 (<=8 lines), +0.20 (9..20 lines), file only when human line missing or not an int",
          "paths compared exactly ('./src/...' gets no bonus)", "greedy by affinity: Z7 takes z1 before Z0",
          "equal affinity tie: first human in annotation order (z7 over z8)", "FABRICATED comment promoted to CONFIRMED by stage 2",
          "judge_alignment_agreement < 1 (pair similarity 0.1104 < 0.12)", "no severities -> severity_accuracy -1"])
t.record("B",
         [arr([c(Z7, ZF, 105, None), c(Z1, ZF, 125, None)])],
         [judge_answer([cls(t.comment_id("B", 0), "CONFIRMED", "z1", 3), cls(t.comment_id("B", 1), "CONFIRMED", "z1", 5)])],
         ["stage-1 order by actionability first: the 5 (similarity 0) beats the 3 (similarity 0.316)",
          "loser re-enters stage 2 and stays unmatched", "alignment of a pair with similarity 0"])
ZC1 = t.agent_text("zeta run() logs nothing at line 400.")
t.record("C",
         [arr([c(Z7, ZF, 105, None), c(ZC1, ZF, 400, None), c(Z3, OF, 105, None)])],
         [judge_answer([cls(t.comment_id("C", 0), "CONFIRMED", "z1", 4), cls(t.comment_id("C", 1), "PLAUSIBLE", None, 3),
                        cls(t.comment_id("C", 2), "CONFIRMED", "z4", 3)])],
         ["adjacency 1/3 (line 105 of Other.java counts as inside: the diff line set is global)"])

# ---------------------------------------------------------------------------
# T7 eta__707 — 16 ground-truth comments (hard), judge-entry quirks
# ---------------------------------------------------------------------------
ETA_DIFF = """diff --git a/src/eta.c b/src/eta.c
index ddddddd..eeeeeee 100644
--- a/src/eta.c
+++ b/src/eta.c
@@ -8,3 +8,5 @@ int eta_init(void) {
     int rc = 0;
+    rc = eta_alloc();
+    if (rc != 0) return rc;
     return rc;
"""
t = new_task("eta__707", {"task_id": "eta__707", "repo": "org/eta", "pr_number": 707,
                          "difficulty": "Type1_Direct", "pr_type": "bugfix", "language": "c"}, ETA_DIFF)
for k in range(16):
    t.human({"comment_id": f"e{k + 1}", "file": "src/eta.c", "line": 10 * (k + 1), "severity": "P1",
             "is_initiating_comment": True, "body": f"eta issue number {k + 1}: the error path at line {10 * (k + 1)} leaks the handle."}, k)
for cfg in "ABC":
    t.context(cfg, f"contexts/config_{cfg}/eta__707.json")
H0 = t.agent_text("eta init leaks the handle when eta_alloc fails at line 10.", "e1", 4, 3)
H1 = t.agent_text("eta the early return at line 20 is wrong.", "e2", -1, 1)       # cosine -0.7071 with e2
H2 = t.agent_text("eta line 30 error path forgets to free.", "e3", 3, 4)
H3 = t.agent_text("eta handle at line 40 is never released.", "e4", 1, 1)
H4 = t.agent_text("eta line 40 leaks the descriptor.", "e4", 1, 1)
H5 = t.agent_text("eta line 60 leaks on error.", "e6", 4, 3)
H6 = t.agent_text("eta rc could be declared const.")
H7 = t.agent_text("eta logging is missing in init.")
ids = [t.comment_id("A", i) for i in range(8)]
t.record("A",
         [arr([c(H0, "src/eta.c", 10, "P1"), c(H1, "src/eta.c", 20, "P2"), c(H2, "src/eta.c", 30, "P1"),
               c(H3, "src/eta.c", 45, "P1"), c(H4, "src/eta.c", 40, "P0"), c(H5, "src/eta.c", 60, "P1"),
               c(H6, "src/eta.c", 9, "P2"), c(H7, "src/eta.c", 8, "P2")])],
         [judge_answer([cls(ids[0], "CONFIRMED", "e1", 4), cls(ids[1], "CONFIRMED", "e2", 2),
                        cls(ids[2], "CONFIRMED", "e3", 5), cls(ids[4], "CONFIRMED", "e4", 4),
                        cls(ids[3], "CONFIRMED", "e4", 4), cls(ids[5], "confirmed", "e6", 3),
                        cls(ids[6], "PARTIAL", None, 4), cls("eta__707_config_A_diff_only_99", "CONFIRMED", "e7", 5),
                        cls(ids[2], "PLAUSIBLE", None, 1)],
                       [st("e1", "CAUGHT", ids[0])])],
         ["16 ground-truth comments -> pr_difficulty_tag hard",
          "duplicate judge entries for one comment: stage 1 uses the CONFIRMED entry (pair actionability 5), scorer uses the last (1)",
          "stage-1 tie (4, 0.7071): the entry listed first in the judge answer wins (index 4 over 3)",
          "lowercase 'confirmed' accepted", "PARTIAL entry dropped -> default PLAUSIBLE / actionability 3",
          "unknown agent id ignored", "missing entry (index 7) -> PLAUSIBLE / 3",
          "negative pair similarity kept in semantic_alignment (no floor)", "severity_accuracy 3/5"])
t.record("B",
         [arr([c(H0, "src/eta.c", 10, "P1"), c(H6, "src/eta.c", 9, "P2"), c(H7, "src/eta.c", 8, "P2")])],
         [json.dumps({"agent_classifications": [cls(t.comment_id("B", 0), "CONFIRMED", "e1", 5)]})],
         ["judge answer lacks human_comment_statuses -> statuses fall back to MISSED (judge output only)",
          "entries missing for two comments -> PLAUSIBLE / 3"])
H8 = t.agent_text("eta return at line 20 skips cleanup.", "e2", -1, 1)
t.record("C",
         [arr([c(H8, "src/eta.c", 20, "P1")])],
         [judge_answer([cls(t.comment_id("C", 0), "CONFIRMED", "e2", 3)], [st("e2", "CAUGHT", t.comment_id("C", 0))])],
         ["semantic_alignment negative (-0.7071): no floor, validation_failures reports it out of range",
          "judge_alignment_agreement 0"])

# ---------------------------------------------------------------------------
# T8 theta__808 — judge diff capping, blank answers, provider error
# ---------------------------------------------------------------------------
big_lines = "\n".join(f"+// filler line {i:04d} for the big generated table ......................" for i in range(200))
THETA_DIFF = f"""From 0123456789abcdef Mon Sep 17 00:00:00 2001
Subject: [PATCH] theta: timeout handling

diff --git a/pkg/theta_test.go b/pkg/theta_test.go
index 1212121..3434343 100644
--- a/pkg/theta_test.go
+++ b/pkg/theta_test.go
@@ -5,2 +5,4 @@ func TestTheta(t *testing.T) {{
 	ctx := context.Background()
+	if err := Run(ctx); err != nil {{
+		t.Fatal(err)
 }}
diff --git a/pkg/big.go b/pkg/big.go
new file mode 100644
index 0000000..5656565
--- /dev/null
+++ b/pkg/big.go
@@ -0,0 +1,200 @@
{big_lines}
diff --git a/docs/README.md b/docs/README.md
index 7878787..9090909 100644
--- a/docs/README.md
+++ b/docs/README.md
@@ -1,2 +1,3 @@
 # theta
+Run now honours the deadline.
 See pkg/core.go.
\\ No newline at end of file
diff --git a/pkg/core.go b/pkg/core.go
index abababa..cdcdcdc 100644
--- a/pkg/core.go
+++ b/pkg/core.go
@@ -10,4 +10,7 @@ func Run(ctx context.Context) error {{
 	select {{
+	case <-time.After(timeout):
+		return nil
+	case err := <-errs:
 		return err
 	}}
"""
t = new_task("theta__808", {"task_id": "theta__808", "repo": "org/theta", "pr_number": 808,
                            "difficulty": "Type2_Contextual", "pr_type": "bugfix", "language": "go"}, THETA_DIFF)
t.human({"comment_id": "t1", "file": "pkg/core.go", "line": 12, "severity": "P1", "is_initiating_comment": True,
         "body": "theta Run returns nil when the timeout fires, so callers think the work succeeded."}, 0)
t.human({"comment_id": "t2", "file": "pkg/theta_test.go", "line": 6, "severity": "P2", "is_initiating_comment": True,
         "body": "theta the test never exercises the timeout branch."}, 1)
for cfg in "ABC":
    t.context(cfg, f"contexts/config_{cfg}/theta__808.json")
T0 = t.agent_text("theta core.go returns nil error when the timeout fires.", "t1", 4, 3)
t.record("A",
         ["", "   \n", arr([c(T0, "pkg/core.go", 12, "P1")])],
         [judge_answer([cls(t.comment_id("A", 0), "CONFIRMED", "t1", 4)], [st("t1", "CAUGHT", t.comment_id("A", 0)), st("t2", "MISSED", None)])],
         ["two blank answers then a good one: 3 attempts", "judge diff: preamble dropped, chunk over 12000 chars skipped, "
          "test file last, chunks ordered by lines changed + 3 x logic markers", "'\\ No newline' line advances the new-line counter"])
t.record("B",
         ["", "", ""],
         [],
         ["three blank answers: generation fails, parse_success false, judge not called",
          "parse-failure scores: redundancy_penalty 1, plausible_penalty 1, severity -1, composite 0"])
TC1 = t.agent_text("theta the big table in big.go is regenerated on every build.")
TC2 = t.agent_text("theta README claims a deadline but Run has none.")
t.record("C",
         [{"http_status": 400, "error": "golden: provider rejected the request"},
          arr([c(T0, "pkg/core.go", 12, "P1"), c(TC1, "pkg/big.go", 900, "P2"), c(TC2, "docs/README.md", 2, "P2")])],
         [judge_answer([cls(t.comment_id("C", 0), "CONFIRMED", "t1", 5), cls(t.comment_id("C", 1), "PLAUSIBLE", None, 2),
                        cls(t.comment_id("C", 2), "FABRICATED", None, 1)],
                       [st("t1", "CAUGHT", t.comment_id("C", 0)), st("t2", "MISSED", None)])],
         ["HTTP 400 on the first agent call is an attempt; the second answer is used", "adjacency 1/3 (line 900)"])

# ---------------------------------------------------------------------------
# T9 iota__909 — no 'diff --git' header, unparseable answers, 30-comment cap
# ---------------------------------------------------------------------------
IOTA_DIFF = """--- a/iota.py
+++ b/iota.py
@@ -1,3 +1,4 @@
 def total(xs):
+    xs = list(xs)
     return sum(xs)
 
"""
t = new_task("iota__909", {"task_id": "iota__909", "repo": "org/iota", "pr_number": 909,
                           "difficulty": "Type1_Direct", "pr_type": "bugfix", "language": "python"}, IOTA_DIFF)
t.annotation["substantive_comment_ids"] = ["i1", "i2"]
t.human({"comment_id": "i1", "file": "iota.py", "line": 2, "severity": "P2",
         "body": "iota list(xs) copies a generator that may be huge; sum can consume it directly."}, 0)
t.human({"comment_id": "i2", "file": "iota.py", "line": 3, "severity": "P1",
         "body": "iota total() of None now raises TypeError from list() instead of sum()."}, 1)
for cfg in "ABC":
    t.context(cfg, f"contexts/config_{cfg}/iota__909.json")
t.record("A",
         ["I looked at the change and found nothing worth raising.", "Still nothing to add; the change looks fine."],
         [],
         ["prose without JSON, twice: parse failure with initial/retry errors, judge not called"])
t.record("B",
         ["[]"],
         [judge_answer([], [st("i1", "MISSED", None), st("i2", "MISSED", None)])],
         ["answer [] with ground truth present: no_attempt, judge called with no agent comments"])
items: list = ["a stray note", 5, {"body": ""}, {"body": "   ", "file": "iota.py"}]
I0 = t.agent_text("iota list(xs) materialises a possibly huge generator.", "i1", 4, 3)
items.append(c(I0, "iota.py", 2, "P2"))
dup_text = t.agent_text("iota consider a type hint on total.")
for k in range(31):
    if k in (3, 7, 11):
        items.append(c(dup_text, "iota.py", 1, "P2"))
    else:
        items.append(c(t.agent_text(f"iota observation {k}: total() could be simpler."), "iota.py", 1 + k % 4, "P2"))
t.record("C",
         [arr(items)],
         [judge_answer([cls(t.comment_id("C", 4), "CONFIRMED", "i1", 4), cls(t.comment_id("C", 5), "FABRICATED", None, 1),
                        cls(t.comment_id("C", 6), "PLAUSIBLE", None, 2)],
                       [st("i1", "CAUGHT", t.comment_id("C", 4)), st("i2", "MISSED", None)])],
         ["judge diff without 'diff --git' headers: the patch prefix is used", "35 items: non-objects and blank bodies skipped, "
          "ids keep the item index, cap at 30 comments", "27 missing judge entries -> PLAUSIBLE / 3",
          "plausible_penalty ratio - 0.7", "three identical bodies -> redundancy 2/30"])

# ---------------------------------------------------------------------------
# T10 kappa__1010 — judge answers that fail entirely (fallback, penalty)
# ---------------------------------------------------------------------------
KAPPA_DIFF = """diff --git a/kappa/io.py b/kappa/io.py
index 1010101..2020202 100644
--- a/kappa/io.py
+++ b/kappa/io.py
@@ -12,3 +12,4 @@ def read_all(path):
     with open(path) as fh:
+        data = fh.read()
         return fh.read()
"""
t = new_task("kappa__1010", {"task_id": "kappa__1010", "repo": "org/kappa", "pr_number": 1010,
                             "difficulty": "Type2_Contextual", "pr_type": "bugfix", "language": "python"}, KAPPA_DIFF)
t.human({"comment_id": "k1", "file": "kappa/io.py", "line": 15, "severity": "P1", "is_initiating_comment": True,
         "body": "kappa read_all reads the file twice; the second read returns an empty string."}, 0)
t.human({"comment_id": "k2", "file": "kappa/io.py", "line": 12, "severity": "P2", "is_initiating_comment": True,
         "body": "kappa open() should pass an explicit encoding."}, 1)
for cfg in "ABC":
    t.context(cfg, f"contexts/config_{cfg}/kappa__1010.json")
K0 = t.agent_text("kappa the second fh.read() returns nothing.", "k1", 1, 2)
K1 = t.agent_text("kappa path could be a pathlib.Path.")
K2 = t.agent_text("kappa read_all lacks a docstring.")
kappa_answer = arr([c(K0, "kappa/io.py", 14, "P1"), c(K1, "kappa/io.py", 12, "P2"), c(K2, "kappa/io.py", 11, "P2")])
t.record("A", [kappa_answer], ["I cannot evaluate this review."],
         ["judge answer not JSON: fallback (all PLAUSIBLE / 3, humans MISSED, prompt version v1.0+fallback)",
          "fallback_penalty 0.5 halves the composite", "stage 2 still runs under the fallback (K0 matched to k1)"])
t.record("B", [kappa_answer], ["[]"], ["judge answer a JSON array: 'must be a JSON object' -> fallback"])
t.record("C", [kappa_answer], [{"http_status": 400, "error": "golden: judge request rejected"}],
         ["judge provider error (HTTP 400): fallback", "adjacency 3/3: lines 14, 12 and 11 are not added lines (only 13 is)"])

# ---------------------------------------------------------------------------
# T11 lambda__1111 — partly unusable judge answers
# ---------------------------------------------------------------------------
LAMBDA_DIFF = """diff --git a/app/src/Lambda.kt b/app/src/Lambda.kt
index 3030303..4040404 100644
--- a/app/src/Lambda.kt
+++ b/app/src/Lambda.kt
@@ -5,3 +5,4 @@ class Lambda {
     fun load() {
+        cache.clear()
         repo.fetch()
"""
t = new_task("lambda__1111", {"task_id": "lambda__1111", "repo": "org/lambda", "pr_number": 1111,
                              "difficulty": "Type3_Latent_Candidate", "pr_type": "feature", "language": "kotlin"}, LAMBDA_DIFF)
t.human({"comment_id": "l1", "file": "app/src/Lambda.kt", "line": 6, "severity": "P1", "is_initiating_comment": True,
         "body": "lambda clearing the cache before fetch leaves readers with nothing if fetch fails."}, 0)
t.human({"comment_id": "l2", "file": "app/src/Repo.kt", "line": 30, "severity": "P2", "is_initiating_comment": True,
         "body": "lambda Repo.fetch is not idempotent, so retries double-insert rows."}, 1)
t.human({"comment_id": "l3", "file": "app/src/Cache.kt", "line": 8, "severity": "P1", "is_initiating_comment": True,
         "body": "lambda Cache.clear is not thread-safe against concurrent readers."}, 2)
for cfg in "ABC":
    t.context(cfg, f"contexts/config_{cfg}/lambda__1111.json")
L0 = t.agent_text("lambda cache.clear() before fetch loses data when fetch throws.", "l1", 4, 3)
L1 = t.agent_text("lambda fetch may insert rows twice on retry.", "l2", 3, 4)
L2 = t.agent_text("lambda load() should be suspend.")
L3 = t.agent_text("lambda clear() races with readers in Cache.kt.", "l3", 4, 3)
lambda_answer = arr([c(L0, "app/src/Lambda.kt", 6, "P1"), c(L1, "app/src/Repo.kt", 30, "P2"),
                     c(L2, "app/src/Lambda.kt", 5, "P2"), c(L3, "app/src/Cache.kt", 8, "P1")])
t.record("A", [lambda_answer],
         [judge_answer([cls(t.comment_id("A", 0), "CONFIRMED", "l1", 4), cls(t.comment_id("A", 1), "PARTIAL", "l2", 4),
                        "oops", cls("lambda__1111_config_A_diff_only_7", "PLAUSIBLE", None, 2),
                        cls("", "CONFIRMED", "l2", 5), cls(t.comment_id("A", 2), "PLAUSIBLE", None, "high")],
                       [st("l1", "caught", t.comment_id("A", 0)), st("l2", "PARTIAL", None), "oops"])],
         ["PARTIAL classification dropped (no fallback), non-object entries skipped, unknown and empty ids ignored",
          "actionability 'high' -> 3", "missing entry -> PLAUSIBLE / 3",
          "stage 2 matches the PARTIAL-judged L1 to l2 (0.6 + 0.25) and the unjudged L3 to l3 (0.8 + 0.25 clamped to 1.0), actionability 3",
          "lowercase status 'caught' accepted, 'PARTIAL' status and non-object statuses dropped"])
t.record("B", [lambda_answer],
         [judge_answer([cls(t.comment_id("B", i), "PARTIAL", None, 4) for i in range(4)], "none")],
         ["no usable classification: every comment PLAUSIBLE / 3 ('fallback_default') WITHOUT the fallback penalty",
          "human_comment_statuses not a list -> all MISSED", "stage 2 still matches"])
t.record("C", [lambda_answer],
         ["Here is my evaluation.\n```json\n" + judge_answer(
             [cls(t.comment_id("C", 0), "CONFIRMED", "l1", 4), cls(t.comment_id("C", 1), "CONFIRMED", "l2", 2),
              cls(t.comment_id("C", 2), "PLAUSIBLE", None, 0), cls(t.comment_id("C", 3), "CONFIRMED", "l3", 5)]) + "\n```\nThanks."],
         ["judge JSON inside prose and fences: parsed from the first '{' to the last '}'", "actionability 0 -> clamp 1",
          "Type3 with full config name: adjacency 3/4 (line 5 is a context line)"])

# ---------------------------------------------------------------------------
# T12 mu__1212 — integer comment ids, empty human body, clustering, clamp
# ---------------------------------------------------------------------------
MU_DIFF = """diff --git a/lib/mu.rb b/lib/mu.rb
index 5050505..6060606 100644
--- a/lib/mu.rb
+++ b/lib/mu.rb
@@ -1,3 +1,4 @@
 def mu(x)
+  raise ArgumentError if x.nil?
   x * 2
 end
"""
t = new_task("mu__1212", {"task_id": "mu__1212", "repo": "org/mu", "pr_number": 1212,
                          "difficulty": "Type1_Direct", "pr_type": "bugfix", "language": "ruby"}, MU_DIFF)
t.annotation["substantive_comment_ids"] = [501, 502, 503]
t.human({"comment_id": 501, "file": "lib/mu.rb", "line": 2, "severity": "P1",
         "body": "mu raising ArgumentError breaks callers that pass nil on purpose."}, 0)
t.human({"comment_id": 502, "file": "lib/mu.rb", "line": 3, "severity": "P2", "body": ""}, 1)
t.human({"comment_id": 503, "file": None, "line": None, "severity": "P0",
         "body": "mu this needs a changelog entry because the contract changed."}, 2)
for cfg in "ABC":
    t.context(cfg, f"contexts/config_{cfg}/mu__1212.json")
M0 = t.agent_text("mu raising on nil changes behaviour for existing callers.", "501", 4, 3)
M1 = t.agent_text("mu x * 2 overflows nothing but could use a guard.", "502", 1, 1)
m = {k: t.noise() for k in range(5)}
M2, M3, M4, M5 = ("mu cluster seed comment.", "mu cluster second comment.", "mu cluster third comment.", "mu cluster fourth comment.")
VECTORS.put(M2, {m[0]: 1})
VECTORS.put(M3, {m[0]: 1, m[1]: 1, m[2]: 1, m[3]: 1})   # cos(M3, M2) = 0.5  -> own cluster
VECTORS.put(M4, {m[1]: 1, m[2]: 1, m[3]: 1})            # cos(M4, M3) = 0.866 -> joins M3
VECTORS.put(M5, {m[2]: 1, m[3]: 1, m[4]: 1})            # cos(M5, M3) = 0.577, cos(M5, M4) = 0.667 -> own cluster
t.record("A",
         [arr([c(M0, "lib/mu.rb", 2, "P1"), c(M1, "lib/mu.rb", 3, "P2"), c(M2, "lib/mu.rb", 1, "P2"),
               c(M3, "lib/mu.rb", 1, "P2"), c(M4, "lib/mu.rb", 1, "P2"), c(M5, "lib/mu.rb", 1, "P2")])],
         [judge_answer([cls(t.comment_id("A", 0), "CONFIRMED", "501", 4), cls(t.comment_id("A", 1), "CONFIRMED", "502", 3),
                        cls(t.comment_id("A", 2), "PLAUSIBLE", None, 2), cls(t.comment_id("A", 3), "PLAUSIBLE", None, 2),
                        cls(t.comment_id("A", 4), "PLAUSIBLE", None, 2), cls(t.comment_id("A", 5), "PLAUSIBLE", None, 2)])],
         ["integer comment_id in the annotation: matching works via str(), severity_accuracy -1 (severity map keyed by int)",
          "human comment with empty body: skipped by semantic_alignment, still in the agreement denominator",
          "clustering compares with each cluster's first member only (M4 joins M3; M5 starts a cluster)"])
MB = t.agent_text("mu calls an undefined helper double_it.")
t.record("B",
         [arr([c(MB, "lib/mu.rb", 3, "P0"), c(MB, "lib/mu.rb", 3, "P0")])],
         [judge_answer([cls(t.comment_id("B", 0), "FABRICATED", None, 1), cls(t.comment_id("B", 1), "FABRICATED", None, 1)])],
         ["negative composite clamped to 0 (hallucination 1, redundancy 0.5) with attempt_rate 1 and no failure_type"])
MC1 = t.agent_text("mu naming: x could be value.")
MC2 = t.agent_text("mu the method could be a lambda.")
MC3 = t.agent_text("mu add a test for nil.")
t.record("C",
         [arr([c(t.agent_text("mu the changed contract deserves a changelog note.", "503", 4, 3), "", None, "P0"),
               c(MC1, "lib/mu.rb", 1, "P2"), c(MC2, "lib/mu.rb", 1, "P2"), c(MC3, "lib/mu.rb", 2, "P2")])],
         [judge_answer([cls(t.comment_id("C", 0), "CONFIRMED", "503", 5), cls(t.comment_id("C", 1), "PLAUSIBLE", None, 3),
                        cls(t.comment_id("C", 2), "PLAUSIBLE", None, 3), cls(t.comment_id("C", 3), "PLAUSIBLE", None, 3)])],
         ["human with file null and line null; agent file '' -> general", "plausible_penalty 0.75 - 0.7",
          "severity still -1 with integer ids although P0 = P0"])

# ---------------------------------------------------------------------------
# T13 nu__1313 — empty difficulty, ground truth empty because nothing initiates
# ---------------------------------------------------------------------------
NU_DIFF = """diff --git a/nu/main.swift b/nu/main.swift
index 7070707..8080808 100644
--- a/nu/main.swift
+++ b/nu/main.swift
@@ -1,2 +1,3 @@
 let nu = 1
+let mu = nu + 1
 print(nu)
"""
t = new_task("nu__1313", {"task_id": "nu__1313", "repo": "org/nu", "pr_number": 1313, "pr_type": "chore"}, NU_DIFF)
t.human({"comment_id": "n1", "file": "nu/main.swift", "line": 2, "severity": "P2", "is_initiating_comment": False,
         "body": "nu reply: fine by me."})
t.human({"comment_id": "n2", "file": "nu/main.swift", "line": 2, "is_initiating_comment": False,
         "body": "nu reply: agreed."})
for cfg in "ABC":
    t.context(cfg, f"contexts/config_{cfg}/nu__1313.json", pipeline_version=None)
N0 = t.agent_text("nu mu is unused.")
N1 = t.agent_text("nu print should use a logger.")
N2 = t.agent_text("nu constants should be uppercase.")
t.record("A", [arr([c(N0, "nu/main.swift", 2, "P2")])],
         [judge_answer([cls(t.comment_id("A", 0), "PLAUSIBLE", None, 4)], [])],
         ["PR without difficulty/language: by_difficulty group '' (excluded from ablation_table)",
          "no initiating comments and no substantive ids: empty ground truth, weight 0",
          "weighted mean of a group whose weights are all 0 falls back to the plain mean"])
t.record("B", [arr([c(N0, "nu/main.swift", 2, "P2"), c(N1, "nu/main.swift", 3, "P2")])],
         [judge_answer([cls(t.comment_id("B", 0), "PLAUSIBLE", None, 4), cls(t.comment_id("B", 1), "FABRICATED", None, 2)], [])],
         ["FABRICATED without ground truth"])
t.record("C", [arr([c(N0, "nu/main.swift", 2, "P2"), c(N1, "nu/main.swift", 3, "P2"), c(N2, "nu/main.swift", 1, "P2")])],
         [judge_answer([cls(t.comment_id("C", i), "PLAUSIBLE", None, 5) for i in range(3)], [])],
         ["three plausible comments: plausible_penalty 0.3", "empty difficulty: adjacency 0 in config C"])


# ---------------------------------------------------------------------------
def write(out: Path) -> None:
    ds = out / "dataset"
    (ds / "contexts").mkdir(parents=True, exist_ok=True)
    (ds / "annotations").mkdir(parents=True, exist_ok=True)

    # prs.jsonl: the records, plus lines loader.py skips (blank, malformed, non-object).
    lines = [json.dumps(TASKS[0].pr)]
    lines += ["", "{not json", json.dumps(["an", "array"])]
    lines += [json.dumps(task.pr) for task in TASKS[1:]]
    (ds / "prs.jsonl").write_text("\n".join(lines) + "\n", encoding="utf-8")
    # prs.json: the same records as a JSON object keyed 'items' (used by the second run).
    (ds / "prs.json").write_text(json.dumps({"items": [task.pr for task in TASKS] + ["not a record"]}, indent=2) + "\n",
                                 encoding="utf-8")

    replay_records = []
    for task in TASKS:
        (ds / "annotations" / task.annotation_file).write_text(json.dumps(task.annotation, indent=2) + "\n", encoding="utf-8")
        for cfg in "ABC":
            ctx = task.contexts[cfg]
            p = ds / ctx["path"]
            p.parent.mkdir(parents=True, exist_ok=True)
            p.write_text(json.dumps(ctx["body"], indent=2) + "\n", encoding="utf-8")
            rec = task.records[cfg]
            replay_records.append({
                "task_id": task.task_id,
                "config": cfg,
                "config_name": ctx["config_name"],
                "context_marker": ctx["marker"],
                "comment_id_prefix": f"{task.task_id}_{ctx['config_name']}_",
                "agent": rec["agent"],
                "judge": rec["judge"],
                "covers": rec["covers"],
            })
    replay = {
        "format": "swe-prbench-golden-replay/1",
        "agent_model": "golden-agent",
        "judge_model": "golden-judge",
        "records": replay_records,
    }
    (out / "replay.json").write_text(json.dumps(replay, indent=2) + "\n", encoding="utf-8")
    for text, vec in VECTORS.by_text.items():
        if not any(vec) or any(math.isnan(v) for v in vec):
            raise ValueError(f"bad vector for {text!r}")
    # One text per line keeps the file readable and diffs small.
    rows = [f"  {json.dumps(text)}: {json.dumps(vec)}" for text, vec in sorted(VECTORS.by_text.items())]
    (out / "vectors.json").write_text('{"dim": %d, "vectors": {\n%s\n}}\n' % (DIM, ",\n".join(rows)), encoding="utf-8")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit("usage: make_inputs.py OUT_DIR")
    write(Path(sys.argv[1]))
