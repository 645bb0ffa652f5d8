// The attention kernels' walk over the pieces of a K/V tile (plugins/models/cuda/kernels/
// kv_tile_pieces.h), run on the host: for every tile shape the kernels are built with, odd and
// usual block sizes and tile starts, each thread's pieces by the walk (a division at its first key
// and at the step, additions after) must be exactly those of the division a piece that the copy
// did before (piece e: key e / (HD / 8), column e % (HD / 8) * 8, table entry key / block_size,
// slot key % block_size), and the threads' pieces must cover the tile once. Needs no GPU.
#include <gtest/gtest.h>
#include <kv_tile_pieces.h>

#include <cstdint>
#include <string>
#include <vector>

namespace headway::models::cuda::kernels {
namespace {

constexpr uint32_t kBlockSizes[] = {1, 2, 3, 5, 7, 8, 16, 17, 32, 64, 100, 128, 256};
constexpr uint32_t kTileStarts[] = {0, 1, 7, 15, 16, 64, 100, 1024, 4093, 131072, 1000003};

template <int HD, int KEYS, int THREADS>
void check_walk() {
  using Pieces = KvTilePieces<HD, KEYS, THREADS>;
  const std::string shape = "head_dim " + std::to_string(HD) + ", " + std::to_string(KEYS) +
                            " keys, " + std::to_string(THREADS) + " threads";
  for (const uint32_t bs : kBlockSizes) {
    for (const uint32_t c : kTileStarts) {
      std::vector<int> covered(size_t{KEYS} * HD / 8, 0);
      const KeySlot step = KeySlot::of(Pieces::kKeyStep, bs);
      for (int thread = 0; thread < THREADS; ++thread) {
        const int first = Pieces::first_key(thread);
        KeySlot at = KeySlot::of(c + static_cast<uint32_t>(first), bs);
        for (int i = 0; i < Pieces::kPerThread; ++i) {
          if (i > 0) at.advance(step, bs);
          // The division a piece, as copy_kv_tile computed it before the walk.
          const int e = thread + i * THREADS;
          const bool exists = e < Pieces::kPieces;
          ASSERT_EQ(Pieces::has_piece(thread, i), exists)
              << shape << ", thread " << thread << ", piece " << i;
          if (!exists) continue;
          const int key = e / Pieces::kPiecesPerKey;
          const int column = e % Pieces::kPiecesPerKey * 8;
          ASSERT_EQ(first + i * Pieces::kKeyStep, key) << shape << ", thread " << thread;
          ASSERT_EQ(Pieces::column(thread), column) << shape << ", thread " << thread;
          const uint32_t absolute = c + static_cast<uint32_t>(key);
          ASSERT_EQ(at.entry, absolute / bs)
              << shape << ", block size " << bs << ", key " << absolute << ", thread " << thread;
          ASSERT_EQ(at.slot, absolute % bs)
              << shape << ", block size " << bs << ", key " << absolute << ", thread " << thread;
          ++covered[static_cast<size_t>(key) * Pieces::kPiecesPerKey + column / 8];
        }
      }
      for (size_t p = 0; p < covered.size(); ++p) {
        ASSERT_EQ(covered[p], 1) << shape << ": piece " << p << " of the tile";
      }
    }
  }
}

// The shapes attention_mma.cu instantiates copy_kv_tile with (ptxas's list of kernels, sm_90a):
// prefill and wide-decode blocks of 2, 4 and 8 warps over 32- or 64-key tiles, and the decode
// kernel's 4 warps over 64 keys, at every head dim it is built for; and head_dim 32 with 8 warps,
// whose last round is partial (128 pieces for 256 threads), which no kernel uses now.
TEST(KvTilePieces, TheWalkFindsThePiecesTheDivisionFound) {
  check_walk<32, 32, 64>();
  check_walk<32, 32, 128>();
  check_walk<64, 32, 64>();
  check_walk<64, 32, 128>();
  check_walk<64, 64, 128>();
  check_walk<64, 32, 256>();
  check_walk<64, 64, 256>();
  check_walk<128, 32, 64>();
  check_walk<128, 32, 128>();
  check_walk<128, 64, 128>();
  check_walk<128, 32, 256>();
  check_walk<128, 64, 256>();
  check_walk<256, 32, 64>();
  check_walk<256, 32, 128>();
  // The decode kernel (kKeySplitWarps = 4, 16 keys a warp).
  check_walk<32, 64, 128>();
  check_walk<256, 64, 128>();
  // A partial last round.
  check_walk<32, 32, 256>();
}

TEST(KvTilePieces, AStepOfAnyLengthLandsWhereTheDivisionDoes) {
  for (const uint32_t bs : kBlockSizes) {
    for (uint32_t keys = 1; keys <= 300; ++keys) {
      KeySlot at = KeySlot::of(5, bs);
      const KeySlot step = KeySlot::of(keys, bs);
      for (uint32_t n = 1; n <= 50; ++n) {
        at.advance(step, bs);
        const uint32_t key = 5 + n * keys;
        ASSERT_EQ(at.entry, key / bs)
            << "block size " << bs << ", step " << keys << ", key " << key;
        ASSERT_EQ(at.slot, key % bs) << "block size " << bs << ", step " << keys << ", key " << key;
      }
    }
  }
}

}  // namespace
}  // namespace headway::models::cuda::kernels
