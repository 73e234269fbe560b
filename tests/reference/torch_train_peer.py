#!/usr/bin/env python3
"""GPU peer for `medrank bench --parts train`: whole-encoder fine-tuning of the same model
folder by PyTorch on CUDA, the shape medrank's bench trains.

The model is Hugging Face transformers' AutoModelForMultipleChoice of the folder (the
encoder's weights, a new pooler-and-classifier head as medrank adds one), every parameter
trained with torch.optim.AdamW, fp32 with TF32 off (the arithmetic of medrank's f32
kernels) and dropout off (medrank's trainer has none). A step is the forward pass over
QUESTIONS x OPTIONS sequences of LENGTH random ids (no padding), the loss, the backward pass
and the optimiser step, timed to its end (torch.cuda.synchronize).

Usage:
  torch_train_peer.py MODEL_DIR --lengths 256,512 [--questions 16] [--options 5]
                      [--repeats 3] [--warmup 1]
    -> {"device": ..., "torch": ..., "cells": [{"seq_len", "questions", "options", "seconds": [s...]}]}
Exits with status 3 and a one-line reason when PyTorch, transformers or a CUDA device is
missing (the bench then says the peer was skipped).
"""
import json
import sys
import time


def option(args, name, default):
    return int(args[args.index(name) + 1]) if name in args else default


def main():
    args = sys.argv[1:]
    if len(args) < 3 or args[1] != "--lengths":
        print(__doc__, file=sys.stderr)
        return 2
    model_dir = args[0]
    lengths = [int(v) for v in args[2].split(",")]
    questions = option(args, "--questions", 16)
    options = option(args, "--options", 5)
    repeats = option(args, "--repeats", 3)
    warmup = option(args, "--warmup", 1)
    try:
        import torch
        from transformers import AutoModelForMultipleChoice
    except ImportError as e:
        print(f"PyTorch peer needs torch and transformers: {e}", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("PyTorch peer: no CUDA device", file=sys.stderr)
        return 3
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda")
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cells": []}
    gen = torch.Generator().manual_seed(42)
    for seq_len in lengths:
        model = AutoModelForMultipleChoice.from_pretrained(
            model_dir, hidden_dropout_prob=0.0, attention_probs_dropout_prob=0.0
        ).float().to(device)
        model.train()
        optimiser = torch.optim.AdamW(model.parameters(), lr=1e-5)
        vocab = model.config.vocab_size
        ids = torch.randint(1, vocab, (questions, options, seq_len), generator=gen).to(device)
        mask = torch.ones_like(ids)
        labels = torch.randint(0, options, (questions,), generator=gen).to(device)
        seconds = []
        for r in range(warmup + repeats):
            torch.cuda.synchronize()
            start = time.perf_counter()
            loss = model(input_ids=ids, attention_mask=mask, labels=labels).loss
            loss.backward()
            optimiser.step()
            optimiser.zero_grad(set_to_none=True)
            torch.cuda.synchronize()
            elapsed = time.perf_counter() - start
            if r >= warmup:
                seconds.append(elapsed)
        out["cells"].append({"seq_len": seq_len, "questions": questions, "options": options, "seconds": seconds})
        del model, optimiser
        torch.cuda.empty_cache()
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
