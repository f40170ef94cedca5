#!/usr/bin/env python3
"""Times the unmodified SWE-PRBench reference harness on the records our bench scores.

`LIGHTSOUT_BENCH_DUMP=PATH cargo bench -p lightsout-core --bench swe_prbench_harness` writes
the records it scored (a cycle of (task, config, agent output, judge output); record i is
cycle[i % len]), every record's overall_score and its report, for the Jaccard fallback and
the fixed vectors. This driver imports the harness's own modules from HARNESS_DIR and times
the same two stages on the same records:

  scoring      scorer.compute_dimension_scores + assembler.assemble_eval_result per record
               (what run_eval.py calls after the judge; matching runs inside both)
  aggregation  aggregate._group_by_config, _group_by_difficulty, _compute_ablation_table and
               the report's counts: the cells of eval_report.json without run_date and
               records, which is what our eval_report computes
  --full-report additionally times aggregate.generate_eval_report as run_eval.py calls it
               (every record through asdict, the JSON written to a temporary file)

Each record's EvalInput is read by the harness's loader from the golden dataset. Then it
checks that every record's overall_score equals ours to 1e-9 and that every report cell
equals ours, so both sides timed the same work. One similarity per process: the harness
picks embeddings or Jaccard by whether `sentence_transformers` imports.

  python bench_harness.py --harness HARNESS_DIR --records DUMP --similarity jaccard|vectors

vectors puts tools/st_stub (the stand-in serving inputs/vectors.json) first on sys.path;
jaccard requires that no sentence_transformers is importable. Harness logs are set to
"error" through its own setup_logging, so its per-record INFO/WARNING events are dropped
rather than printed. Wall time is time.perf_counter, CPU time time.process_time.
"""
from __future__ import annotations

import argparse
import importlib.util
import json
import os
import sys
import tempfile
import time
from pathlib import Path

KIT = Path(__file__).resolve().parents[1]
DATASET = KIT / "inputs" / "dataset"
COMPOSITE_TOLERANCE = 1e-9
JUDGE_MODEL = "judge"


def parse_args() -> argparse.Namespace:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--harness", required=True, type=Path, help="work tree holding eval_harness/")
    parser.add_argument("--records", required=True, type=Path, help="the bench's LIGHTSOUT_BENCH_DUMP file")
    parser.add_argument("--similarity", required=True, choices=["jaccard", "vectors"])
    parser.add_argument("--full-report", action="store_true", help="also time generate_eval_report")
    return parser.parse_args()


def fail(message: str) -> None:
    print(f"bench_harness: {message}", file=sys.stderr)
    sys.exit(1)


def select_similarity(similarity: str) -> None:
    if similarity == "vectors":
        sys.path.insert(0, str(KIT / "tools" / "st_stub"))
        os.environ["SWE_PRBENCH_GOLDEN_VECTORS"] = str(KIT / "inputs" / "vectors.json")
        spec = importlib.util.find_spec("sentence_transformers")
        if spec is None or not str(spec.origin).startswith(str(KIT / "tools" / "st_stub")):
            fail(f"sentence_transformers resolves to {spec and spec.origin}, not the stand-in under tools/st_stub")
    elif importlib.util.find_spec("sentence_transformers") is not None:
        fail("sentence_transformers is importable, so the harness would not use its Jaccard fallback")


def timed(stage):
    wall, cpu = time.perf_counter(), time.process_time()
    value = stage()
    return value, time.perf_counter() - wall, time.process_time() - cpu


def main() -> None:
    args = parse_args()
    harness = args.harness.resolve()
    if not (harness / "eval_harness" / "scorer.py").is_file():
        fail(f"{harness}: no eval_harness/scorer.py here; pass the harness work tree")
    select_similarity(args.similarity)
    sys.path.insert(0, str(harness))

    from eval_harness import aggregate, loader, logging_utils
    from eval_harness.assembler import assemble_eval_result
    from eval_harness.schema import (
        AgentComment,
        AgentOutput,
        HumanCommentStatus,
        JudgeClassification,
        JudgeOutput,
    )
    from eval_harness.scorer import compute_dimension_scores

    logging_utils.setup_logging(verbose=False, level="error")

    dump = json.loads(args.records.read_text(encoding="utf-8"))
    if dump.get("format") != "lightsout-swe-prbench-bench/1":
        fail(f"{args.records}: format {dump.get('format')!r}, expected lightsout-swe-prbench-bench/1")
    total = int(dump["records"])
    model = str(dump["model"])
    similarity_key = "fixed_vectors" if args.similarity == "vectors" else "jaccard"
    ours = dump["overall_score"][similarity_key]
    our_report = dump["report"][similarity_key]

    prs, contexts, annotations = DATASET / "prs.jsonl", DATASET / "contexts", DATASET / "annotations"
    configs = sorted({r["config"] for r in dump["cycle"]})
    expected_order = [(t, c) for t in loader.discover_task_ids(str(prs), str(contexts), configs) for c in configs]
    dumped_order = [(r["task_id"], r["config"]) for r in dump["cycle"]]
    if dumped_order != expected_order:
        fail(f"the bench's record cycle {dumped_order} is not the harness's order {expected_order}")

    cycle = []
    for record in dump["cycle"]:
        eval_input = loader.load_eval_input(record["task_id"], record["config"], str(contexts), str(annotations), str(prs))
        agent, judge = record["agent"], record["judge"]
        agent_output = AgentOutput(
            task_id=eval_input.task_id,
            config_name=eval_input.config_name,
            model=model,
            raw_response=agent["raw_response"],
            comments=[AgentComment(**c) for c in agent["comments"]],
            parse_success=agent["parse_success"],
            parse_error=agent["parse_error"],
        )
        judge_output = JudgeOutput(
            task_id=eval_input.task_id,
            config_name=eval_input.config_name,
            agent_classifications=[JudgeClassification(**c) for c in judge["agent_classifications"]],
            human_comment_statuses=[HumanCommentStatus(**s) for s in judge["human_comment_statuses"]],
            judge_model=JUDGE_MODEL,
            judge_prompt_version=judge["judge_prompt_version"],
        )
        cycle.append((eval_input, agent_output, judge_output))

    def score_all():
        results = []
        for i in range(total):
            eval_input, agent_output, judge_output = cycle[i % len(cycle)]
            scores = compute_dimension_scores(eval_input, agent_output, judge_output)
            results.append(assemble_eval_result(eval_input, agent_output, judge_output, scores, model))
        return results

    def report_cells(results):
        return {
            "total_prs": len(set(r.pr_number for r in results)),
            "total_eval_records": len(results),
            "by_config": aggregate._group_by_config(results),
            "by_difficulty": aggregate._group_by_difficulty(results),
            "ablation_table": aggregate._compute_ablation_table(results),
            "agent_parse_failures": sum(1 for r in results if not bool(getattr(r, "agent_parse_success", True))),
            "judge_parse_fallback_count": sum(
                1 for r in results if bool(getattr(r, "judge_parse_fallback_used", False))
            ),
        }

    results, score_wall, score_cpu = timed(score_all)
    report, agg_wall, agg_cpu = timed(lambda: report_cells(results))

    if len(ours) != len(results):
        fail(f"{args.records}: {len(ours)} composites for {len(results)} records")
    # `not <=` so that a NaN on either side counts as a mismatch.
    mismatch = next(
        (i for i, (r, o) in enumerate(zip(results, ours)) if not abs(r.overall_score - o) <= COMPOSITE_TOLERANCE),
        None,
    )
    if mismatch is not None:
        fail(f"record {mismatch}: harness overall_score {results[mismatch].overall_score!r}, ours {ours[mismatch]!r}")
    worst = max(abs(r.overall_score - o) for r, o in zip(results, ours))
    if report != our_report:
        fail(f"report cells differ:\nharness {json.dumps(report, sort_keys=True)}\nours    {json.dumps(our_report, sort_keys=True)}")

    print(f"harness {harness.name}, similarity {args.similarity}, {total} records ({len(cycle)} distinct)")
    print(
        f"scoring: wall {score_wall:.3f} s ({score_wall * 1e6 / total:.1f} µs/record), "
        f"cpu {score_cpu:.3f} s ({score_cpu * 1e6 / total:.1f} µs/record)"
    )
    print(f"aggregation (report cells): wall {agg_wall:.3f} s, cpu {agg_cpu:.3f} s")
    if args.full_report:
        with tempfile.TemporaryDirectory(prefix="bench-harness-") as tmp:
            _, full_wall, full_cpu = timed(
                lambda: aggregate.generate_eval_report(results, str(Path(tmp) / "eval_report.json"))
            )
        print(f"aggregation (generate_eval_report, records and file included): wall {full_wall:.3f} s, cpu {full_cpu:.3f} s")
    print(
        f"checked: all {total} overall_scores equal ours (max |diff| {worst:.1e} <= {COMPOSITE_TOLERANCE:.0e}), "
        "every report cell equals ours"
    )


if __name__ == "__main__":
    main()
