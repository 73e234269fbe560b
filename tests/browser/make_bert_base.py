"""Write a random-weight BERT-base-sized model folder (12 layers, hidden 768, 12 heads,
intermediate 3072; vocabulary and tokenizer of the bundled all-MiniLM-L6-v2, which is a BERT
with the same 30,522-token vocabulary): ~110 M parameters, ~440 MB of f32 safetensors.

The browser tests load it in the threaded build, whose shared memory has a fixed maximum, to
show that a model of this size fits (or is refused with a message naming the limit).

    python3 make_bert_base.py MINILM_DIR OUT_DIR

Tensor names are those of MiniLM's own file (the Hugging Face BertModel names); shapes are
BERT-base's. Weights: seeded normal(0, 0.02), LayerNorm weights 1 and biases 0.
"""
import json
import os
import shutil
import struct
import sys

import numpy as np


def main(minilm: str, out: str) -> None:
    with open(os.path.join(minilm, "model.safetensors"), "rb") as f:
        (header_len,) = struct.unpack("<Q", f.read(8))
        header = json.loads(f.read(header_len))
    config = json.load(open(os.path.join(minilm, "config.json")))
    hidden, inter, layers = 768, 3072, 12
    config.update(hidden_size=hidden, intermediate_size=inter, num_hidden_layers=layers, num_attention_heads=12)

    small_hidden, small_inter = 384, 1536
    resize = {small_hidden: hidden, small_inter: inter}
    # Float tensors only (MiniLM also stores the int64 `embeddings.position_ids` buffer, which
    # loaders ignore).
    names = [n for n in header if n != "__metadata__" and header[n]["dtype"] == "F32"]
    # MiniLM has 6 layers: repeat layer 0's tensor names for layers 0..11.
    layer0 = [n for n in names if n.startswith("encoder.layer.0.")]
    others = [n for n in names if not n.startswith("encoder.layer.")]
    wanted = others + [n.replace("encoder.layer.0.", f"encoder.layer.{i}.") for i in range(layers) for n in layer0]

    rng = np.random.default_rng(12)
    tensors = {}
    for name in wanted:
        parts = name.split(".")
        template = ".".join(parts[:2] + ["0"] + parts[3:]) if name.startswith("encoder.layer.") else name
        # Every 384 is the hidden size and every 1536 the intermediate one (vocabulary 30522,
        # positions 512 and token types 2 stay).
        shape = [resize.get(d, d) for d in header[template]["shape"]]
        if "LayerNorm.weight" in name:
            values = np.ones(shape, dtype=np.float32)
        elif name.endswith(".bias") or "LayerNorm.bias" in name:
            values = np.zeros(shape, dtype=np.float32)
        else:
            values = (rng.standard_normal(shape, dtype=np.float32) * 0.02).astype(np.float32)
        tensors[name] = values

    os.makedirs(out, exist_ok=True)
    meta, offset = {}, 0
    for name, values in tensors.items():
        meta[name] = {"dtype": "F32", "shape": list(values.shape), "data_offsets": [offset, offset + values.nbytes]}
        offset += values.nbytes
    head = json.dumps(meta).encode()
    head += b" " * (-len(head) % 8)
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(head)))
        f.write(head)
        for values in tensors.values():
            f.write(values.tobytes())
    json.dump(config, open(os.path.join(out, "config.json"), "w"))
    shutil.copy(os.path.join(minilm, "tokenizer.json"), os.path.join(out, "tokenizer.json"))
    params = sum(v.size for v in tensors.values())
    print(f"{params} parameters, {offset} bytes")


if __name__ == "__main__":
    main(sys.argv[1], sys.argv[2])
