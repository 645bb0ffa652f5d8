#!/usr/bin/env python3
"""Issue 5's head-of-line situation, measured against a running `headway serve` (or any
OpenAI-compatible server that accepts token-id prompts and vLLM's `ignore_eos`):

  a request is decoding (64-token prompt, long output); a 3,500-token prompt arrives; 50 ms later a
  64-token request arrives. Reported: the 64-token request's time to first token, and the longest
  gap in the decoding stream while the long prompt is prefilled; each beside the same situation
  without the long prompt (the quiet figures).

Each request asks for the token ids (vLLM's and Headway's `return_token_ids`), so that every
token makes a stream event even when its text is held back (part of a UTF-8 character, which a
random-weight byte model emits often); times are then per token. A server that ignores the field
still sends text events only, and times are per text event, as they all were before 2026-12-01
(docs/performance.md); one that refuses unknown fields needs --no-token-ids.

Standard library only. Usage:
  scripts/hol_3500_64.py --url http://127.0.0.1:8000 [--model NAME] [--repeat 3] [--vocab 320]
                         [--no-token-ids]
"""
import argparse
import http.client
import json
import statistics
import threading
import time
import urllib.parse


TOKEN_IDS = True  # main() clears it for --no-token-ids


def stream_completion(url, model, prompt, max_tokens, out):
    """POSTs a streaming completion; appends the arrival time of each token chunk to out["times"]."""
    parts = urllib.parse.urlsplit(url)
    conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=600)
    # return_token_ids (see the module's docstring): without it the gaps were between text
    # events, which spanned several steps (docs/performance.md, "The 3,500 + 64-token situation").
    request = {"model": model, "prompt": prompt, "max_tokens": max_tokens, "ignore_eos": True,
               "stream": True, "temperature": 0}
    if TOKEN_IDS:
        request["return_token_ids"] = True
    body = json.dumps(request)
    out["sent"] = time.monotonic()
    conn.request("POST", parts.path.rstrip("/") + "/v1/completions", body,
                 {"Content-Type": "application/json"})
    response = conn.getresponse()
    if response.status != 200:
        raise RuntimeError(f"HTTP {response.status}: {response.read()[:300]!r}")
    for raw in response:
        line = raw.decode().strip()
        if not line.startswith("data: "):
            continue
        data = line[len("data: "):]
        if data == "[DONE]":
            break
        chunk = json.loads(data)
        if "error" in chunk:
            raise RuntimeError(f"stream error: {chunk['error']}")
        if chunk.get("choices"):
            out["times"].append(time.monotonic())
    conn.close()


def ids(n, seed, vocab):
    # Distinct prompts per request (no shared prefix), ids in [32, vocab).
    return [32 + (seed * 7919 + i * 104729) % (vocab - 32) for i in range(n)]


def run_once(url, model, vocab, with_long, seed):
    decoder = {"times": []}
    short = {"times": []}
    long_ = {"times": []}
    threads = [threading.Thread(target=stream_completion,
                                args=(url, model, ids(64, seed, vocab), 1500, decoder))]
    threads[0].start()
    # Let the decoding stream settle into steady decode.
    while len(decoder["times"]) < 20:
        time.sleep(0.005)
    if with_long:
        threads.append(threading.Thread(target=stream_completion,
                                        args=(url, model, ids(3500, seed + 1, vocab), 16, long_)))
        threads[-1].start()
        time.sleep(0.05)
    threads.append(threading.Thread(target=stream_completion,
                                    args=(url, model, ids(64, seed + 2, vocab), 16, short)))
    threads[-1].start()
    for t in threads[1:]:
        t.join()
    # The decoder's stream while the others ran (from the first send after it to the end of the
    # last of them): its longest gap between tokens.
    start = long_["sent"] if with_long else short["sent"]
    end = max(t["times"][-1] for t in ([short, long_] if with_long else [short]))
    window = [t for t in decoder["times"] if start <= t <= end]
    before = [t for t in decoder["times"] if t < start][-1:]
    gaps = [b - a for a, b in zip(before + window, window)]
    threads[0].join()
    steady = [b - a for a, b in zip(decoder["times"][5:200], decoder["times"][6:201])]
    return {"ttft_short": short["times"][0] - short["sent"],
            "max_gap": max(gaps) if gaps else float("nan"),
            "steady_itl": statistics.median(steady)}


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--url", required=True)
    parser.add_argument("--model", default=None)
    parser.add_argument("--repeat", type=int, default=3)
    parser.add_argument("--vocab", type=int, default=320)
    parser.add_argument("--no-token-ids", action="store_true",
                        help="do not ask for token ids (a server that refuses unknown fields)")
    args = parser.parse_args()
    global TOKEN_IDS
    TOKEN_IDS = not args.no_token_ids
    model = args.model
    if model is None:
        parts = urllib.parse.urlsplit(args.url)
        conn = http.client.HTTPConnection(parts.hostname, parts.port, timeout=30)
        conn.request("GET", parts.path.rstrip("/") + "/v1/models")
        model = json.loads(conn.getresponse().read())["data"][0]["id"]
    rows = {False: [], True: []}
    for r in range(args.repeat):
        for with_long in (False, True):
            rows[with_long].append(run_once(args.url, model, args.vocab, with_long, 10 * r))
    med = {k: {m: statistics.median(x[m] for x in v) for m in v[0]} for k, v in rows.items()}
    print(f"median of {args.repeat} runs; model {model}")
    print(f"64-token request TTFT: quiet {med[False]['ttft_short'] * 1e3:.0f} ms, "
          f"behind the 3,500-token prompt {med[True]['ttft_short'] * 1e3:.0f} ms "
          f"({med[True]['ttft_short'] / med[False]['ttft_short']:.1f}x)")
    print(f"decoding stream: steady inter-token {med[False]['steady_itl'] * 1e3:.1f} ms; "
          f"longest gap quiet {med[False]['max_gap'] * 1e3:.0f} ms, during the long prefill "
          f"{med[True]['max_gap'] * 1e3:.0f} ms")
    print(json.dumps({"quiet": rows[False], "with_long": rows[True]}))


if __name__ == "__main__":
    main()
