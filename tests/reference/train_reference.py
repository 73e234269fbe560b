#!/usr/bin/env python3
"""Independent PyTorch reference for `medrank train`: replays a training trace step by step.

`medrank train ... --trace DIR` writes the model training starts from (DIR itself: HF
config, f32 safetensors, tokenizer.json) and DIR/trace.json: the options, the examples as
token ids, and each optimiser step's examples, learning rates and loss. This script loads
DIR with Hugging Face transformers (AutoModelForSequenceClassification or
AutoModelForMultipleChoice: BERT, DeBERTa-v2/v3 or ModernBERT, as the folder's config
says), trains exactly what medrank trains with torch's autograd and
torch.optim.AdamW, and compares each step's loss (computed before that step's update) with
medrank's. It is independent of medrank: HF's BERT forward pass, torch's gradients and
torch's optimiser, its own schedule and objective; none of medrank's code or numbers
except the trace's inputs (token ids, batch order) and the losses it checks.

Checked on the way (exit 2 when the trace disagrees): the schedule's total and warm-up
steps recomputed from the options, each step's head/layer learning rate recomputed
(1e-12 relative), the frozen part ("freeze" vs "trained_layers"), every initial weight
present (no random initialisation by HF), with --full every epoch covering every example once.

Deliberate differences from a stock HF Trainer fine-tune (they follow medrank's spec):
- no dropout: model.eval() for the whole run (not zeroed config probabilities): eval()
  turns off every dropout (hidden, attention, classifier, whatever config field set it)
  but leaves autograd on (only torch.no_grad stops it), and the config stays as loaded,
  so a saved model's config.json is the initial one;
- weight decay on every trained parameter, biases and LayerNorm included (the Trainer
  exempts them); two parameter groups: the new head at `lr` (DeBERTa's pooler and
  ModernBERT's head layer are the head's), pretrained weights at `layer_lr` (BERT's pooler
  in the group "pooler_trains_with" names; with top:N ModernBERT's final norm, which reads
  the top layer, trains with the layers; DeBERTa's relative-position table, which every
  layer reads, only with all); no gradient clipping;
- linear warm-up then linear decay computed per step as medrank does:
  lr(s) = base*(s+1)/W for s < W, else base*(T-s)/max(T-W, 1) (HF's warm-up starts at 0);
- the class-weighted loss is a mean over the step's examples, sum w[gold]*CE / |E|,
  not torch's CrossEntropyLoss(weight=w) mean, which divides by the summed weights;
- with --freeze top:N medrank caches the frozen lower layers' states in f16 (a deliberate
  rounding); this script recomputes them in f32 every step (losses differ by ~1e-4 at most).
A multiple-choice example's softmax runs over its own inputs: examples with fewer inputs
are padded with a copy of their first input, whose logit is masked to -inf (no gradient).
The score task (trace head "regression", `medrank train --task score`): the folder loads as
a *ForSequenceClassification with problem_type "regression" (its head on the mean of the
tokens, medrank_head_pooling "mean", the task's default: see mean_pooled_logits); each dimension's target is
the human score standardised with the training examples' mean and population standard
deviation, recomputed here from the trace's scores and checked against the config's
medrank_score_scale (1e-9 relative); an example's loss is the squared error averaged over
the dimensions it has a score of (a missing one, null, is masked out): with every
dimension present, torch's MSELoss as transformers applies it to a regression head.

Usage:
  train_reference.py --trace DIR [--steps K | --full] [--out DIR2] [--json FILE] [--tolerance T]
    (default) the first K steps of the trace (all the trace lists when K is not given);
    --full    every step (the trace needs "steps_traced": "all"), dev metrics after each
              epoch, best epoch by "select_by", early stop after "patience" epochs;
              --out DIR2 saves the best epoch's model (+ tokenizer.json) for `medrank evaluate`.
Prints step | medrank | torch | |diff|; exit 1 if any |diff| > tolerance (default 1e-3).
Needs: pip install torch transformers (scripts/setup.sh reference).
"""
import argparse
import json
import math
import os
import shutil
import sys

import memo

# Before torch is imported: a run whose trace, script and libraries were seen before is replayed.
MEMO = memo.Memo(inputs=["--trace"], outputs={"--json": "path", "--out": "path"})

os.environ.setdefault("HF_HUB_OFFLINE", "1")
os.environ.setdefault("TRANSFORMERS_OFFLINE", "1")
import torch  # noqa: E402
import torch.nn.functional as F  # noqa: E402
from transformers import AutoModelForMultipleChoice, AutoModelForSequenceClassification  # noqa: E402
from transformers.utils import logging as hf_logging  # noqa: E402

hf_logging.disable_progress_bar()


def fail(msg):
    print(f"train_reference: {msg}", file=sys.stderr)
    sys.exit(2)


def scheduled_lr(base, step, warmup, total):
    if step < warmup:
        return base * (step + 1) / warmup
    return base * (total - step) / max(total - warmup, 1)


def schedule_lengths(trace):
    """Total and warm-up steps from the options: ceil(n / (batch*accum)) per epoch, warm-up
    rounded half away from zero (Rust's f64::round); checked against the trace's."""
    o = trace["options"]
    per_step = max(o["batch_size"], 1) * max(o["grad_accum"], 1)
    total = math.ceil(len(trace["examples"]) / per_step) * max(o["epochs"], 1)
    warmup = int(math.floor(total * o["warmup_ratio"] + 0.5))
    if (total, warmup) != (trace["total_steps"], trace["warmup_steps"]):
        fail(f"schedule: total/warm-up steps {total}/{warmup} from the options, trace says "
             f"{trace['total_steps']}/{trace['warmup_steps']}")
    return total, warmup


def load_model(initial, trace):
    mc = trace["head"] == "multiple_choice"
    regression = trace["head"] == "regression"
    cls = AutoModelForMultipleChoice if mc else AutoModelForSequenceClassification
    model, info = cls.from_pretrained(initial, local_files_only=True, attn_implementation="eager",
                                      output_loading_info=True)
    if info["missing_keys"] or info["unexpected_keys"]:
        fail(f"initial weights do not match {type(model).__name__}: {info}")
    arch = (model.config.architectures or [None])[0]
    if arch != type(model).__name__:
        fail(f"config architectures {model.config.architectures}, trace head {trace['head']}")
    if not mc and [model.config.id2label[i] for i in range(model.config.num_labels)] != trace["labels"]:
        fail(f"config id2label {model.config.id2label} vs trace labels {trace['labels']}")
    if regression != (model.config.problem_type == "regression"):
        fail(f"config problem_type {model.config.problem_type!r}, trace head {trace['head']}")
    # eval() replays without dropout: a trace trained with dropout (medrank's masks are its
    # own counter-based draws, never torch's) cannot be replayed step by step.
    dropout = trace["options"].get("dropout") or {}
    if dropout.get("hidden", 0) or dropout.get("attention", 0):
        fail(f"the trace trained with dropout {dropout}: replay a run with --dropout 0")
    model.float().eval()  # f32; eval(): no dropout, gradients still recorded
    return model, mc


def param_groups(model, trace):
    """(head params, pretrained params that train); everything else gets requires_grad=False."""
    n_layers = model.config.num_hidden_layers
    freeze, top = trace["freeze"], trace["trained_layers"]
    expected = 0 if freeze == "head" else n_layers if freeze == "all" else min(int(freeze[len("top:"):]), n_layers)
    if top != expected:
        fail(f"freeze {freeze} trains {expected} of {n_layers} layers, trace says {top}")
    head, layers = [], []
    base = model.base_model_prefix + "."  # bert., deberta., model.
    for name, p in model.named_parameters():
        inner = name[len(base):] if name.startswith(base) else None
        if name.startswith(("classifier.", "pooler.", "head.")):  # DeBERTa's pooler, ModernBERT's head
            group = head
        elif inner is None:
            fail(f"unexpected parameter {name}")
        elif inner.startswith("pooler."):
            group = head if trace["pooler_trains_with"] == "head" else layers
        elif inner.startswith(("encoder.layer.", "layers.")):
            index = int(inner.split(".")[2 if inner.startswith("encoder.") else 1])
            group = layers if index >= n_layers - top else None
        elif inner.startswith("final_norm."):
            group = layers if top > 0 else None
        elif inner.startswith(("embeddings.", "encoder.rel_embeddings.", "encoder.LayerNorm.")):
            group = layers if freeze == "all" else None
        else:
            fail(f"unexpected parameter {name}")
        p.requires_grad_(group is not None)
        if group is not None:
            group.append((name, p))
    return head, layers


def logits_of(model, examples, mc):
    """Logits [n, labels] (classification) or [n, max inputs] with -inf where an example has
    no such input (multiple choice), for examples given as trace dicts."""
    rows = [inp for e in examples for inp in (e["inputs"] if mc else e["inputs"][:1])]
    seq = max(len(r["input_ids"]) for r in rows)
    n_choices = max(len(e["inputs"]) for e in examples) if mc else 1
    shape = (len(examples), n_choices, seq) if mc else (len(examples), seq)
    ids, types, mask = (torch.zeros(shape, dtype=torch.long) for _ in range(3))
    present = torch.zeros(len(examples), n_choices, dtype=torch.bool)
    for i, e in enumerate(examples):
        for k in range(n_choices):
            inp = e["inputs"][k] if k < len(e["inputs"]) else e["inputs"][0]  # filler, masked below
            n = len(inp["input_ids"])
            at = (i, k) if mc else (i,)
            ids[at][:n] = torch.tensor(inp["input_ids"])
            types[at][:n] = torch.tensor(inp.get("token_type_ids") or [0] * n)
            mask[at][:n] = 1
            present[i, k] = k < len(e["inputs"])
    typed = {"token_type_ids": types} if getattr(model.config, "type_vocab_size", 0) else {}
    if getattr(model.config, "medrank_head_pooling", "cls") == "mean":
        logits = mean_pooled_logits(model, ids, mask, typed).view(len(examples), -1)
    else:
        logits = model(input_ids=ids, attention_mask=mask, **typed).logits
    return logits.masked_fill(~present, float("-inf")) if mc else logits


def mean_pooled_logits(model, ids, mask, typed):
    """A BERT head on the mean of the real tokens' last states (config medrank_head_pooling
    "mean", which transformers does not read): the masked mean, then the pooler, dropout and
    classifier as Bert*ForSequenceClassification / ForMultipleChoice apply them to the first
    token (the pooler reads position 0 of a one-token sequence)."""
    if model.config.model_type != "bert":
        fail(f"a mean-pooled head is replayed for BERT only, not {model.config.model_type}")
    flat = lambda t: t.reshape(-1, t.size(-1))  # noqa: E731 (multiple choice: one row per option)
    h = model.bert(input_ids=flat(ids), attention_mask=flat(mask),
                   **{k: flat(v) for k, v in typed.items()}).last_hidden_state
    m = flat(mask).unsqueeze(-1).to(h.dtype)
    pooled = (h * m).sum(1) / m.sum(1).clamp(min=1)
    return model.classifier(model.dropout(model.bert.pooler(pooled.unsqueeze(1))))


def score_scale(trace, config):
    """Each dimension's (mean, population std) over the training examples that have it,
    recomputed from the trace's scores and checked against the folder's config."""
    scale = []
    for j, label in enumerate(trace["labels"]):
        values = [e["scores"][j] for e in trace["examples"] if e["scores"][j] is not None]
        mean = sum(values) / len(values)
        std = math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))
        kept = config.medrank_score_scale[label]
        for ours, theirs in ((mean, kept["mean"]), (std, kept["std"])):
            if abs(ours - theirs) > 1e-9 * max(abs(ours), 1.0):
                fail(f"{label}: mean/std {mean}/{std} from the trace's scores, config says {kept}")
        scale.append((mean, std))
    return scale


def squared_error(outputs, examples, scale):
    """Per example: the squared error of the outputs against the standardised scores, averaged
    over the dimensions the example has ([n] tensor)."""
    target = torch.tensor([[0.0 if v is None else (v - m) / s for v, (m, s) in zip(e["scores"], scale)]
                           for e in examples], dtype=outputs.dtype)
    present = torch.tensor([[v is not None for v in e["scores"]] for e in examples], dtype=outputs.dtype)
    errors = F.mse_loss(outputs, target, reduction="none") * present
    return errors.sum(dim=1) / present.sum(dim=1)


def objective(logits, examples, weights, scale):
    """Each example's loss: the score task's squared error, or the weighted cross-entropy."""
    return squared_error(logits, examples, scale) if scale is not None else weighted_ce(logits, examples, weights)


def weighted_ce(logits, examples, weights):
    """w[gold] * CE per example ([n] tensor); weights None: all 1."""
    gold = torch.tensor([e["gold"] for e in examples])
    ce = F.cross_entropy(logits, gold, reduction="none")
    if weights is None:
        return ce
    return ce * torch.tensor([weights[e["gold"]] for e in examples], dtype=ce.dtype)


def run_step(model, opt, trace, step, schedule, weights, mc, scale):
    """One optimiser step; returns its loss (before the update) as a float."""
    o, (total, warmup) = trace["options"], schedule
    s = step["step"]
    for group, base, key in zip(opt.param_groups, (o["learning_rate"], o["layer_learning_rate"]), ("lr", "layer_lr")):
        lr = scheduled_lr(base, s, warmup, total)
        if abs(lr - step[key]) > 1e-12 * max(abs(lr), abs(step[key])):
            fail(f"step {s}: {key} {step[key]!r} in the trace, schedule gives {lr!r}")
        group["lr"] = lr
    batch = [trace["examples"][i] for i in step["examples"]]
    if not batch or len(batch) > max(o["batch_size"], 1) * max(o["grad_accum"], 1):
        fail(f"step {s}: {len(batch)} examples")
    opt.zero_grad(set_to_none=True)
    loss_sum = 0.0
    for at in range(0, len(batch), max(o["batch_size"], 1)):  # micro-batches: memory only
        part = batch[at:at + max(o["batch_size"], 1)]
        losses = objective(logits_of(model, part, mc), part, weights, scale)
        (losses.sum() / len(batch)).backward()
        loss_sum += losses.detach().double().sum().item()
    opt.step()
    return loss_sum / len(batch)


def dev_outputs(model, trace, mc, loss_of):
    """Every dev example's logits (lists) and loss (loss_of(logits, examples): [n] tensor), in
    batches of the training's batch size, without gradients."""
    dev, bs = trace["dev_examples"], max(trace["options"]["batch_size"], 1)
    outputs, losses = [], []
    with torch.no_grad():
        for at in range(0, len(dev), bs):
            part = dev[at:at + bs]
            logits = logits_of(model, part, mc)
            losses += loss_of(logits, part).tolist()
            outputs += logits.tolist()
    return outputs, losses


def score_dev_metrics(model, trace, scale):
    """The score task's: loss (mean squared error as trained) and spearman (per dimension,
    scipy's spearmanr of the de-standardised predictions with the human scores within each
    batch, averaged over the batches where it is defined, then over the dimensions)."""
    from scipy.stats import spearmanr
    dev = trace["dev_examples"]
    outputs, losses = dev_outputs(model, trace, False, lambda logits, part: squared_error(logits, part, scale))
    per_dimension = []
    for j, (mean, std) in enumerate(scale):
        rhos = []
        for batch in dict.fromkeys(e["batch"] for e in dev):
            pairs = [(o[j] * std + mean, e["scores"][j]) for o, e in zip(outputs, dev)
                     if e["batch"] == batch and e["scores"][j] is not None]
            if len(pairs) >= 3 and len({p for p, _ in pairs}) > 1 and len({h for _, h in pairs}) > 1:
                rhos.append(spearmanr([p for p, _ in pairs], [h for _, h in pairs]).statistic)
        if rhos:
            per_dimension.append(sum(rhos) / len(rhos))
    spearman = sum(per_dimension) / len(per_dimension) if per_dimension else float("nan")
    return {"spearman": spearman, "loss": sum(losses) / len(losses)}


def dev_metrics(model, trace, weights, mc, scale):
    """accuracy, macro_f1 (labels seen in gold or predictions), loss (mean w[gold]*CE)."""
    if scale is not None:
        return score_dev_metrics(model, trace, scale)
    dev = trace["dev_examples"]
    outputs, losses = dev_outputs(model, trace, mc, lambda logits, part: weighted_ce(logits, part, weights))
    preds = [max(range(len(row)), key=lambda k: (row[k], -k)) for row in outputs]  # first index wins ties
    gold = [e["gold"] for e in dev]
    f1s = []
    for c in sorted(set(gold) | set(preds)):
        tp = sum(g == c and p == c for g, p in zip(gold, preds))
        fp = sum(g != c and p == c for g, p in zip(gold, preds))
        fn = sum(g == c and p != c for g, p in zip(gold, preds))
        f1s.append(2 * tp / (2 * tp + fp + fn))
    return {"accuracy": sum(g == p for g, p in zip(gold, preds)) / len(dev),
            "macro_f1": sum(f1s) / len(f1s), "loss": sum(losses) / len(losses)}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--trace", required=True, help="the directory `medrank train --trace` wrote")
    mode = ap.add_mutually_exclusive_group()
    mode.add_argument("--steps", type=int, help="check the first K steps (default: all the trace lists)")
    mode.add_argument("--full", action="store_true", help="every epoch, dev metrics, early stopping")
    ap.add_argument("--out", help="with --full: save the best epoch's model here")
    ap.add_argument("--json", help="write the comparison as JSON")
    ap.add_argument("--tolerance", type=float, default=1e-3)
    args = ap.parse_args()
    if args.out and not args.full:
        fail("--out needs --full")

    torch.manual_seed(0)
    torch.use_deterministic_algorithms(True)
    torch.set_num_threads(len(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else os.cpu_count())
    initial = args.trace  # the starting model lies in the trace folder itself
    with open(os.path.join(args.trace, "trace.json")) as f:
        trace = json.load(f)
    model, mc = load_model(initial, trace)
    scale = score_scale(trace, model.config) if trace["head"] == "regression" else None
    weights = None if mc else trace["class_weights"]  # None: every weight 1
    if weights is not None and len(weights) != model.config.num_labels:
        fail(f"{len(weights)} class weights for {model.config.num_labels} labels")
    schedule = schedule_lengths(trace)
    head, layers = param_groups(model, trace)
    o = trace["options"]
    # Both groups always exist (an empty one is a no-op) so param_groups[1] is the layers'.
    opt = torch.optim.AdamW([{"params": [p for _, p in head]}, {"params": [p for _, p in layers]}],
                            lr=o["learning_rate"], betas=(0.9, 0.999), eps=1e-8, weight_decay=o["weight_decay"])

    steps = trace["steps"]
    if args.full:
        if trace.get("steps_traced") != "all":
            fail("--full needs a trace written with --trace-steps all")
    elif args.steps is not None:
        if args.steps > len(steps):
            fail(f"--steps {args.steps}: the trace lists {len(steps)} steps")
        steps = steps[:args.steps]

    rows, epochs, best, since_best, stopped_after = [], [], None, 0, None

    def step_and_record(step):
        ours = run_step(model, opt, trace, step, schedule, weights, mc, scale)
        rows.append({"step": step["step"], "medrank": step["loss"], "reference": ours,
                     "diff": abs(ours - step["loss"])})
        print(f"{step['step']:>5} | {step['loss']:.6f} | {ours:.6f} | {rows[-1]['diff']:.2e}", flush=True)

    print(f"{'step':>5} | medrank  | torch    | |diff|")
    if not args.full:
        for step in steps:
            step_and_record(step)
    else:
        select, higher = trace["select_by"], trace["select_by"] != "loss"
        for epoch in range(1, max(o["epochs"], 1) + 1):
            in_epoch = [s for s in steps if s["epoch"] == epoch]
            if not in_epoch:
                print(f"note: the trace has no epoch {epoch}; the reference would go on", file=sys.stderr)
                break
            if sorted(i for s in in_epoch for i in s["examples"]) != list(range(len(trace["examples"]))):
                fail(f"epoch {epoch}: its steps do not cover every training example once")
            for step in in_epoch:
                step_and_record(step)
            m = dev_metrics(model, trace, weights, mc, scale)
            epochs.append({"epoch": epoch, **m})
            print(f"epoch {epoch}: dev " + "  ".join(f"{k} {v:.6f}" for k, v in m.items()), flush=True)
            if best is None or (m[select] > best[0] if higher else m[select] < best[0]):
                best = (m[select], epoch, {n: p.detach().clone() for n, p in head + layers})
                since_best = 0
            else:
                since_best += 1
                if since_best >= max(trace["patience"], 1):
                    stopped_after = epoch
                    break
        ran = epochs[-1]["epoch"] if epochs else 0
        if any(s["epoch"] > ran for s in steps):
            print(f"note: early stop after epoch {ran}, the trace goes on to epoch "
                  f"{max(s['epoch'] for s in steps)}", file=sys.stderr)
        if best is not None:
            print(f"best epoch {best[1]} ({select} {best[0]:.6f})"
                  + (f", stopped after epoch {stopped_after}" if stopped_after else ""))
        if args.out and best is not None:
            with torch.no_grad():
                for name, p in head + layers:
                    p.copy_(best[2][name])
            model.save_pretrained(args.out)  # model.safetensors: the default since transformers 4.35, 5.x's only format
            shutil.copy(os.path.join(initial, "tokenizer.json"), os.path.join(args.out, "tokenizer.json"))

    max_diff = max((r["diff"] for r in rows), default=0.0)
    print(f"max |diff| {max_diff:.3e} over {len(rows)} steps (tolerance {args.tolerance:g})")
    if args.json:
        out = {"steps": rows, "max_diff": max_diff}
        if args.full:
            out.update(epochs=epochs, best_epoch=best[1] if best else None, stopped_after_epoch=stopped_after)
        with open(args.json, "w") as f:
            json.dump(out, f, indent=1)
    sys.exit(1 if max_diff > args.tolerance or any(math.isnan(r["diff"]) for r in rows) else 0)


if __name__ == "__main__":
    MEMO.run(main)
