#!/usr/bin/env python3
"""Rebuild data/scifact-mini/{train,dev,test}.jsonl from the public SciFact release.

Upstream
--------
SciFact (Wadden et al., "Fact or Fiction: Verifying Scientific Claims", EMNLP 2020),
https://github.com/allenai/scifact. Download the release tarball
https://scifact.s3-us-west-2.amazonaws.com/release/2020-12-17/data.tar.gz
(the repository's script/download-data.sh fetches the same files) and unpack it; this
script reads three of its files, from the folder given as the first argument:

    claims_train.jsonl   claims with evidence annotations (CC BY 4.0)
    claims_dev.jsonl     claims with evidence annotations (CC BY 4.0)
    corpus.jsonl         the evidence abstracts, one sentence list per document (ODC-By 1.0)

(The hidden-label claims_test.jsonl is not used.)

Usage:  python3 data/scifact-mini/make.py UPSTREAM_DIR [OUT_DIR]
OUT_DIR defaults to the folder of this script. Standard library only; deterministic.

Selection rule
--------------
1. Pool the claims of claims_train.jsonl and claims_dev.jsonl (SciFact claim ids are
   unique across the two files) and keep only claims with evidence (SciFact's NOT ENOUGH
   INFO claims have none and are dropped). Label: SUPPORT -> "supported",
   CONTRADICT -> "refuted" (the spelling REFUTE is accepted too). A claim whose evidence
   documents carry different labels is dropped.
2. For every (claim, evidence document) pair the rationale text is the union of the
   sentence indices of all the pair's rationales, in ascending order, each sentence
   stripped, joined with one space; runs of whitespace are collapsed to one space (the
   same is done to the claim text). Section labels such as "CONCLUSIONS" that SciFact
   keeps inside abstract sentences stay as they are.
3. Per claim the document with the shortest rationale (characters; ties: smaller
   document id) is chosen.
4. A claim is kept when that rationale has at most MAX_RATIONALE_CHARS (400) characters
   and the claim at most MAX_CLAIM_CHARS (200), which keeps claim + rationale at about
   60-160 word pieces (median about 75) for all-MiniLM-L6-v2.
5. Claims with the same text (compared case-insensitively) are kept once: the smallest
   claim id.
6. Split without leakage: claims that share any evidence document (all of a claim's
   evidence documents count, not only the chosen one) form one group (connected
   components). Groups are ordered by their smallest claim id and shuffled with
   random.Random(SEED); in that order each group goes to the first of test, dev whose
   per-label quota it does not exceed, else to train. Quotas: N_TEST and N_DEV
   instances each, split between the labels in the proportion of the kept pool
   (rounded). The label proportion is not rebalanced (SciFact is about 2:1
   supported:refuted; medrank scores misinformation with macro-F1).
7. Each kept claim becomes one medrank argument bundle line (src/data/FORMATS.md):
   {"id": "scifact-<claim id>-<doc id>", "task": "misinformation", "claim": ...,
    "label": "supported"|"refuted",
    "arguments": {"informative": <rationale text>, "generic": <see generic_argument>}}
   Lines are ordered by claim id within each file.

The "informative" argument is the annotated rationale (the evidence a fact-checker
would cite); it never states the label, which follows only from reading claim and
evidence together (SciFact pairs many claims with a negated twin that shares the same
rationale). The "generic" argument restates the claim and defers to the study; it
carries no label information and serves as the weak system.
"""

import json
import os
import random
import re
import sys
from collections import Counter

SEED = 13
MAX_RATIONALE_CHARS = 400
MAX_CLAIM_CHARS = 200
N_TEST = 90
N_DEV = 90
LABELS = {"SUPPORT": "supported", "CONTRADICT": "refuted", "REFUTE": "refuted"}
SYSTEMS = ("informative", "generic")


def collapse(text):
    return re.sub(r"\s+", " ", text).strip()


def rationale_text(abstract, rationales):
    """The rationale sentences of one document, ascending, joined by one space."""
    idx = sorted({i for r in rationales for i in r["sentences"]})
    return collapse(" ".join(abstract[i].strip() for i in idx))


def generic_argument(claim):
    """A label-free argument derived from the claim alone (the weak system)."""
    body = claim.rstrip(" .")
    if len(body) > 1 and body[0].isupper() and not (body[1].isupper() or body[1].isdigit()):
        body = body[0].lower() + body[1:]
    return f"Whether {body} depends on the findings of the cited study."


def read_jsonl(path):
    with open(path, encoding="utf-8") as f:
        return [json.loads(line) for line in f if line.strip()]


def select(claims, rationale_of):
    """claims: SciFact claim records; rationale_of(doc_id, rationales) -> text or None.

    Returns the kept instances as dicts (claim id, claim, label, doc id, rationale,
    all evidence doc ids), ordered by claim id.
    """
    kept = []
    for c in sorted(claims, key=lambda c: int(c["id"])):
        evidence = c.get("evidence") or {}
        if not evidence:
            continue
        labels = {LABELS[r["label"]] for rs in evidence.values() for r in rs}
        if len(labels) != 1:
            continue
        options = []
        for doc_id, rs in evidence.items():
            text = rationale_of(doc_id, rs)
            if text is not None:
                options.append((len(text), int(doc_id), text))
        if not options:
            continue
        n, doc_id, text = min(options)
        claim = collapse(c["claim"])
        if n > MAX_RATIONALE_CHARS or len(claim) > MAX_CLAIM_CHARS:
            continue
        kept.append({"claim_id": int(c["id"]), "claim": claim, "label": labels.pop(),
                     "doc_id": doc_id, "rationale": text,
                     "docs": sorted(int(d) for d in evidence)})
    seen, unique = set(), []
    for k in kept:
        key = k["claim"].casefold()
        if key not in seen:
            seen.add(key)
            unique.append(k)
    return unique


def split(kept):
    """Group by shared evidence documents and fill test, dev quotas; rest is train."""
    parent = list(range(len(kept)))

    def find(i):
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    owner = {}
    for i, k in enumerate(kept):
        for d in k["docs"]:
            if d in owner:
                parent[find(i)] = find(owner[d])
            else:
                owner[d] = i
    groups = {}
    for i in range(len(kept)):
        groups.setdefault(find(i), []).append(i)
    groups = sorted(groups.values(), key=lambda g: min(kept[i]["claim_id"] for i in g))
    random.Random(SEED).shuffle(groups)

    pool = Counter(k["label"] for k in kept)
    share = pool["refuted"] / len(kept)
    quota = {}
    for name, n in (("test", N_TEST), ("dev", N_DEV)):
        refuted = round(n * share)
        quota[name] = {"refuted": refuted, "supported": n - refuted}
    out = {"train": [], "dev": [], "test": []}
    for g in groups:
        need = Counter(kept[i]["label"] for i in g)
        for name in ("test", "dev"):
            if all(need[l] <= quota[name][l] for l in need):
                for l in need:
                    quota[name][l] -= need[l]
                out[name].extend(kept[i] for i in g)
                break
        else:
            out["train"].extend(kept[i] for i in g)
    for name in out:
        out[name].sort(key=lambda k: k["claim_id"])
    return out


def bundle_line(k):
    record = {
        "id": f"scifact-{k['claim_id']}-{k['doc_id']}",
        "task": "misinformation",
        "claim": k["claim"],
        "label": k["label"],
        "arguments": {"informative": k["rationale"], "generic": generic_argument(k["claim"])},
    }
    return json.dumps(record, ensure_ascii=False)


def write(splits, out_dir):
    for name, rows in splits.items():
        with open(os.path.join(out_dir, f"{name}.jsonl"), "w", encoding="utf-8", newline="\n") as f:
            for k in rows:
                f.write(bundle_line(k) + "\n")
        counts = Counter(k["label"] for k in rows)
        print(f"{name}: {len(rows)} ({', '.join(f'{l} {counts[l]}' for l in sorted(counts))})")


def main(argv):
    if len(argv) not in (2, 3):
        sys.exit(__doc__.split("\n\n")[0] + "\nusage: make.py UPSTREAM_DIR [OUT_DIR]")
    src = argv[1]
    out_dir = argv[2] if len(argv) == 3 else os.path.dirname(os.path.abspath(__file__))
    claims = read_jsonl(os.path.join(src, "claims_train.jsonl")) + read_jsonl(
        os.path.join(src, "claims_dev.jsonl"))
    needed = {str(d) for c in claims for d in (c.get("evidence") or {})}
    corpus = {}
    with open(os.path.join(src, "corpus.jsonl"), encoding="utf-8") as f:
        for line in f:
            if line.strip():
                doc = json.loads(line)
                if str(doc["doc_id"]) in needed:
                    corpus[str(doc["doc_id"])] = doc["abstract"]
    missing = needed - set(corpus)
    if missing:
        sys.exit(f"corpus.jsonl lacks {len(missing)} evidence documents, e.g. {sorted(missing)[:5]}")

    def rationale_of(doc_id, rationales):
        return rationale_text(corpus[str(doc_id)], rationales)

    write(split(select(claims, rationale_of)), out_dir)


if __name__ == "__main__":
    main(sys.argv)
