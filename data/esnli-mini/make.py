#!/usr/bin/env python3
"""Rebuild data/esnli-mini/{train,dev,test}.jsonl from the public e-SNLI line files.

Upstream
--------
e-SNLI (Camburu et al., "e-SNLI: Natural Language Inference with Natural Language
Explanations", NeurIPS 2018), https://github.com/OanaMariaCamburu/e-SNLI (MIT licence):
SNLI premise/hypothesis pairs (Bowman et al., EMNLP 2015, CC BY-SA 4.0) with
human-written explanations of the gold label. This script reads line-aligned text
files of that repository (line i of every file is the same pair):

    s1.dev     s1.test                    premises (SNLI, tokenised)
    s2.dev     s2.test                    hypotheses (SNLI, tokenised)
    labels.dev labels.test                entailment / neutral / contradiction
    preproc1_expl_1.dev  preproc1_expl_1.test
                                          first explanation, as preprocessed by
                                          e-SNLI's preprocess_eSNLI.py (ASCII, lower
                                          case, tokenised, inner sentence ends -> ";")

In the repository they lie in `dataset/` (s1.dev, s2.dev, s1.test) and `dataset/eSNLI/`
(labels.*, preproc1_expl_1.*, s2.test). Give the `dataset` folder as the first
argument: each file is looked up in that folder first, then in its `eSNLI/` subfolder.

Usage:  python3 data/esnli-mini/make.py DATASET_DIR [OUT_DIR]
OUT_DIR defaults to the folder of this script. Standard library only; deterministic.

Selection rule
--------------
1. Per split (dev, test) the four files are read line by line; line numbers are 1-based.
   Each text is stripped and runs of whitespace are collapsed to one space (nothing else
   is changed: SNLI sentences stay tokenised, explanations stay lower case). If the
   files have different line counts, only their common prefix is used (with a warning).
2. Pairs labelled `neutral` are dropped; `entailment` and `contradiction` are kept. A
   pair with an empty premise, hypothesis or explanation is dropped.
3. From the dev files, in file order: the first N_TRAIN (300) kept pairs form train.
   Then, continuing in file order, the next N_DEV (100) kept pairs whose premise does
   not occur in train form dev (SNLI writes several hypotheses per premise on
   consecutive lines; skipping premises already in train keeps the two splits apart).
4. From the test files, in file order: the first N_TEST (100) kept pairs form test.
5. Each pair becomes one medrank argument bundle line of the nli task
   (src/data/FORMATS.md, section 1):
   {"id": "esnli-<dev|test>-<line>", "task": "nli", "statement": <hypothesis>,
    "evidence": <premise>, "label": "entailment"|"contradiction",
    "arguments": {"explanation": <e-SNLI explanation 1>,
                  "generic": <see generic_argument>}}
   Lines keep the upstream file order.

The "explanation" argument is the human justification of the gold label (the helpful
system); the "generic" argument restates the hypothesis and carries no information about
the label (the weak system).
"""

import json
import os
import re
import sys
from collections import Counter

N_TRAIN = 300
N_DEV = 100
N_TEST = 100
KEEP = ("entailment", "contradiction")
# first words that keep their capital in the generic sentence: the names that start a
# hypothesis of this slice (any other first word is lower-cased: "Whether a man ...")
KEEP_CASE = {"Barney", "Bruce", "Hitler", "I", "Indian", "John"}


def collapse(text):
    return re.sub(r"\s+", " ", text).strip()


def generic_argument(hypothesis):
    """A label-free argument derived from the hypothesis alone (the weak system).

    The final period is dropped and the first letter is lower-cased unless the first
    word is in KEEP_CASE or has a further capital (an acronym)."""
    body = hypothesis.rstrip(" .")
    first = body.split(" ", 1)[0]
    if first not in KEEP_CASE and first[1:] == first[1:].lower():
        body = body[0].lower() + body[1:]
    return (f"Whether {body} follows from the scene depends on details the description "
            "may leave out.")


def find(folder, name):
    for path in (os.path.join(folder, name), os.path.join(folder, "eSNLI", name)):
        if os.path.isfile(path):
            return path
    sys.exit(f"{name} not found in {folder} or {os.path.join(folder, 'eSNLI')}")


def read_lines(path):
    with open(path, encoding="utf-8") as f:
        return [collapse(line) for line in f.read().split("\n")]


def read_split(folder, split):
    """Kept pairs of one upstream split, in file order, as dicts."""
    files = {key: read_lines(find(folder, f"{name}.{split}")) for key, name in
             (("premise", "s1"), ("hypothesis", "s2"), ("label", "labels"),
              ("explanation", "preproc1_expl_1"))}
    for key in files:  # a final newline leaves one empty string at the end
        while files[key] and files[key][-1] == "":
            files[key].pop()
    counts = {key: len(v) for key, v in files.items()}
    n = min(counts.values())
    if len(set(counts.values())) != 1:
        print(f"warning: {split} files differ in line count {counts}; using the first {n}",
              file=sys.stderr)
    kept = []
    for i in range(n):
        row = {key: files[key][i] for key in files}
        if row["label"] not in KEEP:
            if row["label"] != "neutral":
                sys.exit(f"labels.{split}:{i + 1}: unknown label {row['label']!r}")
            continue
        if not (row["premise"] and row["hypothesis"] and row["explanation"]):
            continue
        row["line"] = i + 1
        kept.append(row)
    return kept


def select(dev_pairs, test_pairs):
    train = dev_pairs[:N_TRAIN]
    seen = {p["premise"] for p in train}
    dev = [p for p in dev_pairs[N_TRAIN:] if p["premise"] not in seen][:N_DEV]
    test = test_pairs[:N_TEST]
    for name, rows, want in (("train", train, N_TRAIN), ("dev", dev, N_DEV),
                             ("test", test, N_TEST)):
        if len(rows) < want:
            sys.exit(f"{name}: only {len(rows)} pairs available, {want} wanted")
    return {"train": [("dev", p) for p in train], "dev": [("dev", p) for p in dev],
            "test": [("test", p) for p in test]}


def bundle_line(split, p):
    record = {
        "id": f"esnli-{split}-{p['line']}",
        "task": "nli",
        "statement": p["hypothesis"],
        "evidence": p["premise"],
        "label": p["label"],
        "arguments": {"explanation": p["explanation"],
                      "generic": generic_argument(p["hypothesis"])},
    }
    return json.dumps(record, ensure_ascii=False)


def write(splits, out_dir):
    for name, rows in splits.items():
        with open(os.path.join(out_dir, f"{name}.jsonl"), "w", encoding="utf-8",
                  newline="\n") as f:
            for split, p in rows:
                f.write(bundle_line(split, p) + "\n")
        counts = Counter(p["label"] for _, p in rows)
        lines = [p["line"] for _, p in rows]
        print(f"{name}: {len(rows)} ({', '.join(f'{l} {counts[l]}' for l in sorted(counts))});"
              f" upstream lines {min(lines)}-{max(lines)}")


def main(argv):
    if len(argv) not in (2, 3):
        sys.exit(__doc__.split("\n\n")[0] + "\nusage: make.py DATASET_DIR [OUT_DIR]")
    src = argv[1]
    out_dir = argv[2] if len(argv) == 3 else os.path.dirname(os.path.abspath(__file__))
    write(select(read_split(src, "dev"), read_split(src, "test")), out_dir)


if __name__ == "__main__":
    main(sys.argv)
