#!/usr/bin/env python3
"""transformers' conversion of a DeBERTa-v2/v3 SentencePiece model, the reference of
medrank's (src/model/spm.rs).

  deberta_tokenizer.py --spm spm.model --texts TEXTS.json --tokenizer-json OUT.json --ids IDS.json

Converts spm.model with `transformers.convert_slow_tokenizer.DebertaV2Converter` (the
conversion transformers' fast tokenizer runs: a Unigram model, Strip, the precompiled
character map, Metaspace, [CLS]/[SEP]) and writes its tokenizer.json; encodes every text
of TEXTS.json ([text, pair or null] each) with it (the `tokenizers` library, special tokens
added) and writes {"ids": [...], "sentencepiece_differs": n, "notes": "..."} to IDS.json:
`sentencepiece_differs` counts the texts whose ids (without [CLS]/[SEP]) differ from
SentencePiece's own encoding of the single texts, and `notes` says how many differ from
transformers 5's AutoTokenizer for a folder with the same spm.model (which builds its
normalizer in code, NFC without the character map, whatever the file says).
"""
import argparse
import json
import os
import shutil
import tempfile

import memo

# Before transformers is imported: a conversion seen before is replayed.
MEMO = memo.Memo(inputs=["--spm", "--texts"], outputs={"--tokenizer-json": "path", "--ids": "path"})

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
import sentencepiece  # noqa: E402
from transformers import AutoTokenizer, DebertaV2Config  # noqa: E402
from transformers.convert_slow_tokenizer import DebertaV2Converter  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

hf_logging.set_verbosity_error()


class Original:
    """What the converter reads of a slow DeBERTa-v2 tokenizer (DeBERTa-v3's settings)."""

    def __init__(self, path):
        self.vocab_file = path
        self.do_lower_case = False
        self.split_by_punct = False
        self.add_prefix_space = True
        self.legacy = True
        self.processor = sentencepiece.SentencePieceProcessor(model_file=path)

    def convert_tokens_to_ids(self, token):
        return self.processor.piece_to_id(token)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--spm", required=True)
    ap.add_argument("--texts", required=True)
    ap.add_argument("--tokenizer-json", required=True)
    ap.add_argument("--ids", required=True)
    args = ap.parse_args()
    original = Original(args.spm)
    tokenizer = DebertaV2Converter(original).converted()
    tokenizer.save(args.tokenizer_json)
    with open(args.texts, encoding="utf-8") as f:
        texts = json.load(f)
    ids = [tokenizer.encode(a, b).ids if b is not None else tokenizer.encode(a).ids for a, b in texts]
    sp_differs = sum(
        1 for (a, b), i in zip(texts, ids) if b is None and original.processor.encode(a) != i[1:-1]
    )
    with tempfile.TemporaryDirectory() as folder:
        shutil.copy(args.spm, os.path.join(folder, "spm.model"))
        DebertaV2Config(vocab_size=original.processor.get_piece_size()).save_pretrained(folder)
        auto = AutoTokenizer.from_pretrained(folder)
        auto_ids = [auto(a, b)["input_ids"] if b is not None else auto(a)["input_ids"] for a, b in texts]
    auto_differs = sum(1 for x, y in zip(ids, auto_ids) if x != y)
    notes = (f"transformers' DebertaV2Converter ids equal SentencePiece's on all but {sp_differs} of "
             f"{sum(1 for _, b in texts if b is None)} single texts; transformers {__import__('transformers').__version__}'s "
             f"AutoTokenizer differs on {auto_differs} of {len(texts)}")
    with open(args.ids, "w") as f:
        json.dump({"ids": ids, "sentencepiece_differs": sp_differs, "notes": notes}, f)


if __name__ == "__main__":
    MEMO.run(main)
