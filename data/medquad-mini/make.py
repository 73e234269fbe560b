#!/usr/bin/env python3
"""Rebuild data/medquad-mini/evidence.jsonl from the public MedQuAD repository.

Upstream
--------
MedQuAD (Ben Abacha and Demner-Fushman, "A Question-Entailment Approach to Question
Answering", BMC Bioinformatics 2019), https://github.com/abachaa/MedQuAD, CC BY 4.0:
question-answer pairs built from NIH websites, one XML file per topic. Clone it and give
its folder as the first argument.

Usage:  python3 data/medquad-mini/make.py MEDQUAD_DIR [OUT_DIR]
OUT_DIR defaults to the folder of this script. Standard library only; deterministic.

Selection rule
--------------
1. The XML files of TOPICS below, in that order: the MedQuAD topics of the K-QA questions
   of data/kqa-mini (the NIH pages on scabies, genital herpes, HPV, cold sores, flu,
   migraine, gout, shingles, hemorrhoids, eye injuries, blood pressure, diabetes, anxiety),
   and five pages chosen for the quirks of real clinical text they hold (doses such as
   "2.2 mg/kg" and "0.51 mg/kg/d", "Dr. M.M. Cohen, Jr.", "e.g.,", "3.5 mg/L; and"
   before a flattened list item), which also stand as off-topic evidence.
2. Every QAPair of those files with a non-empty answer becomes one document, in file
   order: {"docno": "<folder>/<qid>", "text": <the Answer element's text>}. The text is
   kept exactly as the XML holds it (runs of spaces, flattened lists "   - item", source
   lines such as "NIH: National Institute of ...", "Summary :"), because these are what
   the evidence readers must cope with.
"""

import json
import os
import sys
import xml.etree.ElementTree as ET

TOPICS = [
    "4_MPlus_Health_Topics_QA/0000794.xml",  # Scabies
    "9_CDC_QA/0000364.xml",  # Parasites - Scabies
    "4_MPlus_Health_Topics_QA/0000400.xml",  # Genital Herpes
    "4_MPlus_Health_Topics_QA/0000490.xml",  # HPV
    "4_MPlus_Health_Topics_QA/0000401.xml",  # Genital Warts
    "4_MPlus_Health_Topics_QA/0000214.xml",  # Cold Sores
    "4_MPlus_Health_Topics_QA/0000146.xml",  # Canker Sores
    "4_MPlus_Health_Topics_QA/0000369.xml",  # Flu
    "4_MPlus_Health_Topics_QA/0000391.xml",  # Gastroenteritis
    "5_NIDDK_QA/0000123.xml",  # Viral Gastroenteritis
    "4_MPlus_Health_Topics_QA/0000610.xml",  # Migraine
    "6_NINDS_QA/0000194.xml",  # Migraine
    "4_MPlus_Health_Topics_QA/0000409.xml",  # Gout
    "7_SeniorHealth_QA/0000028.xml",  # Gout
    "4_MPlus_Health_Topics_QA/0000812.xml",  # Shingles
    "6_NINDS_QA/0000148.xml",  # Shingles
    "4_MPlus_Health_Topics_QA/0000458.xml",  # Hemorrhoids
    "5_NIDDK_QA/0000108.xml",  # Hemorrhoids
    "4_MPlus_Health_Topics_QA/0000345.xml",  # Eye Injuries
    "4_MPlus_Health_Topics_QA/0000235.xml",  # Corneal Disorders
    "4_MPlus_Health_Topics_QA/0000471.xml",  # High Blood Pressure
    "8_NHLBI_QA_XML/0000071.xml",  # High Blood Pressure
    "4_MPlus_Health_Topics_QA/0000266.xml",  # Diabetes
    "4_MPlus_Health_Topics_QA/0000273.xml",  # Diabetes Type 2
    "4_MPlus_Health_Topics_QA/0000048.xml",  # Anxiety
    # Real clinical text with the quirks the statement splitter is tested on:
    "9_CDC_QA/0000014.xml",  # Anaplasmosis: "2.2 mg/kg", "(i.e., ...)", "A. phagocytophilum"
    "2_GARD_QA/0001414.xml",  # Cohen syndrome: "Dr. M.M. Cohen, Jr. When ..."
    "2_GARD_QA/0002114.xml",  # Eosinophilic fasciitis: "(0.51 mg/kg/d)"
    "1_CancerGov_QA/0000030_1.xml",  # Plasma cell neoplasms: "3.5 mg/L; and     -  albumin"
    "2_GARD_QA/0000117.xml",  # Acute intermittent porphyria: "(e.g., barbiturates, ...)"
]


def documents(medquad):
    for rel in TOPICS:
        folder = rel.split("/")[0]
        root = ET.parse(os.path.join(medquad, rel)).getroot()
        for pair in root.iter("QAPair"):
            answer = pair.findtext("Answer") or ""
            if not answer.strip():
                continue
            qid = pair.find("Question").get("qid")
            yield {"docno": f"{folder}/{qid}", "text": answer}


def main():
    if len(sys.argv) < 2:
        sys.exit(__doc__)
    out = sys.argv[2] if len(sys.argv) > 2 else os.path.dirname(os.path.abspath(__file__))
    with open(os.path.join(out, "evidence.jsonl"), "w", encoding="utf-8") as f:
        for d in documents(sys.argv[1]):
            f.write(json.dumps(d, ensure_ascii=False) + "\n")


if __name__ == "__main__":
    main()
