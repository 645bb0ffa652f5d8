#!/usr/bin/env python3
"""Checks Headway's tokenizers against Hugging Face `tokenizers` (what vLLM tokenizes with) on
tokenizer.json files that `tokenizers` itself writes: byte-level BPE (GPT-2's ByteLevel with and
without add_prefix_space, Llama 3's Split, a Split before a prefix space, Qwen 2's NFC) and
SentencePiece-style BPE (Llama 2's Prepend/Replace normalizer and four-step decoder, Mistral v0.3's
Metaspace, byte fallback and <unk>), each with special and normalized added tokens. Every
tokenizer is trained on generated text, put in a checkpoint of `headway model make-tiny` and
served with `headway serve`; texts are compared through POST /tokenize and ids through POST
/detokenize. Prints one line per tokenizer and exits 1 on any difference.

Not compared, on purpose (docs/serving_text.md, "Where the tokenization still differs"): code
points assigned after Unicode 14 (Debian's PCRE2 tables), the 54 combining marks whose class
changed after Hugging Face's NFC tables, and id sequences whose text is not valid UTF-8 (byte
tokens decode to their bytes here, to one U+FFFD each there).

Not part of the test suite: it needs `tokenizers` from PyPI, which CI does not install.

    python3 -m venv venv && venv/bin/pip install tokenizers
    venv/bin/python scripts/tokenizers_check.py --headway build/bin/headway --work /tmp/tok
"""
import argparse
import http.client
import json
import os
import random
import shutil
import signal
import socket
import subprocess
import sys
import time

from tokenizers import AddedToken, Regex, Tokenizer, decoders, models, normalizers, pre_tokenizers
from tokenizers import trainers

META = "\u2581"
LLAMA3 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}{1,3}| ?[^\s\p{L}\p{N}]+"
          r"[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+")
QWEN2 = (r"(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}| ?[^\s\p{L}\p{N}]+[\r\n]*"
         r"|\s*[\r\n]+|\s+(?!\S)|\s+")
SPECIALS = ["<s>", "</s>", "<unk>", "[INST]", "[/INST]", "<|eot_id|>"]
PLAIN_ADDED = ["hello world", "<t>", "ab", "\u2126"]  # normalized added tokens
# Pieces of text the generated prompts are made of: words, code, spaces of every kind, accents
# composed and not, scripts, emoji sequences, contractions, digits, and the special tokens.
PIECES = ("The quick brown fox jumps over the lazy dog . I'm sure they'll say it's fine , "
          "HE'S HERE ; def foo(x): return x**2 # comment 1234567 3.14 $100 50% café naïve "
          "Ångström e\u0301 A\u030a \u212b \u2126 o\u0302\u0323 한국어 中文字符 日本語のテキスト "
          "שלום مرحبا ١٢٣ Ωπσ∑ ½ ①").split(" ") + [
    " ", "  ", "\t", "\n", "\r\n", "\n\n", "\u00a0", "\u3000", "\u2009", "\u180e", "\u200b",
    "😀", "👍🏽", "👨\u200d👩\u200d👧", "🇺🇸", "1\ufe0f\u20e3", "'s", "'LL", "'d", "hello world",
    "<t>", "ab", "abc", "\u0000", "\u007f", "\ufffd"] + SPECIALS


def byte_level(add_prefix_space):
    return pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space)


def split_then_byte_level(pattern, add_prefix_space=False):
    return pre_tokenizers.Sequence([pre_tokenizers.Split(Regex(pattern), "isolated"),
                                    pre_tokenizers.ByteLevel(add_prefix_space=add_prefix_space,
                                                             use_regex=False)])


def llama2_decoder():
    return decoders.Sequence([decoders.Replace(META, " "), decoders.ByteFallback(), decoders.Fuse(),
                              decoders.Strip(" ", 1, 0)])


# name: (kind, normalizer, pre-tokenizer, decoder, model options)
CONFIGS = {
    "gpt2": ("bytes", None, lambda: byte_level(False), decoders.ByteLevel, {}),
    "gpt2_prefix_space": ("bytes", None, lambda: byte_level(True), decoders.ByteLevel, {}),
    "llama3": ("bytes", None, lambda: split_then_byte_level(LLAMA3), decoders.ByteLevel,
               {"ignore_merges": True}),
    "llama3_prefix_space": ("bytes", None, lambda: split_then_byte_level(LLAMA3, True),
                            decoders.ByteLevel, {}),
    "qwen2": ("bytes", normalizers.NFC, lambda: split_then_byte_level(QWEN2), decoders.ByteLevel,
              {}),
    "llama2": ("pieces",
               lambda: normalizers.Sequence([normalizers.Prepend(META),
                                             normalizers.Replace(" ", META)]),
               None, llama2_decoder, {"byte_fallback": True, "fuse_unk": True}),
    "mistral_v3": ("pieces", None,
                   lambda: pre_tokenizers.Metaspace(replacement=META, prepend_scheme="first",
                                                    split=False),
                   lambda: decoders.Metaspace(replacement=META, prepend_scheme="first",
                                              split=False),
                   {"byte_fallback": True, "fuse_unk": True}),
    "metaspace_always_split": ("pieces", None,
                               lambda: pre_tokenizers.Metaspace(replacement=META,
                                                                prepend_scheme="always",
                                                                split=True),
                               lambda: decoders.Metaspace(replacement=META,
                                                          prepend_scheme="always", split=True),
                               {"byte_fallback": True, "fuse_unk": True}),
    "unknown_fused": ("pieces",
                      lambda: normalizers.Sequence([normalizers.Prepend(META),
                                                    normalizers.Replace(" ", META)]),
                      None, llama2_decoder, {"byte_fallback": False, "fuse_unk": True}),
}


def text(rng, pieces=12):
    return "".join(rng.choice(PIECES) for _ in range(rng.randint(1, pieces)))


def build(kind, normalizer, pre, decoder, options, corpus):
    """A tokenizer trained on `corpus`, with the added tokens every configuration has."""
    byte_tokens = [f"<0x{b:02X}>" for b in range(256)] if options.get("byte_fallback") else []
    model = models.BPE(unk_token=None if kind == "bytes" else "<unk>", **options)
    tok = Tokenizer(model)
    if normalizer:
        tok.normalizer = normalizer()
    if pre:
        tok.pre_tokenizer = pre()
    elif kind == "pieces":  # train words as Llama 2's sentencepiece did: split at the spaces
        tok.pre_tokenizer = pre_tokenizers.Metaspace(replacement=META, prepend_scheme="always")
    alphabet = pre_tokenizers.ByteLevel.alphabet() if kind == "bytes" else []
    tok.train_from_iterator(corpus, trainers.BpeTrainer(
        vocab_size=1500, special_tokens=["<unk>"] + byte_tokens, initial_alphabet=alphabet,
        limit_alphabet=200 if kind == "pieces" else 1000, show_progress=False))
    if kind == "pieces" and not pre:
        tok.pre_tokenizer = None
    tok.decoder = decoder()
    tok.add_special_tokens([AddedToken(s, special=True, normalized=False) for s in SPECIALS])
    tok.add_tokens([AddedToken(s, special=False, normalized=True) for s in PLAIN_ADDED])
    return tok


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


class Server:
    def __init__(self, headway, checkpoint, work):
        self.port = free_port()
        config = os.path.join(work, "serve.toml")
        with open(config, "w") as f:
            f.write(f'name = "tok"\n[model]\nplugin = "cpu"\noptions = {{ path = "{checkpoint}", '
                    'threads = 1, kv_cache_gb = 0.02 }\n[[engines]]\nscheduler = "chunked"\n')
        self.log = open(os.path.join(work, "serve.log"), "w")
        self.proc = subprocess.Popen([headway, "serve", "--config", config, "--port",
                                      str(self.port), "--grpc-port", "0"],
                                     stdout=self.log, stderr=subprocess.STDOUT)
        for _ in range(300):
            if self.proc.poll() is not None:
                raise RuntimeError(f"headway serve exited; see {self.log.name}")
            try:
                self.post("/tokenize", {"prompt": "x"})
                return
            except OSError:
                time.sleep(0.2)
        self.stop()
        raise RuntimeError("headway serve did not start")

    def post(self, path, body):
        c = http.client.HTTPConnection("127.0.0.1", self.port, timeout=60)
        c.request("POST", path, json.dumps(body), {"Content-Type": "application/json"})
        r = c.getresponse()
        return r.status, json.loads(r.read())

    def stop(self):
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(15)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()


def check(name, args, corpus, rng):
    kind, normalizer, pre, decoder, options = CONFIGS[name]
    tok = build(kind, normalizer, pre, decoder, options, corpus)
    work = os.path.join(args.work, name)
    shutil.rmtree(work, ignore_errors=True)
    vocab = tok.get_vocab_size(with_added_tokens=True)
    subprocess.run([args.headway, "model", "make-tiny", "--out", work, "--layers", "1", "--hidden",
                    "32", "--heads", "2", "--kv-heads", "1", "--ffn", "64", "--vocab",
                    str(max(vocab, 320)), "--quiet"], check=True)
    tok.save(os.path.join(work, "tokenizer.json"))
    with open(os.path.join(work, "tokenizer_config.json"), "w") as f:
        json.dump({"bos_token": "<s>", "eos_token": "</s>"}, f)
    bos = tok.token_to_id("<s>")
    failures = []
    server = Server(args.headway, work, work)
    try:
        texts = [text(rng) for _ in range(args.texts)]
        for t in texts:
            expected = tok.encode(t, add_special_tokens=False).ids
            # A text prompt gets the BOS first, once: one that starts with its text has it.
            expected = expected if expected[:1] == [bos] else [bos] + expected
            status, got = server.post("/tokenize", {"prompt": t})
            if t and (status != 200 or got["tokens"] != expected):
                failures.append(("tokenize", t, expected, got))
        id_lists = [tok.encode(t, add_special_tokens=False).ids for t in texts]
        id_lists += [[rng.randrange(vocab) for _ in range(rng.randint(1, 12))]
                     for _ in range(args.texts)]
        for ids in id_lists:
            expected = tok.decode(ids, skip_special_tokens=True)
            if "\ufffd" in expected:
                continue  # a broken byte sequence: fewer U+FFFD here, by design
            status, got = server.post("/detokenize", {"tokens": ids})
            if status != 200 or got["prompt"] != expected:
                failures.append(("detokenize", ids, expected, got))
    finally:
        server.stop()
    print(f"{name}: {len(texts)} texts, {len(id_lists)} id lists, {len(failures)} differences")
    for f in failures[:5]:
        print("   ", ascii(f))
    return not failures


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--headway", required=True, help="the headway binary")
    parser.add_argument("--work", required=True, help="a scratch directory")
    parser.add_argument("--texts", type=int, default=400, help="texts per tokenizer")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("configs", nargs="*", help=f"of {', '.join(CONFIGS)} (default: all)")
    args = parser.parse_args()
    rng = random.Random(args.seed)
    corpus = [text(rng, 40) for _ in range(3000)]
    ok = all([check(name, args, corpus, rng) for name in args.configs or CONFIGS])
    sys.exit(0 if ok else 1)


if __name__ == "__main__":
    main()
