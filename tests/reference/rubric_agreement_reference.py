"""Reference figures for `medrank rubric-agreement` (the expected numbers of the tests in
src/eval/rubric_agreement.rs and tests/integration/cli.rs), computed independently with scikit-learn
from the example files' JSON, the pairs built as simple-evals' healthbench_meta_eval.py
builds them (compute_metrics_for_rater_by_class): every (rater
label, other label) pair on an item, pooled over items.

    python3 tests/reference/rubric_agreement_reference.py HUMANS.jsonl GRADER.jsonl
    python3 tests/reference/rubric_agreement_reference.py --meta-eval META.jsonl GRADER.jsonl

The first form reads a FORMATS.md §7 file with `met_by` and the grader's §7 file; the
second the raw HealthBench meta-evaluation JSONL (lines grouped by completion_id, in file
order) and a grader file with one response per completion. Prints, per group, the grader's
macro-F1 and kappa over its pairs, and each person's against the others (scikit-learn
1.9.1: f1_score(average="macro"), cohen_kappa_score). A figure is `undefined` where a
class never occurs on one side (simple-evals then has no precision or recall for it).
"""
import json
import sys

from sklearn.metrics import cohen_kappa_score, f1_score


def items_from_rubric(path):
    out = []
    for line in open(path, encoding="utf-8"):
        if not line.strip():
            continue
        r = json.loads(line)
        for i, c in enumerate(r["criteria"]):
            humans = c.get("met_by") or ({"(met)": c["met"]} if c.get("met") is not None else {})
            if not humans:
                continue
            groups = ["all"] + [t for t in r.get("tags", []) if t.startswith("theme:")]
            groups += [t for t in c.get("tags", []) if t.startswith(("axis:", "cluster:"))]
            out.append(((r["system"], r["id"], i), humans, groups))
    return out


def items_from_meta_eval(path):
    out, count = [], {}
    for line in open(path, encoding="utf-8"):
        if not line.strip():
            continue
        r = json.loads(line)
        i = count.get(r["completion_id"], 0)
        count[r["completion_id"]] = i + 1
        humans = dict(zip(r["anonymized_physician_ids"], r["binary_labels"]))
        out.append((("healthbench-meta-eval", r["completion_id"], i), humans, ["all"]))
    return out


def grader_labels(path):
    labels = {}
    for line in open(path, encoding="utf-8"):
        if line.strip():
            r = json.loads(line)
            for i, c in enumerate(r["criteria"]):
                labels[(r["system"], r["id"], i)] = c["met"]
    return labels


def figures(rater, other):
    if not rater:
        return "no pairs"
    if len(set(rater)) < 2 or len(set(other)) < 2:
        return f"pairs {len(rater)} undefined"
    f1 = f1_score(other, rater, average="macro")
    per = f1_score(other, rater, average=None, labels=[0, 1])
    kappa = cohen_kappa_score(rater, other)
    return f"pairs {len(rater)} macro_f1 {f1!r} f1_not_met {float(per[0])!r} f1_met {float(per[1])!r} kappa {kappa!r}"


def main():
    if sys.argv[1] == "--meta-eval":
        items, grader = items_from_meta_eval(sys.argv[2]), grader_labels(sys.argv[3])
    else:
        items, grader = items_from_rubric(sys.argv[1]), grader_labels(sys.argv[2])
    groups = sorted({g for _, _, gs in items for g in gs} - {"all"})
    people = []
    for _, humans, _ in items:
        people += [p for p in humans if p not in people]
    for group in ["all"] + groups:
        mine = [it for it in items if group in it[2]]
        rater, other = [], []
        for key, humans, _ in mine:
            for label in humans.values():
                rater.append(int(grader[key]))
                other.append(int(label))
        print(f"{group} items {len(mine)} grader {figures(rater, other)}")
        for p in people:
            rater, other = [], []
            for _, humans, _ in mine:
                if p in humans:
                    for q, label in humans.items():
                        if q != p:
                            rater.append(int(humans[p]))
                            other.append(int(label))
            if rater:
                print(f"  {p} {figures(rater, other)}")


if __name__ == "__main__":
    main()
