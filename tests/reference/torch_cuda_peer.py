#!/usr/bin/env python3
"""GPU peer for `medrank bench --parts gpu`: the same model folder run by PyTorch on CUDA.

The model is Hugging Face transformers' AutoModel of the folder (BertModel for BERT, the
same weights medrank loads), in inference mode, once in fp32 with TF32 off (the same
arithmetic as medrank's f32 kernels) and once in fp16. A pass is the forward pass on the
GPU, timed to its end (torch.cuda.synchronize), with the states left on the device: the
copy to the host is left out because on a sandboxed host it costs more than the pass
(medrank's figures include theirs; `bench --parts gpu-profile` gives its GPU time alone).
Inputs are random ids of exactly the cell's length (no padding), like medrank's bench.

Usage:
  torch_cuda_peer.py MODEL_DIR --grid 128x1,128x32 [--repeats 5] [--warmup 3]
    -> {"device": ..., "torch": ..., "cells": [{"seq_len", "batch", "fp32": [s...], "fp16": [s...]}]}
Exits with status 3 and a one-line reason when PyTorch, transformers or a CUDA device is
missing (the bench then says the peer was skipped).
"""
import json
import sys
import time


def main():
    args = sys.argv[1:]
    if len(args) < 3 or args[1] != "--grid":
        print(__doc__, file=sys.stderr)
        return 2
    model_dir = args[0]
    cells = [tuple(int(v) for v in c.split("x")) for c in args[2].split(",")]
    repeats = int(args[args.index("--repeats") + 1]) if "--repeats" in args else 5
    warmup = int(args[args.index("--warmup") + 1]) if "--warmup" in args else 3
    try:
        import torch
        from transformers import AutoModel
    except ImportError as e:
        print(f"PyTorch peer needs torch and transformers: {e}", file=sys.stderr)
        return 3
    if not torch.cuda.is_available():
        print("PyTorch peer: no CUDA device", file=sys.stderr)
        return 3
    torch.backends.cuda.matmul.allow_tf32 = False
    torch.backends.cudnn.allow_tf32 = False
    device = torch.device("cuda")
    model = AutoModel.from_pretrained(model_dir).float().to(device).eval()
    vocab = model.config.vocab_size
    gen = torch.Generator().manual_seed(42)
    out = {"device": torch.cuda.get_device_name(0), "torch": torch.__version__, "cells": []}
    for precision, dtype in (("fp32", torch.float32), ("fp16", torch.float16)):
        model = model.to(dtype)
        for i, (seq_len, batch) in enumerate(cells):
            ids = torch.randint(0, vocab, (batch, seq_len), generator=gen).to(device)
            mask = torch.ones_like(ids)
            seconds = []
            with torch.inference_mode():
                for r in range(warmup + repeats):
                    torch.cuda.synchronize()
                    start = time.perf_counter()
                    states = model(input_ids=ids, attention_mask=mask).last_hidden_state
                    torch.cuda.synchronize()
                    elapsed = time.perf_counter() - start
                    if r >= warmup:
                        seconds.append(elapsed)
            del states
            if precision == "fp32":
                out["cells"].append({"seq_len": seq_len, "batch": batch, "fp32": seconds})
            else:
                out["cells"][i]["fp16"] = seconds
    print(json.dumps(out))
    return 0


if __name__ == "__main__":
    sys.exit(main())
