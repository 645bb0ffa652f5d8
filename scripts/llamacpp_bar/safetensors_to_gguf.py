#!/usr/bin/env python3
"""Write a Headway make-tiny checkpoint (HF Llama: config.json + one model.safetensors) as a
llama.cpp GGUF with F16 weights, without torch, so that llama.cpp runs the very model Headway's
bar benchmark runs (scripts/llamacpp_bar/compare.sh; docs/cpu_model.md, "Issue 4's bar").

  PYTHONPATH=<llama.cpp>/gguf-py python safetensors_to_gguf.py CKPT_DIR OUT.gguf

What it does, mirroring llama.cpp's convert_hf_to_gguf.py (LlamaModel) for this checkpoint:
  * arch "llama"; hparams from config.json (context, embd, blocks, ffn, heads, kv heads,
    rms eps, rope theta, rope dim = head_dim, key/value length, vocab size), file_type MOSTLY_F16;
  * q_proj / k_proj rows permuted from HF's rotate-half RoPE layout to GGML's interleaved layout
    (LlamaModel.permute);
  * llama3 rope_scaling -> rope_freqs.weight (F32, head_dim/2 factors), as generate_extra_tensors;
  * 2-D weights kept F16, 1-D (norms) stored F32;
  * lm_head.weight -> output.weight when the head is untied; when tied, no output.weight is
    written and llama.cpp reuses token_embd (as convert does);
  * vocab: a stand-in SentencePiece ("llama") vocab with Headway's byte-level ids: ids 0..255 are
    <0x00>..<0xFF> (BYTE), 256 <s>, 257 </s>, 258 <pad> (CONTROL), 259 <unk> (UNKNOWN), the rest
    unused fillers. It only has to load: llama-bench feeds token ids directly.
"""
import json
import math
import struct
import sys
from pathlib import Path

import numpy as np
import gguf

DTYPES = {"F16": np.float16, "BF16": None, "F32": np.float32}


def read_safetensors(path: Path):
    data = path.read_bytes()
    (n,) = struct.unpack("<Q", data[:8])
    header = json.loads(data[8 : 8 + n])
    base = 8 + n
    out = {}
    for name, info in header.items():
        if name == "__metadata__":
            continue
        start, end = info["data_offsets"]
        raw = np.frombuffer(data, dtype=np.uint8, count=end - start, offset=base + start)
        if info["dtype"] == "BF16":
            arr = (raw.view(np.uint16).astype(np.uint32) << 16).view(np.float32)
        else:
            arr = raw.view(DTYPES[info["dtype"]])
        out[name] = arr.reshape(info["shape"])
    return out


def permute(w: np.ndarray, n_head: int) -> np.ndarray:
    # llama.cpp LlamaModel.permute (n_head already replaced by n_head_kv for k).
    return (
        w.reshape(n_head, 2, w.shape[0] // n_head // 2, *w.shape[1:])
        .swapaxes(1, 2)
        .reshape(w.shape)
    )


def llama3_rope_factors(rope: dict, theta: float, dim: int) -> np.ndarray:
    freqs = 1.0 / (theta ** (np.arange(0, dim, 2, dtype=np.float32) / dim))
    factor = rope.get("factor", 8.0)
    lo = rope.get("low_freq_factor", 1.0)
    hi = rope.get("high_freq_factor", 4.0)
    old = rope.get("original_max_position_embeddings", 8192)
    lo_wl, hi_wl = old / lo, old / hi
    out = []
    for f in freqs:
        wl = 2 * math.pi / f
        if wl < hi_wl:
            out.append(1)
        elif wl > lo_wl:
            out.append(factor)
        else:
            s = (old / wl - lo) / (hi - lo)
            out.append(1 / ((1 - s) / factor + s))
    return np.array(out, dtype=np.float32)


def main():
    ckpt, out_path = Path(sys.argv[1]), Path(sys.argv[2])
    cfg = json.loads((ckpt / "config.json").read_text())
    t = read_safetensors(ckpt / "model.safetensors")

    n_layer = cfg["num_hidden_layers"]
    n_embd = cfg["hidden_size"]
    n_head = cfg["num_attention_heads"]
    n_head_kv = cfg["num_key_value_heads"]
    head_dim = cfg.get("head_dim") or n_embd // n_head
    n_vocab = cfg["vocab_size"]
    theta = float(cfg.get("rope_theta", 10000.0))
    tied = bool(cfg.get("tie_word_embeddings", False))

    w = gguf.GGUFWriter(str(out_path), "llama")
    w.add_name("headway-make-tiny-%dL-%d" % (n_layer, n_embd))
    w.add_block_count(n_layer)
    w.add_context_length(cfg["max_position_embeddings"])
    w.add_embedding_length(n_embd)
    w.add_feed_forward_length(cfg["intermediate_size"])
    w.add_head_count(n_head)
    w.add_head_count_kv(n_head_kv)
    w.add_key_length(head_dim)
    w.add_value_length(head_dim)
    w.add_rope_freq_base(theta)
    w.add_layer_norm_rms_eps(float(cfg["rms_norm_eps"]))
    w.add_vocab_size(n_vocab)
    w.add_rope_dimension_count(head_dim)
    w.add_file_type(gguf.LlamaFileType.MOSTLY_F16)

    # Stand-in SPM vocab with Headway's byte-level ids.
    tokens, scores, types = [], [], []
    for i in range(n_vocab):
        if i < 256:
            tokens.append("<0x%02X>" % i); types.append(gguf.TokenType.BYTE)
        elif i == 256:
            tokens.append("<s>"); types.append(gguf.TokenType.CONTROL)
        elif i == 257:
            tokens.append("</s>"); types.append(gguf.TokenType.CONTROL)
        elif i == 258:
            tokens.append("<pad>"); types.append(gguf.TokenType.CONTROL)
        elif i == 259:
            tokens.append("<unk>"); types.append(gguf.TokenType.UNKNOWN)
        else:
            tokens.append("<unused_%d>" % i); types.append(gguf.TokenType.UNUSED)
        scores.append(0.0)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores(scores)
    w.add_token_types(types)
    w.add_bos_token_id(cfg.get("bos_token_id", 256))
    w.add_eos_token_id(cfg.get("eos_token_id", 257))
    w.add_pad_token_id(258)
    w.add_unk_token_id(259)
    w.add_add_bos_token(True)
    w.add_add_eos_token(False)
    w.add_add_space_prefix(False)

    def f16(a):
        return np.ascontiguousarray(a.astype(np.float16))

    def f32(a):
        return np.ascontiguousarray(a.astype(np.float32))

    w.add_tensor("token_embd.weight", f16(t["model.embed_tokens.weight"]))
    rope = cfg.get("rope_scaling") or {}
    if rope.get("rope_type", "").lower() == "llama3":
        w.add_tensor("rope_freqs.weight", llama3_rope_factors(rope, theta, head_dim))
    for l in range(n_layer):
        p = "model.layers.%d." % l
        b = "blk.%d." % l
        w.add_tensor(b + "attn_norm.weight", f32(t[p + "input_layernorm.weight"]))
        w.add_tensor(b + "attn_q.weight", f16(permute(t[p + "self_attn.q_proj.weight"], n_head)))
        w.add_tensor(b + "attn_k.weight", f16(permute(t[p + "self_attn.k_proj.weight"], n_head_kv)))
        w.add_tensor(b + "attn_v.weight", f16(t[p + "self_attn.v_proj.weight"]))
        w.add_tensor(b + "attn_output.weight", f16(t[p + "self_attn.o_proj.weight"]))
        w.add_tensor(b + "ffn_norm.weight", f32(t[p + "post_attention_layernorm.weight"]))
        w.add_tensor(b + "ffn_gate.weight", f16(t[p + "mlp.gate_proj.weight"]))
        w.add_tensor(b + "ffn_up.weight", f16(t[p + "mlp.up_proj.weight"]))
        w.add_tensor(b + "ffn_down.weight", f16(t[p + "mlp.down_proj.weight"]))
    w.add_tensor("output_norm.weight", f32(t["model.norm.weight"]))
    if not tied:
        w.add_tensor("output.weight", f16(t["lm_head.weight"]))
    else:
        assert "lm_head.weight" not in t

    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_tensors_to_file()
    w.close()
    n_params = sum(a.size for a in t.values())
    print("wrote %s: %d layers, hidden %d, %d/%d heads, ffn %d, vocab %d, tied=%s, %.1fM params"
          % (out_path, n_layer, n_embd, n_head, n_head_kv, cfg["intermediate_size"], n_vocab,
             tied, n_params / 1e6))


if __name__ == "__main__":
    main()
