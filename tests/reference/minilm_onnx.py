#!/usr/bin/env python3
"""Peer for `medrank bench`: the same BERT weights run by ONNX Runtime.

PyTorch does not install here, so there is no exported ONNX model; this script builds the
BERT graph itself with onnx.helper (Gather embeddings, LayerNormalization, MatMul
attention with an additive mask, erf GELU) from model.safetensors, and lets ONNX Runtime
optimise it (ORT_ENABLE_ALL, all cores). Needs: pip install onnxruntime onnx numpy.

With --int8 the graph is first quantized by ONNX Runtime's own tool,
onnxruntime.quantization.quantize_dynamic(per_channel=True, weight_type=QInt8), on the
linear layers' MatMuls only (as medrank's int8 path: the embeddings, attention products,
LayerNorm and GELU stay f32): the same weights as int8 per output channel, activations
quantized per tensor at run time (uint8), i32 sums. The peer of `medrank bench`'s int8 rows.

Usage:
  minilm_onnx.py MODEL_DIR --bench SEQ_LEN BATCH REPEATS [--int8] -> {"seconds": [...]}
  minilm_onnx.py MODEL_DIR --check [--int8] -> max abs difference to the NumPy reference (sanity)
  minilm_onnx.py MODEL_DIR --export OUT.onnx [--int8] -> the graph itself (for onnxruntime-web;
      the bench page reads peer/minilm.onnx and, with --int8, peer/minilm-int8.onnx)
"""
import json
import math
import os
import sys
import tempfile
import time

import numpy as np
import onnx
import onnxruntime as ort
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from minilm_numpy import load_safetensors, encode  # noqa: E402


def graph(W, cfg):
    """The ONNX model (onnx.ModelProto) of the encoder with these weights."""
    p = "bert." if "bert.embeddings.word_embeddings.weight" in W else ""
    g = lambda k: W[p + k].astype(np.float32)
    h, nh, layers = cfg["hidden_size"], cfg["num_attention_heads"], cfg["num_hidden_layers"]
    d = h // nh
    eps = cfg.get("layer_norm_eps", 1e-12)
    inits, nodes = [], []

    def init(name, arr):
        inits.append(numpy_helper.from_array(np.ascontiguousarray(arr), name))
        return name

    def node(op, ins, attrs=None, name=None):
        out = name or f"t{len(nodes)}"
        nodes.append(helper.make_node(op, ins, [out], name=f"n{len(nodes)}", **(attrs or {})))
        return out

    def linear(x, key):
        w = init(key + ".wT", g(key + ".weight").T)
        b = init(key + ".b", g(key + ".bias"))
        return node("Add", [node("MatMul", [x, w]), b])

    def ln(x, key):
        return node("LayerNormalization", [x, init(key + ".w", g(key + ".weight")), init(key + ".bb", g(key + ".bias"))],
                    {"axis": -1, "epsilon": eps})

    x = node("Gather", [init("word", g("embeddings.word_embeddings.weight")), "input_ids"])
    seq = node("Gather", [node("Shape", ["input_ids"]), init("one", np.array([1], dtype=np.int64))])
    pos = node("Slice", [init("pos", g("embeddings.position_embeddings.weight")), init("zero", np.array([0], dtype=np.int64)), seq,
                         init("axis0", np.array([0], dtype=np.int64))])
    x = node("Add", [node("Add", [x, pos]), init("tt0", g("embeddings.token_type_embeddings.weight")[0])])
    x = ln(x, "embeddings.LayerNorm")
    mask = node("Cast", ["attention_mask"], {"to": TensorProto.FLOAT})
    neg = node("Mul", [node("Sub", [init("f1", np.array(1.0, dtype=np.float32)), mask]), init("big", np.array(-1e9, dtype=np.float32))])
    neg = node("Unsqueeze", [neg, init("ax12", np.array([1, 2], dtype=np.int64))])
    heads_shape = init("heads_shape", np.array([0, 0, nh, d], dtype=np.int64))
    merge_shape = init("merge_shape", np.array([0, 0, h], dtype=np.int64))
    scale = init("scale", np.array(1.0 / math.sqrt(d), dtype=np.float32))
    half = init("half", np.array(0.5, dtype=np.float32))
    rsqrt2 = init("rsqrt2", np.array(1.0 / math.sqrt(2.0), dtype=np.float32))
    for i in range(layers):
        L = f"encoder.layer.{i}."
        split = lambda t, perm: node("Transpose", [node("Reshape", [t, heads_shape])], {"perm": perm})
        q = split(linear(x, L + "attention.self.query"), [0, 2, 1, 3])
        k = split(linear(x, L + "attention.self.key"), [0, 2, 3, 1])
        v = split(linear(x, L + "attention.self.value"), [0, 2, 1, 3])
        sc = node("Add", [node("Mul", [node("MatMul", [q, k]), scale]), neg])
        pr = node("Softmax", [sc], {"axis": -1})
        ctx = node("Reshape", [node("Transpose", [node("MatMul", [pr, v])], {"perm": [0, 2, 1, 3]}), merge_shape])
        x = ln(node("Add", [linear(ctx, L + "attention.output.dense"), x]), L + "attention.output.LayerNorm")
        inner = linear(x, L + "intermediate.dense")
        gelu = node("Mul", [node("Mul", [inner, half]), node("Add", [node("Erf", [node("Mul", [inner, rsqrt2])]), init(f"one_f{i}", np.array(1.0, dtype=np.float32))])])
        x = ln(node("Add", [linear(gelu, L + "output.dense"), x]), L + "output.LayerNorm")
    nodes.append(helper.make_node("Identity", [x], ["last_hidden_state"]))
    graph = helper.make_graph(
        nodes, "bert",
        [helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["b", "s"]),
         helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["b", "s"])],
        [helper.make_tensor_value_info("last_hidden_state", TensorProto.FLOAT, ["b", "s", h])],
        inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 17)])
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model


def quantized(model):
    """`model` with its linear layers' MatMuls (constant weights) quantized by
    quantize_dynamic: int8 weights per output channel, dynamic uint8 activations."""
    import logging

    from onnxruntime.quantization import QuantType, quantize_dynamic

    logging.getLogger().setLevel(logging.ERROR)  # its advice to pre-process (shape inference) is for CNNs
    linear = [n.name for n in model.graph.node if n.op_type == "MatMul" and n.input[1].endswith(".wT")]
    with tempfile.TemporaryDirectory() as tmp:
        src, out = os.path.join(tmp, "f32.onnx"), os.path.join(tmp, "int8.onnx")
        onnx.save(model, src)
        quantize_dynamic(src, out, op_types_to_quantize=["MatMul"], nodes_to_quantize=linear,
                         per_channel=True, weight_type=QuantType.QInt8)
        return onnx.load(out)


def build(W, cfg, int8=False):
    """An ONNX Runtime session of `graph(W, cfg)` (quantized with `int8`) with every graph
    optimisation."""
    model = graph(W, cfg)
    if int8:
        model = quantized(model)
    opts = ort.SessionOptions()
    opts.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    return ort.InferenceSession(model.SerializeToString(), opts, providers=["CPUExecutionProvider"])


def main():
    args = [a for a in sys.argv if a != "--int8"]
    int8 = len(args) < len(sys.argv)
    model_dir = args[1]
    cfg = json.load(open(f"{model_dir}/config.json"))
    W = load_safetensors(f"{model_dir}/model.safetensors")
    if args[2] == "--export":
        # The same graph for onnxruntime-web (the benchmark page's peer), int8 with --int8.
        model = graph(W, cfg)
        with open(args[3], "wb") as f:
            f.write((quantized(model) if int8 else model).SerializeToString())
        return
    sess = build(W, cfg, int8)
    if args[2] == "--check":
        rng = np.random.default_rng(1)
        ids = rng.integers(1000, cfg["vocab_size"], size=(2, 16))
        mask = np.ones_like(ids)
        mask[1, 10:] = 0
        ours = sess.run(None, {"input_ids": ids, "attention_mask": mask})[0]
        ref = encode(W, cfg, ids, mask)
        diff = max(np.abs(ours[0] - ref[0]).max(), np.abs(ours[1, :10] - ref[1, :10]).max())
        print(json.dumps({"max_abs_diff": float(diff)}))
        return
    seq, batch, repeats = map(int, args[3:6])
    rng = np.random.default_rng(0)
    feed = {"input_ids": rng.integers(1000, cfg["vocab_size"], size=(batch, seq)), "attention_mask": np.ones((batch, seq), dtype=np.int64)}
    times = []
    for _ in range(repeats):
        t0 = time.perf_counter()
        sess.run(None, feed)
        times.append(time.perf_counter() - t0)
    print(json.dumps({"seconds": times}))


if __name__ == "__main__":
    main()
