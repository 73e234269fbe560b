"""Writes SQuALITY's human evaluation as medrank metrics JSONL (src/data/FORMATS.md, section 6).

Usage: python3 make.py SQUALITY_CHECKOUT   (a clone of https://github.com/nyu-mll/SQuALITY)

Reads data/human-eval/all-responses.jsonl (three systems' answers to 100 questions, each
scored by three raters) and data/v1-3/txt/test.jsonl (the questions and their four
human-written answers). Writes train.jsonl, dev.jsonl and test.jsonl here, split by story
(the batch) in the file's order: the first 10 stories train, the next 4 dev, the last 6 test.
"""

import json
import sys
from pathlib import Path

DIMENSIONS = ["correctness", "selection", "overall"]
SPLITS = [("train", 10), ("dev", 4), ("test", 6)]


def main(root: Path) -> None:
    stories = {}
    for line in (root / "data/v1-3/txt/test.jsonl").open(encoding="utf-8"):
        story = json.loads(line)
        stories[story["metadata"]["passage_id"]] = story
    evaluated = [json.loads(line) for line in (root / "data/human-eval/all-responses.jsonl").open(encoding="utf-8")]
    rows_by_story = []
    for entry in evaluated:
        story = stories[entry["passage-id"]]
        rows = []
        for number, systems in entry["questions"].items():
            question = story["questions"][int(number)]
            answers = [r["response_text"] for r in question["responses"]]
            human = systems["human"]["response"]
            # The rated human answer is one of the question's four; the other three are
            # the references of every system (a reference never scores itself).
            own = [i for i, a in enumerate(answers) if a.strip() == human.strip()]
            assert len(own) == 1, (entry["passage-id"], number)
            references = [a for i, a in enumerate(answers) if i != own[0]]
            for system, judged in systems.items():
                reviews = sorted(judged["reviews"], key=lambda r: int(r["worker_id"]))
                rows.append(
                    {
                        "id": f"{entry['passage-id']}-q{number}",
                        "system": system,
                        "batch": entry["passage-id"],
                        "question": question["question_text"],
                        "candidate": judged["response"],
                        "references": references,
                        # Each rater's own score, by the rater's anonymous id (four raters,
                        # three of them on each story).
                        "human": {d: {r["worker_id"]: r[f"{d}-rating"] for r in reviews} for d in DIMENSIONS},
                    }
                )
        rows_by_story.append(rows)
    start = 0
    for split, count in SPLITS:
        with open(f"{split}.jsonl", "w", encoding="utf-8") as out:
            for rows in rows_by_story[start : start + count]:
                for row in rows:
                    out.write(json.dumps(row, ensure_ascii=False) + "\n")
        start += count
    assert start == len(rows_by_story), len(rows_by_story)


if __name__ == "__main__":
    main(Path(sys.argv[1]))
