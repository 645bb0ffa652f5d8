#!/usr/bin/env python3
"""How much of a causal prefill's attention time the order of its thread blocks costs, by a
list-scheduling model: each block (one prefill tile of one kv head) takes time proportional to its
key tiles, and the GPU starts blocks in grid order, each on the first free slot (SMs x blocks an
SM). Prints the modelled makespan over the even share (total work / slots) for three orders:
position order with the kv heads as the outer grid dimension (the tensor-core kernels' grid),
longest first the same way, and longest first with kv heads fastest (the lean tilings' grid over a
plan ordered by StepLimits::prefill_longest_first). A model, not a measurement: docs/performance.md
quotes it as a prediction for the next device run to check.

    python3 scripts/prefill_block_order.py
"""
import heapq


def makespan(works, slots):
    free_at = [0.0] * slots
    for w in works:
        heapq.heappush(free_at, heapq.heappop(free_at) + w)
    return max(free_at)


def orders(tokens, context, tile_tokens, tile_keys, kv_heads, slots):
    units = []
    for t0 in range(0, tokens, tile_tokens):
        keys = context + min(t0 + tile_tokens, tokens)  # the tile's last row sees them all
        units.append(-(-keys // tile_keys))
    longest = sorted(units, reverse=True)
    grids = {
        "position order": [w for _ in range(kv_heads) for w in units],
        "longest first, kv head by kv head": [w for _ in range(kv_heads) for w in longest],
        "longest first, kv heads fastest": [w for w in longest for _ in range(kv_heads)],
    }
    even = sum(units) * kv_heads / slots
    return {name: makespan(works, slots) / even for name, works in grids.items()}


def main():
    # Llama-3.1-8B on an H200: 8 kv heads, group 4, 132 SMs.
    cases = [
        ("2,048 tokens, 128x64 tiles, 1 block an SM", 2048, 0, 32, 64, 8, 132),
        ("2,048 tokens, 64x32 tiles, 3 blocks an SM (lean)", 2048, 0, 16, 32, 8, 396),
        ("4,096 tokens, 128x64 tiles, 1 block an SM", 4096, 0, 32, 64, 8, 132),
        ("8,192 tokens, 128x64 tiles, 1 block an SM", 8192, 0, 32, 64, 8, 132),
    ]
    for label, *args in cases:
        ratios = orders(*args)
        print(label + ": " + ", ".join(f"{k} {v:.2f}" for k, v in ratios.items()))


if __name__ == "__main__":
    main()
