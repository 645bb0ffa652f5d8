#!/usr/bin/env python3
"""Checks the cpu model against Hugging Face transformers on random checkpoints that transformers
itself writes (save_pretrained): Llama (llama3 RoPE scaling, tied embeddings, attention_bias, one
kv head with a head_dim other than hidden/heads), Mistral (a sliding window, and none), Qwen 2
(q/k/v biases) and Qwen 3 (q/k norms), in F32, BF16 and F16. Each checkpoint is served with
`headway serve`; prompts of token ids are sent together (they share steps), asking for the top 20
log-probabilities of every prompt position and of 32 greedy tokens, which are compared with
transformers' log_softmax in float32 (and float64, to judge float32's own rounding). Prints one
line per checkpoint and exits 1 when greedy tokens differ or a log-probability differs by more than
--tolerance.

Not part of the test suite: it needs torch and transformers, which CI does not install.

    python3 -m venv venv && venv/bin/pip install torch transformers safetensors
    venv/bin/python scripts/transformers_check.py --headway build/bin/headway --work /tmp/hf
"""
import argparse
import concurrent.futures
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import torch
from transformers import (AutoModelForCausalLM, LlamaConfig, LlamaForCausalLM, MistralConfig,
                          MistralForCausalLM, Qwen2Config, Qwen2ForCausalLM, Qwen3Config,
                          Qwen3ForCausalLM)

BOS = 256  # the byte tokenizer of `headway model make-tiny` (vocabulary 320)
COMMON = dict(hidden_size=64, intermediate_size=160, num_hidden_layers=3, num_attention_heads=4,
              num_key_value_heads=2, vocab_size=320, rms_norm_eps=1e-5, bos_token_id=BOS,
              eos_token_id=257, max_position_embeddings=1024)
LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 32, "rope_theta": 500000.0}
F32, BF16, F16 = torch.float32, torch.bfloat16, torch.float16
# name, model class, config class, dtype, seed, config fields beyond COMMON
CHECKPOINTS = [
    ("llama_f32", LlamaForCausalLM, LlamaConfig, F32, 1, dict(rope_parameters=LLAMA3)),
    ("llama_bf16_tied_bias", LlamaForCausalLM, LlamaConfig, BF16, 2,
     dict(rope_parameters=LLAMA3, tie_word_embeddings=True, attention_bias=True)),
    ("llama_f16", LlamaForCausalLM, LlamaConfig, F16, 3, dict(rope_parameters=LLAMA3)),
    ("llama_mqa_head_dim_32_f32", LlamaForCausalLM, LlamaConfig, F32, 4,
     dict(rope_theta=10000.0, num_key_value_heads=1, head_dim=32)),
    ("mistral_window_16_f32", MistralForCausalLM, MistralConfig, F32, 5, dict(sliding_window=16)),
    ("mistral_no_window_bf16", MistralForCausalLM, MistralConfig, BF16, 6,
     dict(sliding_window=None)),
    ("qwen2_f32", Qwen2ForCausalLM, Qwen2Config, F32, 7, dict(rope_theta=1000000.0)),
    ("qwen2_bf16_tied", Qwen2ForCausalLM, Qwen2Config, BF16, 8, dict(tie_word_embeddings=True)),
    ("qwen3_f32", Qwen3ForCausalLM, Qwen3Config, F32, 9, dict(head_dim=32)),
    ("qwen3_f16_tied_bias", Qwen3ForCausalLM, Qwen3Config, F16, 10,
     dict(head_dim=24, tie_word_embeddings=True, attention_bias=True)),
]
PROMPT_LENGTHS = [5, 40, 300, 700]
GENERATED = 32


def randomize(model, seed):
    """Weights with real spread (transformers' init leaves norms at 1 and biases at 0, which
    would not test them): norms in [0.5, 1.5), biases N(0, 0.3), projections scaled to keep the
    activations of order 1."""
    g = torch.Generator().manual_seed(seed)
    with torch.no_grad():
        for name, p in model.named_parameters():
            if name.endswith("norm.weight"):
                p.copy_(0.5 + torch.rand(p.shape, generator=g))
            elif name.endswith("bias"):
                p.copy_(0.3 * torch.randn(p.shape, generator=g))
            elif "embed_tokens" in name:
                p.copy_(torch.randn(p.shape, generator=g))
            else:
                p.copy_(torch.randn(p.shape, generator=g) * (1.5 / p.shape[1] ** 0.5))


def write_checkpoint(out, model_class, config_class, dtype, seed, fields, tokenizer):
    config = config_class(**{**COMMON, **fields})
    torch.manual_seed(seed)
    model = model_class(config).float().eval()
    randomize(model, seed)
    if config.tie_word_embeddings:
        model.tie_weights()
    shutil.rmtree(out, ignore_errors=True)
    model.to(dtype).save_pretrained(out, safe_serialization=True)
    shutil.copy(tokenizer, os.path.join(out, "tokenizer.json"))


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def post(port, body):
    request = urllib.request.Request(f"http://127.0.0.1:{port}/v1/completions",
                                     json.dumps(body).encode(),
                                     {"Content-Type": "application/json"})
    try:
        return json.load(urllib.request.urlopen(request, timeout=600))
    except urllib.error.HTTPError as e:
        return {"http_error": e.code, "body": e.read().decode()}


def serve(headway, work, name):
    port = free_port()
    deployment = os.path.join(work, name + ".toml")
    with open(deployment, "w") as f:
        f.write(f'name = "{name}"\n[server]\nhttp_port = {port}\ngrpc_port = 0\n'
                f'log_stats_interval_s = 0\n[model]\nplugin = "cpu"\n'
                f'options = {{ path = "{name}", threads = 1, kv_cache_gb = 0.05 }}\n'
                f'[[engines]]\nscheduler = {{ plugin = "chunked", options = '
                f'{{ max_num_batched_tokens = 256, max_num_seqs = 16 }} }}\n')
    log = open(os.path.join(work, name + ".log"), "w")
    process = subprocess.Popen([headway, "serve", "--config", deployment], stdout=log,
                               stderr=subprocess.STDOUT)
    for _ in range(600):
        if process.poll() is not None:
            raise RuntimeError(f"{name}: headway serve exited: see {log.name}")
        try:
            models = json.load(urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models",
                                                      timeout=2))
            return process, port, models["data"][0].get("max_model_len", 1024)
        except (urllib.error.URLError, ConnectionError):
            time.sleep(0.2)
    process.kill()
    raise RuntimeError(f"{name}: headway serve did not answer: see {log.name}")


def log_softmax(model, ids):
    with torch.no_grad():
        return torch.log_softmax(model(torch.tensor([ids])).logits[0].double(), -1)


def compare(headway, work, name, seed):
    process, port, max_len = serve(headway, work, name)
    try:
        rng = random.Random(seed)
        prompts = [[BOS] + [rng.randrange(0, 320) for _ in range(min(n, max_len - 1) - 1)]
                   for n in PROMPT_LENGTHS]
        def ask(prompt):
            return post(port, {"prompt": prompt, "max_tokens": min(GENERATED, max_len - len(prompt)),
                               "temperature": 0, "logprobs": 20, "prompt_logprobs": 20,
                               "ignore_eos": True, "return_token_ids": True})
        with concurrent.futures.ThreadPoolExecutor(len(prompts)) as pool:
            answers = list(pool.map(ask, prompts))
    finally:
        process.send_signal(signal.SIGTERM)
        process.wait(60)
    path = os.path.join(work, name)
    m32 = load_model(path, torch.float32)
    m64 = load_model(path, torch.float64)
    worst, own_rounding, greedy_agrees = 0.0, 0.0, True
    for prompt, answer in zip(prompts, answers):
        if "http_error" in answer:
            raise RuntimeError(f"{name}: HTTP {answer['http_error']}: {answer['body'][:300]}")
        choice = answer["choices"][0]
        generated = choice["token_ids"]
        ids = prompt + generated
        l32, l64 = log_softmax(m32, ids), log_softmax(m64, ids)
        own_rounding = max(own_rounding, (l32 - l64).abs().max().item())
        for i, top in enumerate(choice["prompt_logprobs"][1:], start=1):
            for token, entry in top.items():
                worst = max(worst, abs(entry["logprob"] - l32[i - 1, int(token)].item()))
        for j, token in enumerate(generated):
            worst = max(worst, abs(choice["logprobs"]["token_logprobs"][j] -
                                   l32[len(prompt) - 1 + j, token].item()))
        # transformers' own greedy continuation
        sequence = list(prompt)
        for token in generated:
            best = int(log_softmax(m32, sequence)[-1].argmax())
            if best != token:
                greedy_agrees = False
                break
            sequence.append(best)
    return worst, own_rounding, greedy_agrees, max_len


def load_model(path, dtype):
    """transformers' model of the checkpoint in `dtype` (read as float32 first: BF16 and F16
    checkpoints are compared at full precision), eager attention."""
    model = AutoModelForCausalLM.from_pretrained(path, dtype=torch.float32,
                                                 attn_implementation="eager")
    return model.to(dtype).eval()


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--headway", required=True, help="the headway binary")
    parser.add_argument("--work", required=True, help="a directory for checkpoints and logs")
    parser.add_argument("--tolerance", type=float, default=1e-3,
                        help="largest |log-probability difference| accepted (default 1e-3)")
    args = parser.parse_args()
    headway = os.path.abspath(args.headway)
    os.makedirs(args.work, exist_ok=True)
    tokenizer_dir = os.path.join(args.work, "byte_tokenizer")
    subprocess.run([headway, "model", "make-tiny", "--out", tokenizer_dir], check=True,
                   stdout=subprocess.DEVNULL)
    tokenizer = os.path.join(tokenizer_dir, "tokenizer.json")
    failed = False
    for name, model_class, config_class, dtype, seed, fields in CHECKPOINTS:
        write_checkpoint(os.path.join(args.work, name), model_class, config_class, dtype, seed,
                         fields, tokenizer)
        worst, own, greedy, max_len = compare(headway, args.work, name, seed)
        ok = greedy and worst <= args.tolerance
        failed = failed or not ok
        print(f"{name:28s} max |d logprob| {worst:.1e} (transformers f32 vs f64 {own:.1e}), "
              f"greedy {'agrees' if greedy else 'DIFFERS'}, max_model_len {max_len}"
              f"{'' if ok else '  <-- FAIL'}", flush=True)
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())
