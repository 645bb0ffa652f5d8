#!/usr/bin/python3
"""An independent NumPy implementation of the Llama forward pass, the reference the cpu model plugin
is tested against (tests/unit/plugins/models/cpu/reference_test.cpp).

It shares no code with Headway: it parses config.json and the safetensors files itself and runs
the textbook computation in float64 over whole sequences (no KV cache, no paging, no chunking):
embeddings, RMSNorm, rotary embeddings (Hugging Face rotate_half convention, llama3 frequency
scaling), grouped-query causal attention, SwiGLU MLP, final norm, LM head; and the Qwen variants:
Qwen 2's biases on q, k and v, Qwen 3's per-head RMSNorm of q and k before the rotation.

Usage:
  llama_reference.py --checkpoint DIR --requests requests.json --out logits.bin

requests.json: {"requests": [{"tokens": [ids...], "positions": [p, ...]}, ...]}
logits.bin: for each request in order, for each listed position in order, vocab_size float64
values (little-endian): the logits predicting the token after that position.

Runs with Debian's /usr/bin/python3 and python3-numpy.
"""
import argparse
import json
import math
import os
import struct
import sys

import numpy as np


def read_safetensors(path):
    with open(path, "rb") as f:
        data = f.read()
    (header_len,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8:8 + header_len])
    body = data[8 + header_len:]
    tensors = {}
    for name, entry in header.items():
        if name == "__metadata__":
            continue
        begin, end = entry["data_offsets"]
        raw = body[begin:end]
        dtype = entry["dtype"]
        if dtype == "F32":
            arr = np.frombuffer(raw, dtype="<f4")
        elif dtype == "F16":
            arr = np.frombuffer(raw, dtype="<f2")
        elif dtype == "BF16":
            arr = (np.frombuffer(raw, dtype="<u2").astype(np.uint32) << 16).view(np.float32)
        else:
            raise ValueError(f"{path}: tensor {name}: unsupported dtype {dtype}")
        tensors[name] = arr.astype(np.float64).reshape(entry["shape"])
    return tensors


def load_checkpoint(directory):
    index = os.path.join(directory, "model.safetensors.index.json")
    tensors = {}
    if os.path.exists(index):
        with open(index) as f:
            shards = sorted(set(json.load(f)["weight_map"].values()))
        for shard in shards:
            tensors.update(read_safetensors(os.path.join(directory, shard)))
    else:
        tensors = read_safetensors(os.path.join(directory, "model.safetensors"))
    return tensors


def inverse_frequencies(config, head_dim):
    theta = config.get("rope_theta", 10000.0)
    inv = 1.0 / theta ** (np.arange(0, head_dim, 2, dtype=np.float64) / head_dim)
    scaling = config.get("rope_scaling") or {}
    if scaling.get("rope_type", scaling.get("type")) == "llama3":
        factor = scaling["factor"]
        low = scaling["low_freq_factor"]
        high = scaling["high_freq_factor"]
        old = scaling["original_max_position_embeddings"]
        low_wavelen = old / low
        high_wavelen = old / high
        out = []
        for f in inv:
            wavelen = 2 * math.pi / f
            if wavelen < high_wavelen:
                out.append(f)
            elif wavelen > low_wavelen:
                out.append(f / factor)
            else:
                smooth = (old / wavelen - low) / (high - low)
                out.append((1 - smooth) * f / factor + smooth * f)
        inv = np.array(out, dtype=np.float64)
    return inv


def rms_norm(x, weight, eps):
    return x / np.sqrt(np.mean(x * x, axis=-1, keepdims=True) + eps) * weight


def rotate(x, cos, sin):
    # x: [tokens, heads, head_dim]; cos/sin: [tokens, head_dim/2]
    half = x.shape[-1] // 2
    x1, x2 = x[..., :half], x[..., half:]
    c, s = cos[:, None, :], sin[:, None, :]
    return np.concatenate([x1 * c - x2 * s, x2 * c + x1 * s], axis=-1)


def projection(w, name, x):
    """x @ W^T, plus the bias when the checkpoint has one (Qwen 2's q, k and v; attention_bias)."""
    y = x @ w[name + ".weight"].T
    bias = w.get(name + ".bias")
    return y if bias is None else y + bias


def forward(config, w, tokens):
    hidden = config["hidden_size"]
    heads = config["num_attention_heads"]
    kv_heads = config.get("num_key_value_heads", heads)
    head_dim = config.get("head_dim") or hidden // heads
    eps = config.get("rms_norm_eps", 1e-5)
    n = len(tokens)
    positions = np.arange(n, dtype=np.float64)
    angles = positions[:, None] * inverse_frequencies(config, head_dim)[None, :]
    cos, sin = np.cos(angles), np.sin(angles)
    mask = np.triu(np.full((n, n), -np.inf), k=1)

    x = w["model.embed_tokens.weight"][np.array(tokens)]
    for layer in range(config["num_hidden_layers"]):
        p = f"model.layers.{layer}."
        h = rms_norm(x, w[p + "input_layernorm.weight"], eps)
        q, k, v = (projection(w, p + "self_attn." + name, h)
                   for name in ("q_proj", "k_proj", "v_proj"))
        q = q.reshape(n, heads, head_dim)
        k = k.reshape(n, kv_heads, head_dim)
        v = v.reshape(n, kv_heads, head_dim)
        if config.get("model_type") == "qwen3":
            # Qwen 3: each head of q and k is RMS-normalized (over head_dim) before RoPE.
            q = rms_norm(q, w[p + "self_attn.q_norm.weight"], eps)
            k = rms_norm(k, w[p + "self_attn.k_norm.weight"], eps)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        group = heads // kv_heads
        out = np.empty((n, heads, head_dim))
        for head in range(heads):
            kh, vh = k[:, head // group, :], v[:, head // group, :]
            scores = q[:, head, :] @ kh.T / math.sqrt(head_dim) + mask
            scores = np.exp(scores - scores.max(axis=-1, keepdims=True))
            scores /= scores.sum(axis=-1, keepdims=True)
            out[:, head, :] = scores @ vh
        x = x + projection(w, p + "self_attn.o_proj", out.reshape(n, heads * head_dim))
        h = rms_norm(x, w[p + "post_attention_layernorm.weight"], eps)
        gate = h @ w[p + "mlp.gate_proj.weight"].T
        up = h @ w[p + "mlp.up_proj.weight"].T
        x = x + (gate / (1 + np.exp(-gate)) * up) @ w[p + "mlp.down_proj.weight"].T
    x = rms_norm(x, w["model.norm.weight"], eps)
    head = w.get("lm_head.weight")
    if head is None:
        head = w["model.embed_tokens.weight"]
    return x @ head.T


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--checkpoint", required=True)
    parser.add_argument("--requests", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    with open(os.path.join(args.checkpoint, "config.json")) as f:
        config = json.load(f)
    weights = load_checkpoint(args.checkpoint)
    with open(args.requests) as f:
        requests = json.load(f)["requests"]
    rows = []
    for r in requests:
        logits = forward(config, weights, r["tokens"])
        for p in r["positions"]:
            rows.append(logits[p])
    np.asarray(rows, dtype="<f8").tofile(args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
