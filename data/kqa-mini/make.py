#!/usr/bin/env python3
"""Rebuild data/kqa-mini/prompts.jsonl from the public K-QA repository.

Upstream
--------
K-QA (Manes et al., "K-QA: A Real-World Medical Q&A Benchmark", BioNLP 2024,
arXiv:2401.14493), https://github.com/Itaymanes/K-QA, MIT licence: 201 real patient
questions, each with a physician's answer (`Free_form_answer`) and the physicians' key
statements of it (`Must_have`, `Nice_to_have`). Clone it and give its folder.

Usage:  python3 data/kqa-mini/make.py KQA_DIR [OUT_DIR]
OUT_DIR defaults to the folder of this script. Standard library only; deterministic.

Selection rule
--------------
1. Read dataset/questions_w_answers.jsonl (one question per line).
2. Keep the questions whose `Question` is one of QUESTIONS below (compared exactly, so a
   question's quirks stay: "Can diabetics eat sweets?" ends with a line break upstream),
   in the file's order: twelve questions whose topic the NIH pages of data/medquad-mini
   cover.
3. Each becomes one prompt of medrank's drafting format (src/data/FORMATS.md, section 12):
   {"id": "kqa-<1-based line>", "prompt": Question, "must_have": Must_have,
    "nice_to_have": Nice_to_have, "responses": {"k-qa-physician": Free_form_answer}},
   every text exactly as upstream (statements keep their leading spaces). `Sources` and
   `ICD_10_diag` are not carried.
"""

import json
import os
import sys

QUESTIONS = [
    "Also what is the oral option to get rid of scabies?",
    "And how does Genital herpes and HPV differ?",
    "And is there any way I can get some medicine for a cold sore and a mouth ulcer that is killing me",
    "Are the stomach flu and the flu the same thing?",
    "Can diabetics eat sweets?\n",
    "Do migraines always come with headaches because I dont have a headache right now",
    "I have a question, can you be diagnosed with shingles more than once?",
    "I have gout and my doctor told me to take colchicine, how should I take it?",
    "Ok I will do the blood pressure checks, how often?",
    "What causes people to have such severe anxiety is it a mind over matter thing",
    "does a corneal abrasion usually cause discharge from the eye",
    "what is the difference between fissure vs hemorrhoids?",
]


def prompts(kqa):
    wanted = set(QUESTIONS)
    path = os.path.join(kqa, "dataset", "questions_w_answers.jsonl")
    with open(path, encoding="utf-8") as f:
        for line, text in enumerate(f, start=1):
            row = json.loads(text)
            if row["Question"] not in wanted:
                continue
            wanted.discard(row["Question"])
            yield {
                "id": f"kqa-{line}",
                "prompt": row["Question"],
                "must_have": row["Must_have"],
                "nice_to_have": row["Nice_to_have"],
                "responses": {"k-qa-physician": row["Free_form_answer"]},
            }
    if wanted:
        sys.exit(f"not found upstream: {sorted(wanted)}")


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(out, "prompts.jsonl"), "w", encoding="utf-8") as f:
        for p in prompts(sys.argv[1]):
            f.write(json.dumps(p, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
