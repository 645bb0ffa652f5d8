// Which 16-byte pieces of a K/V tile each thread of an attention block copies from the paged cache
// (attention_mma.cu's copy_kv_tile), and where each lies: its key, its column, its block table
// entry and its slot in that block.
//
// Piece e of a tile (KEYS keys x HD / 8 pieces a key) goes to thread e % THREADS, so a thread's
// pieces share one column and their keys are kKeyStep apart. Their blocks and slots then follow
// from the first by additions (KeySlot::advance), and a tile costs a thread two divisions by the
// block size (its first key and the step) instead of one per piece. In the SASS of the head_dim-128
// decode kernel (sm_90a, CUDA 13.1), the copy with its per-piece divisions (a reciprocal on the SFU
// and some thirty dependent integer instructions each) made 751 of the 1,125 instructions a thread
// ran per tile (431 of 802 with the walk; docs/performance.md).
//
// Plain C++ (host and device), so that the walk is tested against the division on a machine
// without a GPU (tests/gpu/kv_tile_pieces_test.cpp). Threading: pure functions.
#pragma once

#include <cstdint>

#if defined(__CUDACC__)
#define HEADWAY_KV_TILE_HD __host__ __device__
#else
#define HEADWAY_KV_TILE_HD
#endif

namespace headway::models::cuda::kernels {

template <int HD, int KEYS, int THREADS>
struct KvTilePieces {
  static constexpr int kPiecesPerKey = HD / 8;  // 16 bytes of BF16 a piece
  static constexpr int kPieces = KEYS * kPiecesPerKey;
  // Rounds of THREADS pieces; the last is partial when THREADS does not divide kPieces (head_dim
  // 32 with eight warps: 128 pieces for 256 threads).
  static constexpr int kPerThread = (kPieces + THREADS - 1) / THREADS;
  static constexpr bool kPartialRound = kPieces % THREADS != 0;
  static_assert(THREADS % kPiecesPerKey == 0, "a thread's pieces must share one column");
  static constexpr int kKeyStep = THREADS / kPiecesPerKey;  // keys between a thread's pieces

  // The tile key (0-based) of the thread's first piece, and the element column of all of them.
  HEADWAY_KV_TILE_HD static constexpr int first_key(int thread) { return thread / kPiecesPerKey; }
  HEADWAY_KV_TILE_HD static constexpr int column(int thread) { return thread % kPiecesPerKey * 8; }
  // Whether the thread has an i-th piece (false only in a partial last round).
  HEADWAY_KV_TILE_HD static constexpr bool has_piece(int thread, int i) {
    return !kPartialRound || first_key(thread) + i * kKeyStep < KEYS;
  }
};

// A key's place in the paged cache: the entry of its request's block table and the slot in that
// block (key = entry * block_size + slot).
struct KeySlot {
  uint32_t entry = 0;
  uint32_t slot = 0;

  HEADWAY_KV_TILE_HD static KeySlot of(uint32_t key, uint32_t block_size) {
    return {key / block_size, key % block_size};
  }
  // The place `step` keys further on, `step` given as KeySlot::of(step keys, block_size): two
  // additions and a compare, for any block size (both slots are below it, so their sum is below
  // twice it).
  HEADWAY_KV_TILE_HD void advance(const KeySlot& step, uint32_t block_size) {
    entry += step.entry;
    slot += step.slot;
    if (slot >= block_size) {
      slot -= block_size;
      ++entry;
    }
  }
};

}  // namespace headway::models::cuda::kernels
