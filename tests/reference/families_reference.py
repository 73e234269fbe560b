#!/usr/bin/env python3
"""Hugging Face transformers as the reference of medrank's DeBERTa-v2/v3 and ModernBERT.

make: a random-weight model folder written by transformers itself (`save_pretrained`):

  families_reference.py make --config small-v3 --head seq --labels a,b,c --vocab N --out DIR [--seed S]

  The weights are transformers' own initialisation, then every parameter is redrawn so
  that each path of the forward pass matters at the tests' tolerance: linear weights with
  standard deviation 1/sqrt(fan_in) (attention that is far from uniform), biases and the
  norms' shifts N(0, 0.1), the norms' scales 1 + N(0, 0.1), embeddings and DeBERTa's
  relative-position table N(0, 1). (With the stock std 0.02 the attention is almost
  uniform and the relative-position terms, the rotary angles and the local windows would
  change the outputs by less than the tolerance.) `--config` names one of CONFIGS.

run: the model's outputs for given token ids (eager attention, float32, no dropout):

  families_reference.py run --model DIR --inputs IDS.json --out PREFIX [--layer L]

  IDS.json is {"ids": [[...], ...], "type_ids": [[...], ...]} (unpadded rows). The rows run
  in batches of 16, right-padded. Written as little-endian float32: PREFIX.hidden (the last
  layer's states of every real token, row after row), PREFIX.layer (the states after
  layer L, the same way; ModernBERT's without its final norm, as transformers' hidden
  states are), PREFIX.logits (the head's logits per row, for a model with a head).

Needs torch and transformers (scripts/setup.sh reference).
"""
import argparse
import json
import math
import os
import sys

import memo

# Before torch is imported: a run whose script, libraries and inputs were seen before is
# replayed (make's --out is a folder, run's a prefix of three files).
MEMO = memo.Memo(inputs=["--model", "--inputs"],
                 outputs={"--out": "prefix" if sys.argv[1:2] == ["run"] else "path"})

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
import torch  # noqa: E402
from transformers import AutoConfig, AutoModel, AutoModelForMultipleChoice, AutoModelForSequenceClassification  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

hf_logging.set_verbosity_error()

# DeBERTa-v3 as released (relative positions only, 256 log buckets over 512, shared
# position projections, the table layer-normed), a DeBERTa-v2 shape (absolute positions
# too, token types, plain clamped distances, no table norm, pos_att_type as a string),
# and ModernBERT (alternating global and local layers, a window of 16, no biases).
CONFIGS = {
    "small-v3": dict(model_type="deberta-v2", hidden_size=32, num_hidden_layers=2, num_attention_heads=4,
                     intermediate_size=64, max_position_embeddings=512, relative_attention=True,
                     pos_att_type=["p2c", "c2p"], position_buckets=256, max_relative_positions=-1,
                     norm_rel_ebd="layer_norm", share_att_key=True, position_biased_input=False,
                     type_vocab_size=0, hidden_act="gelu", layer_norm_eps=1e-7, pad_token_id=0),
    "small-v2": dict(model_type="deberta-v2", hidden_size=48, num_hidden_layers=2, num_attention_heads=3,
                     intermediate_size=80, max_position_embeddings=512, relative_attention=True,
                     pos_att_type="c2p|p2c", position_buckets=-1, max_relative_positions=24,
                     norm_rel_ebd="none", share_att_key=True, position_biased_input=True,
                     type_vocab_size=2, hidden_act="gelu_new", layer_norm_eps=1e-7, pad_token_id=0,
                     pooler_hidden_act="relu"),
    "base-v3": dict(model_type="deberta-v2", hidden_size=768, num_hidden_layers=12, num_attention_heads=12,
                    intermediate_size=3072, max_position_embeddings=512, relative_attention=True,
                    pos_att_type=["p2c", "c2p"], position_buckets=256, max_relative_positions=-1,
                    norm_rel_ebd="layer_norm", share_att_key=True, position_biased_input=False,
                    type_vocab_size=0, hidden_act="gelu", layer_norm_eps=1e-7, pad_token_id=0),
    "small-modernbert": dict(model_type="modernbert", hidden_size=64, num_hidden_layers=3, num_attention_heads=4,
                             intermediate_size=96, max_position_embeddings=1024, global_attn_every_n_layers=3,
                             local_attention=16, hidden_activation="gelu", norm_eps=1e-5, pad_token_id=0,
                             bos_token_id=101, eos_token_id=102, cls_token_id=101, sep_token_id=102),
    "small-modernbert-mean": dict(model_type="modernbert", hidden_size=64, num_hidden_layers=4,
                                  num_attention_heads=2, intermediate_size=48, max_position_embeddings=1024,
                                  global_attn_every_n_layers=2, local_attention=32, hidden_activation="gelu",
                                  norm_eps=1e-5, pad_token_id=0, bos_token_id=101, eos_token_id=102,
                                  cls_token_id=101, sep_token_id=102, classifier_pooling="mean",
                                  norm_bias=True, attention_bias=True, mlp_bias=True, classifier_bias=True),
    "base-modernbert": dict(model_type="modernbert", hidden_size=768, num_hidden_layers=22, num_attention_heads=12,
                            intermediate_size=1152, max_position_embeddings=8192, global_attn_every_n_layers=3,
                            local_attention=128, hidden_activation="gelu", norm_eps=1e-5, pad_token_id=0,
                            bos_token_id=101, eos_token_id=102, cls_token_id=101, sep_token_id=102),
    # The benchmarks' shapes (BENCHMARKS.md): all-MiniLM-L6-v2's 6 layers x 384 (12 heads of
    # 32, feed-forward 1,536) in DeBERTa-v3's and ModernBERT's families (ModernBERT's GeGLU
    # at its own ratio, 1.5 x hidden as in ModernBERT-base; windows of 128, every third
    # layer global).
    "bench-v3-6x384": dict(model_type="deberta-v2", hidden_size=384, num_hidden_layers=6, num_attention_heads=12,
                           intermediate_size=1536, max_position_embeddings=512, relative_attention=True,
                           pos_att_type=["p2c", "c2p"], position_buckets=256, max_relative_positions=-1,
                           norm_rel_ebd="layer_norm", share_att_key=True, position_biased_input=False,
                           type_vocab_size=0, hidden_act="gelu", layer_norm_eps=1e-7, pad_token_id=0),
    "bench-modernbert-6x384": dict(model_type="modernbert", hidden_size=384, num_hidden_layers=6,
                                   num_attention_heads=12, intermediate_size=576, max_position_embeddings=8192,
                                   global_attn_every_n_layers=3, local_attention=128, hidden_activation="gelu",
                                   norm_eps=1e-5, pad_token_id=0, bos_token_id=101, eos_token_id=102,
                                   cls_token_id=101, sep_token_id=102),
}

HEADS = {"seq": AutoModelForSequenceClassification, "mc": AutoModelForMultipleChoice, "none": AutoModel}


def redraw(model, seed):
    """Every parameter redrawn as the module doc says (seeded)."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            leaf = name.split(".")[-1]
            if p.dim() == 2 and ("embeddings" in name or "rel_embeddings" in name):
                p.copy_(torch.randn(p.shape, generator=g))
            elif p.dim() == 2:
                p.copy_(torch.randn(p.shape, generator=g) / math.sqrt(p.shape[1]))
            elif leaf == "bias":
                p.copy_(0.1 * torch.randn(p.shape, generator=g))
            elif leaf == "weight":  # a norm's scale
                p.copy_(1.0 + 0.1 * torch.randn(p.shape, generator=g))
            else:
                sys.exit(f"families_reference: no rule for parameter {name}")


def make(args):
    spec = dict(CONFIGS[args.config])
    model_type = spec.pop("model_type")
    labels = [x for x in args.labels.split(",") if x]
    kwargs = dict(spec, vocab_size=args.vocab)
    if args.head == "seq":
        kwargs.update(num_labels=len(labels), id2label=dict(enumerate(labels)),
                      label2id={l: i for i, l in enumerate(labels)})
    config = AutoConfig.for_model(model_type, **kwargs)
    torch.manual_seed(args.seed)
    model = HEADS[args.head].from_config(config, attn_implementation="eager")
    redraw(model, args.seed)
    model.save_pretrained(args.out)


def run(args):
    model_dir = args.model
    config = AutoConfig.from_pretrained(model_dir)
    arch = (config.architectures or [""])[0]
    head = "mc" if arch.endswith("ForMultipleChoice") else "seq" if arch.endswith("ForSequenceClassification") else "none"
    model = HEADS[head].from_pretrained(model_dir, attn_implementation="eager").float().eval()
    with open(args.inputs) as f:
        inputs = json.load(f)
    rows, types = inputs["ids"], inputs.get("type_ids") or [[0] * len(r) for r in inputs["ids"]]
    pad = config.pad_token_id or 0
    hidden, layer, logits = [], [], []
    base = model if head == "none" else getattr(model, model.base_model_prefix)
    for at in range(0, len(rows), 16):
        part, part_types = rows[at:at + 16], types[at:at + 16]
        n = max(len(r) for r in part)
        ids = torch.full((len(part), n), pad, dtype=torch.long)
        tt = torch.zeros((len(part), n), dtype=torch.long)
        mask = torch.zeros((len(part), n), dtype=torch.long)
        for i, (r, t) in enumerate(zip(part, part_types)):
            ids[i, :len(r)] = torch.tensor(r)
            tt[i, :len(r)] = torch.tensor(t)
            mask[i, :len(r)] = 1
        kw = dict(input_ids=ids, attention_mask=mask)
        if getattr(config, "type_vocab_size", 0):
            kw["token_type_ids"] = tt
        with torch.no_grad():
            out = base(**kw, output_hidden_states=True)
            states = out.hidden_states[args.layer]
            if head == "mc":
                lg = model(**{k: v.unsqueeze(1) for k, v in kw.items()}).logits  # one option per row
            elif head == "seq":
                lg = model(**kw).logits
            else:
                lg = None
        for i, r in enumerate(part):
            hidden.append(out.last_hidden_state[i, :len(r)].reshape(-1))
            layer.append(states[i, :len(r)].reshape(-1))
            if lg is not None:
                logits.append(lg[i].reshape(-1))
    torch.cat(hidden).numpy().astype("<f4").tofile(args.out + ".hidden")
    torch.cat(layer).numpy().astype("<f4").tofile(args.out + ".layer")
    if logits:
        torch.cat(logits).numpy().astype("<f4").tofile(args.out + ".logits")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    sub = ap.add_subparsers(dest="cmd", required=True)
    m = sub.add_parser("make")
    m.add_argument("--config", required=True, choices=sorted(CONFIGS))
    m.add_argument("--head", required=True, choices=sorted(HEADS))
    m.add_argument("--labels", default="")
    m.add_argument("--vocab", type=int, required=True)
    m.add_argument("--seed", type=int, default=0)
    m.add_argument("--out", required=True)
    r = sub.add_parser("run")
    r.add_argument("--model", required=True)
    r.add_argument("--inputs", required=True)
    r.add_argument("--out", required=True)
    r.add_argument("--layer", type=int, default=1)
    args = ap.parse_args()
    torch.set_num_threads(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())
    make(args) if args.cmd == "make" else run(args)


if __name__ == "__main__":
    MEMO.run(main)
