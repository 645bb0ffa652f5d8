// Paged attention on tensor cores (mma.sync m16n8k16, BF16 in, FP32 accumulate): the default for
// head dims 32, 64, 128 and 256; attention.cu keeps the FP32 CUDA-core kernel for the exact mode
// and other head dims. Same work units, same outputs (final rows or split partials).
//
// A block runs one unit for one kv head, so each K/V tile gathered from the paged cache into
// shared memory serves every query head of the GQA group. Prefill (mma_attention_kernel): the
// unit's rows (tokens x group) are 16 per warp, four or eight warps (AttentionArgs::mma_tiling: 64
// or 128 rows). Decode of groups up to 16 (mma_decode_kernel): the token's rows fit one fragment,
// so the block's four warps split each tile's keys instead and merge at the end; larger groups run
// the prefill kernel's scheme with two warps. Tiles of 32 keys (the 64x32 and 128x32 tilings,
// wide decode groups) or 64 keys are copied with cp.async into two buffers: the next tile's copy
// runs while the warps compute on the current one. Per tile a warp computes S = Q K^T (Q kept in
// registers as A fragments, K fragments by ldmatrix), masks causally by each row's position,
// updates the online softmax in FP32, rounds P to BF16 and adds P V (V fragments by
// ldmatrix.trans) to its FP32 output fragments. The row sums use the rounded P, so the weights
// that multiply V sum to exactly the normaliser.
#include <algorithm>
#include <cmath>

#include "attention_mma.h"
#include "common.cuh"
#include "kv_tile_pieces.h"
#include "launch.cuh"

namespace headway::models::cuda::kernels {
namespace {

// Decode blocks of GQA groups above 16: two warps of 16 rows each over tiles of 32 keys.
constexpr int kWideDecodeWarps = 2;      // 32 rows: kAttentionMaxGroup
constexpr int kWideDecodeTileKeys = 32;  // keys per shared-memory tile of such a block
static_assert(16u * kWideDecodeWarps >= kAttentionMaxGroup);
// Decode blocks of groups up to 16 (one m16 fragment of rows): kKeySplitWarps warps, each taking
// its own 16 keys of every tile (mma_decode_kernel).
constexpr int kKeySplitWarps = 4;
static_assert(mma_tiling_rows(MmaTiling::k64x32) == kAttentionMmaTileRows);

// Two BF16 values in one register, the lower index in the low half (the fragments' order).
__device__ __forceinline__ uint32_t pack_bf16(__nv_bfloat16 lo, __nv_bfloat16 hi) {
  return static_cast<uint32_t>(__bfloat16_as_ushort(lo)) |
         (static_cast<uint32_t>(__bfloat16_as_ushort(hi)) << 16);
}

__device__ __forceinline__ uint32_t pack_bf16(float lo, float hi) {
  return pack_bf16(__float2bfloat16_rn(lo), __float2bfloat16_rn(hi));
}

__device__ __forceinline__ uint32_t shared_address(const void* p) {
  return static_cast<uint32_t>(__cvta_generic_to_shared(p));
}

// 2^x on the special function unit (ex2.approx.ftz: about 2 ulp, 2^-inf = +0): the lean softmax's
// exponential, one instruction where expf() adds a range reduction around it.
__device__ __forceinline__ float fast_exp2(float x) {
  float y;
  asm("ex2.approx.ftz.f32 %0, %1;" : "=f"(y) : "f"(x));
  return y;
}

// 16 bytes global -> shared without registers; zero-filled when !copy (src is then not read).
__device__ __forceinline__ void cp_async_16(void* dst, const void* src, bool copy) {
  asm volatile("cp.async.cg.shared.global [%0], [%1], 16, %2;\n" ::"r"(shared_address(dst)),
               "l"(src), "r"(copy ? 16 : 0));
}
__device__ __forceinline__ void cp_async_commit() { asm volatile("cp.async.commit_group;\n" ::); }
template <int kPending>
__device__ __forceinline__ void cp_async_wait() {
  asm volatile("cp.async.wait_group %0;\n" ::"n"(kPending));
}

// Four 8x8 BF16 matrices; lane i names row i % 8 of matrix i / 8. Without .trans lane l receives
// row l / 4, columns 2 (l % 4) and 2 (l % 4) + 1 of each matrix; with .trans the same of its
// transpose.
__device__ __forceinline__ void ldmatrix_x4(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}
__device__ __forceinline__ void ldmatrix_x4_trans(uint32_t (&r)[4], const void* row) {
  asm volatile("ldmatrix.sync.aligned.m8n8.x4.trans.shared.b16 {%0,%1,%2,%3}, [%4];\n"
               : "=r"(r[0]), "=r"(r[1]), "=r"(r[2]), "=r"(r[3])
               : "r"(shared_address(row)));
}

// Rows of a tile padded by 8 elements: the 8 rows an ldmatrix phase reads hit 32 different banks.
template <int HD>
constexpr int kStride = HD + 8;
template <int HD, int KEYS>
constexpr size_t kTileBytes = size_t{KEYS} * kStride<HD> * 2;  // one K or V tile (BF16)
template <int HD, int KEYS>
constexpr size_t kSmemBytes = 4 * kTileBytes<HD, KEYS>;  // K and V, two buffers each

// Starts the copy of the tile of keys [c, c + KEYS) of unit `u`, kv head `kvh`, into k_dst and
// v_dst (rows of kStride<HD> elements), as one cp.async commit group; keys at or past the unit's
// key_end are zero-filled. Every one of the block's THREADS threads calls it.
template <int HD, int KEYS, int THREADS>
__device__ __forceinline__ void copy_kv_tile(const AttentionArgs& a, const AttentionUnit& u,
                                             int kvh, int c, __nv_bfloat16* k_dst,
                                             __nv_bfloat16* v_dst) {
  using Pieces = KvTilePieces<HD, KEYS, THREADS>;
  constexpr int S = kStride<HD>;
  const int thread = static_cast<int>(threadIdx.x);
  const int first = Pieces::first_key(thread);
  const int d = Pieces::column(thread);
  const int32_t* table = a.block_tables + u.table;
  const __nv_bfloat16* kbase = a.layer_cache + static_cast<uint64_t>(kvh) * a.head_elems + d;
  const uint64_t v_offset = static_cast<uint64_t>(a.kv_heads) * a.head_elems;
  // Block ids first, all of them, so their loads overlap instead of each waiting in turn; the
  // slots on the way (kv_tile_pieces.h: additions, not a division a piece).
  const KeySlot step = KeySlot::of(Pieces::kKeyStep, a.block_size);
  KeySlot at = KeySlot::of(static_cast<uint32_t>(c + first), a.block_size);
  int32_t block_of[Pieces::kPerThread];
  uint32_t slot_of[Pieces::kPerThread];
#pragma unroll
  for (int i = 0; i < Pieces::kPerThread; ++i) {
    if (i > 0) at.advance(step, a.block_size);
    const int key = c + first + i * Pieces::kKeyStep;
    // Past the unit (maybe no table there) or past the tile: nothing to copy.
    block_of[i] = key < u.key_end && Pieces::has_piece(thread, i) ? table[at.entry] : -1;
    slot_of[i] = at.slot;
  }
#pragma unroll
  for (int i = 0; i < Pieces::kPerThread; ++i) {
    if (!Pieces::has_piece(thread, i)) continue;
    const int j = first + i * Pieces::kKeyStep;
    const bool copy = block_of[i] >= 0;
    const __nv_bfloat16* src =
        copy ? kbase + static_cast<uint64_t>(block_of[i]) * a.block_elems + slot_of[i] * HD : kbase;
    cp_async_16(k_dst + j * S + d, src, copy);
    cp_async_16(v_dst + j * S + d, copy ? src + v_offset : kbase, copy);
  }
  cp_async_commit();
}

// The A fragments of Q for the 16 rows row0.. of unit `u`, kv head `kvh`, one per 16 dims
// (g = lane / 4, t = lane % 4); rows at or past `rows` are zero.
template <int HD>
__device__ __forceinline__ void load_q_fragments(const AttentionArgs& a, const AttentionUnit& u,
                                                 int kvh, int group, int rows, int row0, int g,
                                                 int t, uint32_t (&qf)[HD / 16][4]) {
#pragma unroll
  for (int kk = 0; kk < HD / 16; ++kk) {
#pragma unroll
    for (int reg = 0; reg < 4; ++reg) {
      const int r = row0 + g + (reg % 2) * 8;
      const int d = kk * 16 + 2 * t + (reg / 2) * 8;
      uint32_t v = 0;
      if (r < rows) {
        const int head = kvh * group + r % group;
        v = *reinterpret_cast<const uint32_t*>(
            a.qkv + static_cast<uint64_t>(u.q_row + r / group) * a.q_stride +
            static_cast<uint64_t>(head) * HD + d);
      }
      qf[kk][reg] = v;
    }
  }
}

// One warp's share of a K/V tile: adds the keys [c, c + KEYS) (rows ks[0..KEYS) and
// vs[0..KEYS) of shared memory, kStride<HD> elements apart) to the online softmax of its 16 query
// rows. Per fragment row i of this thread (g and g + 8), keys after last[i] are masked; m, l and
// o are the row's running max, sum and unnormalised output.
//
// LEAN (the lean prefill tilings, mma_tiling.h): `scale` is 1 / sqrt(head_dim) times log2(e), m
// is kept in that base-2 domain, and P = 2^(S scale - m) is one FFMA and one ex2.approx per score
// instead of a multiply, a compare and expf(); MASK false skips the causal mask (the caller knows
// every row of the warp sees every key of the tile). Not LEAN: MASK must be true.
template <int HD, int KEYS, bool LEAN = false, bool MASK = true>
__device__ __forceinline__ void attend_tile(const __nv_bfloat16* ks, const __nv_bfloat16* vs,
                                            const uint32_t (&qf)[HD / 16][4], int c,
                                            const int (&last)[2], float scale, int lane,
                                            float (&m)[2], float (&l)[2], float (&o)[HD / 8][4]) {
  static_assert(KEYS % 16 == 0, "whole k16 steps of P V");
  constexpr int kKeyBlocks = KEYS / 8;  // n8 column blocks of S
  constexpr int kKeySteps = KEYS / 16;  // k16 steps of P V
  constexpr int S = kStride<HD>;
  const int t = lane % 4;
  // ldmatrix row addresses: lane i names row i % 8 of matrix i / 8.
  const int mat = lane / 8;
  const int mat_row = lane % 8;

  // S = Q K^T: for key block n, matrices (dims +0, +8) of two 16-dim steps per ldmatrix.
  float s[kKeyBlocks][4];
#pragma unroll
  for (int n = 0; n < kKeyBlocks; ++n) {
    s[n][0] = s[n][1] = s[n][2] = s[n][3] = 0.0f;
    const __nv_bfloat16* krow = ks + (n * 8 + mat_row) * S + (mat / 2) * 16 + (mat % 2) * 8;
#pragma unroll
    for (int kk = 0; kk < HD / 16; kk += 2) {
      uint32_t kf[4];
      ldmatrix_x4(kf, krow + kk * 16);
      detail::mma(s[n], qf[kk], kf[0], kf[1]);
      detail::mma(s[n], qf[kk + 1], kf[2], kf[3]);
    }
  }

  static_assert(LEAN || MASK, "the exp softmax always masks");
  float correction[2];
  uint32_t pf[kKeySteps][4];
  float row_sum[2] = {0.0f, 0.0f};
  if constexpr (LEAN) {
    float bias[2];  // -m of each row (0 while it has seen no key: its masked scores give 2^-inf)
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float chunk_max = -INFINITY;
#pragma unroll
      for (int n = 0; n < kKeyBlocks; ++n) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          float& v = s[n][2 * i + e];
          if constexpr (MASK) {
            if (c + n * 8 + 2 * t + e > last[i]) v = -INFINITY;
          }
          chunk_max = fmaxf(chunk_max, v);
        }
      }
      chunk_max = fmaxf(chunk_max, __shfl_xor_sync(detail::kFullMask, chunk_max, 1));
      chunk_max = fmaxf(chunk_max, __shfl_xor_sync(detail::kFullMask, chunk_max, 2));
      // scale > 0, so the largest scaled score is the largest score scaled.
      const float new_max = fmaxf(m[i], chunk_max * scale);
      correction[i] = m[i] == -INFINITY ? 0.0f : fast_exp2(m[i] - new_max);
      m[i] = new_max;
      bias[i] = new_max == -INFINITY ? 0.0f : -new_max;
    }
#pragma unroll
    for (int n = 0; n < kKeyBlocks; ++n) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const __nv_bfloat16 p0 = __float2bfloat16_rn(fast_exp2(fmaf(s[n][2 * i], scale, bias[i])));
        const __nv_bfloat16 p1 =
            __float2bfloat16_rn(fast_exp2(fmaf(s[n][2 * i + 1], scale, bias[i])));
        row_sum[i] += __bfloat162float(p0) + __bfloat162float(p1);
        pf[n / 2][(n % 2) * 2 + i] = pack_bf16(p0, p1);
      }
    }
  } else {
    // Scale, mask (a row sees the keys up to last[i]), and update each row's running max; the four
    // threads of a row hold its keys.
#pragma unroll
    for (int i = 0; i < 2; ++i) {
      float chunk_max = -INFINITY;
#pragma unroll
      for (int n = 0; n < kKeyBlocks; ++n) {
#pragma unroll
        for (int e = 0; e < 2; ++e) {
          const int key = c + n * 8 + 2 * t + e;
          float& v = s[n][2 * i + e];
          v = key <= last[i] ? v * scale : -INFINITY;
          chunk_max = fmaxf(chunk_max, v);
        }
      }
      chunk_max = fmaxf(chunk_max, __shfl_xor_sync(detail::kFullMask, chunk_max, 1));
      chunk_max = fmaxf(chunk_max, __shfl_xor_sync(detail::kFullMask, chunk_max, 2));
      const float new_max = fmaxf(m[i], chunk_max);
      correction[i] = m[i] == -INFINITY ? 0.0f : expf(m[i] - new_max);
      m[i] = new_max;
    }

    // P = exp(S - max) rounded to BF16, as A fragments of P V (one per 16 keys).
#pragma unroll
    for (int n = 0; n < kKeyBlocks; ++n) {
#pragma unroll
      for (int i = 0; i < 2; ++i) {
        const float v0 = s[n][2 * i], v1 = s[n][2 * i + 1];
        const __nv_bfloat16 p0 = __float2bfloat16_rn(v0 == -INFINITY ? 0.0f : expf(v0 - m[i]));
        const __nv_bfloat16 p1 = __float2bfloat16_rn(v1 == -INFINITY ? 0.0f : expf(v1 - m[i]));
        row_sum[i] += __bfloat162float(p0) + __bfloat162float(p1);
        // Key block n = 2 * step + half: half 0 gives registers 0 (row g) and 1 (row g + 8),
        // half 1 gives registers 2 and 3.
        pf[n / 2][(n % 2) * 2 + i] = pack_bf16(p0, p1);
      }
    }
  }
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    row_sum[i] += __shfl_xor_sync(detail::kFullMask, row_sum[i], 1);
    row_sum[i] += __shfl_xor_sync(detail::kFullMask, row_sum[i], 2);
    l[i] = l[i] * correction[i] + row_sum[i];
  }
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) {
    o[n][0] *= correction[0];
    o[n][1] *= correction[0];
    o[n][2] *= correction[1];
    o[n][3] *= correction[1];
  }

  // O += P V: for 16 keys, matrices (keys +0, +8) of two 8-dim blocks per ldmatrix.trans.
#pragma unroll
  for (int step = 0; step < kKeySteps; ++step) {
    const __nv_bfloat16* vrow = vs + (step * 16 + (mat % 2) * 8 + mat_row) * S + (mat / 2) * 8;
#pragma unroll
    for (int n = 0; n < HD / 8; n += 2) {
      uint32_t vf[4];
      ldmatrix_x4_trans(vf, vrow + n * 8);
      detail::mma(o[n], pf[step], vf[0], vf[1]);
      detail::mma(o[n + 1], pf[step], vf[2], vf[3]);
    }
  }
}

// Streams the unit's keys [key_begin, key_end) through two K/V tile buffers at `tiles` (kSmemBytes
// of shared memory): tile i + 1's copy is issued before waiting for tile i, so it lands while the
// warps work on tile i. `prologue()` runs while the first tile is in flight; `attend(c, ks, vs)`
// runs for the tile of keys [c, c + KEYS), its K and V rows at ks and vs, between two barriers.
// Every thread of the block calls it.
template <int HD, int KEYS, int THREADS, class Prologue, class Attend>
__device__ __forceinline__ void stream_kv_tiles(const AttentionArgs& a, const AttentionUnit& u,
                                                int kvh, __nv_bfloat16* tiles, Prologue&& prologue,
                                                Attend&& attend) {
  constexpr int S = kStride<HD>;
  // Buffer b: K at tiles + (2b) * tile elements, V right after it.
  const auto k_tile = [&](int b) { return tiles + size_t{2} * b * KEYS * S; };
  const auto v_tile = [&](int b) { return tiles + (size_t{2} * b + 1) * KEYS * S; };
  const int tiles_total = (u.key_end - u.key_begin + KEYS - 1) / KEYS;
  if (tiles_total > 0) {
    copy_kv_tile<HD, KEYS, THREADS>(a, u, kvh, u.key_begin, k_tile(0), v_tile(0));
  }
  prologue();
  for (int it = 0; it < tiles_total; ++it) {
    const int c = u.key_begin + it * KEYS;
    const int b = it % 2;
    if (it + 1 < tiles_total) {
      // Its buffer was released by the last barrier.
      copy_kv_tile<HD, KEYS, THREADS>(a, u, kvh, c + KEYS, k_tile((it + 1) % 2),
                                      v_tile((it + 1) % 2));
      cp_async_wait<1>();  // this tile's group has landed (this thread's)
    } else {
      cp_async_wait<0>();
    }
    __syncthreads();  // ... and every thread's
    attend(c, k_tile(b), v_tile(b));
    __syncthreads();  // buffer b is read (after the last tile: every buffer is free)
  }
}

// Blocks an SM that a lean prefill kernel's registers are bounded for: three blocks of four warps
// (168 registers a thread, as the decode kernel; at head_dim 128 ptxas then spills 12 bytes in
// 64x32 and 56 in 64x64), which the shared memory allows (64x64: 69,632 bytes a block); one for
// eight warps, which would need 128 registers a thread for two. (Lean kernels exist for head
// dims 64 and 128 only: `hd` is for the day another is built.) (One is not the same as no bound:
// without it ptxas took 128 registers and spilled in the eight-warp 64-key kernel at head_dim 64;
// with it, 168 and no spills; sm_90a, CUDA 13.0.)
constexpr int lean_min_blocks(int hd, int warps) { return warps == 4 && hd <= 128 ? 3 : 1; }

// WARPS x 16 query rows against tiles of KEYS keys (a multiple of 16: whole k16 steps of P V).
// LEAN: the lean softmax (attend_tile), masked only on the tiles where some row of a warp stops,
// and lean_min_blocks() blocks an SM.
template <int HD, int WARPS, int KEYS, bool LEAN>
__global__ void __launch_bounds__(32 * WARPS, LEAN ? lean_min_blocks(HD, WARPS) : 0)
    mma_attention_kernel(AttentionArgs a, const AttentionUnit* units) {
  static_assert(HD % 32 == 0, "ldmatrix.x4 takes 32 dims of K per load");
  static_assert(KEYS % 16 == 0);
  constexpr int kThreads = 32 * WARPS;
  extern __shared__ __align__(16) unsigned char smem_raw[];

  // Lean: a one-dimensional grid, kv heads fastest, so that the blocks of a unit start together and
  // a plan ordered longest first (StepLimits::prefill_longest_first) starts its longest first.
  const AttentionUnit u = units[LEAN ? blockIdx.x / a.kv_heads : blockIdx.x];
  const int kvh = LEAN ? blockIdx.x % a.kv_heads : blockIdx.y;
  const int group = static_cast<int>(a.heads / a.kv_heads);
  const int rows = u.tokens * group;
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int g = lane / 4;
  const int t = lane % 4;
  const int row0 = warp * 16;
  // Rows are token-major, so the warp's last row has its largest position (uniform per warp).
  const int warp_last_pos = row0 < rows ? u.first_pos + (min(row0 + 15, rows - 1)) / group : -1;

  // The last key each of this thread's two fragment rows sees, row0 + g and row0 + g + 8: its
  // position, or the unit's last key (-1: no row, sees nothing, never written).
  int last[2];
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = row0 + g + 8 * i;
    last[i] = r < rows ? min(u.first_pos + r / group, u.key_end - 1) : -1;
  }
  // The last key the warp's first row sees: tiles up to it need no mask for any row of the warp
  // (rows past the unit's have zero queries and are never written).
  const int warp_first_last = row0 < rows ? min(u.first_pos + row0 / group, u.key_end - 1) : -1;
  constexpr float kLog2e = 1.4426950408889634f;
  const float scale = LEAN ? a.scale * kLog2e : a.scale;

  uint32_t qf[HD / 16][4];  // Q as A fragments, one per 16 dims
  float o[HD / 8][4];
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};
  stream_kv_tiles<HD, KEYS, kThreads>(
      a, u, kvh, reinterpret_cast<__nv_bfloat16*>(smem_raw),
      [&] { load_q_fragments<HD>(a, u, kvh, group, rows, row0, g, t, qf); },
      [&](int c, const __nv_bfloat16* ks, const __nv_bfloat16* vs) {
        if constexpr (LEAN) {
          if (warp_last_pos < c) return;  // every row of the warp is before this tile
          if (c + KEYS - 1 <= warp_first_last) {
            attend_tile<HD, KEYS, true, false>(ks, vs, qf, c, last, scale, lane, m, l, o);
          } else {
            attend_tile<HD, KEYS, true, true>(ks, vs, qf, c, last, scale, lane, m, l, o);
          }
        } else if (warp_last_pos >= c) {  // else every row of the warp is before this tile
          attend_tile<HD, KEYS>(ks, vs, qf, c, last, a.scale, lane, m, l, o);
        }
      });

#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = row0 + g + 8 * i;
    if (r >= rows) continue;
    const int token = r / group;
    const int head = kvh * group + r % group;
    if (u.partial < 0) {
      const float inv = l[i] > 0.0f ? 1.0f / l[i] : 0.0f;
      __nv_bfloat16* out = a.out + static_cast<uint64_t>(u.q_row + token) * a.heads * HD +
                           static_cast<uint64_t>(head) * HD + 2 * t;
#pragma unroll
      for (int n = 0; n < HD / 8; ++n) {
        *reinterpret_cast<uint32_t*>(out + n * 8) =
            pack_bf16(o[n][2 * i] * inv, o[n][2 * i + 1] * inv);
      }
    } else {
      const uint64_t rec =
          static_cast<uint64_t>(u.partial) + static_cast<uint64_t>(token) * a.heads + head;
      float* acc = a.partial_acc + rec * HD + 2 * t;
#pragma unroll
      for (int n = 0; n < HD / 8; ++n) {
        acc[n * 8] = o[n][2 * i];
        acc[n * 8 + 1] = o[n][2 * i + 1];
      }
      if (t == 0) {
        // attention_reduce merges maxima of natural-log scores: a lean m is in base 2.
        constexpr float kLn2 = 0.6931471805599453f;
        a.partial_ml[2 * rec] = LEAN ? m[i] * kLn2 : m[i];
        a.partial_ml[2 * rec + 1] = l[i];
      }
    }
  }
}

// Decode of GQA groups up to 16: the unit's one token gives `group` query rows, one m16 fragment,
// so instead of giving warps rows (mma_attention_kernel, where a decode block's first warp did all
// the work and 12 of its 16 rows were padding at group 4) each of the WARPS warps takes its own 16
// keys of every 16 x WARPS-key tile, with its own online softmax over them, and the block merges
// the warps' (max, sum, output) at the end through shared memory. Two tile buffers, the next
// tile's copy issued before waiting for the current one. (On an H200, with registers for two
// blocks an SM, three buffers of four warps ran as fast as two, and two warps with four or six
// buffers 11-49% slower; deeper pipelines at three blocks an SM were not tried.)
//
// Three blocks of four warps fit an SM's shared memory at head_dim 128 (70 KB each); the bound
// below keeps them fitting its registers too (168 a thread, as ptxas allocates them). An early
// version needed 178, which left room for two: 27% slower on an H200 (609 against 478 us for batch
// 64 at context 4,096). At head_dim 256 one block fills the shared memory, and the bound would only
// cost spills. kOverlap: the instantiation for overlapped launches (launch.h).
template <int HD, int WARPS, bool kOverlap>
__global__ void __launch_bounds__(32 * WARPS, HD <= 128 ? 3 : 1)
    mma_decode_kernel(AttentionArgs a, const AttentionUnit* units) {
  detail::wait_for_previous_kernel<kOverlap>();
  static_assert(HD % 32 == 0, "ldmatrix.x4 takes 32 dims of K per load");
  constexpr int kTileKeys = 16 * WARPS;
  constexpr int kThreads = 32 * WARPS;
  constexpr int S = kStride<HD>;
  extern __shared__ __align__(16) unsigned char smem_raw[];

  const AttentionUnit u = units[blockIdx.x];
  const int kvh = blockIdx.y;
  const int group = static_cast<int>(a.heads / a.kv_heads);  // <= 16: launch_kind checks
  const int lane = threadIdx.x % 32;
  const int warp = threadIdx.x / 32;
  const int g = lane / 4;
  const int t = lane % 4;
  // One token: every row sees the keys up to its position, within the unit's range. Rows past the
  // group hold zero queries; their results are never read.
  const int last_key = min(u.first_pos, u.key_end - 1);
  const int last[2] = {last_key, last_key};

  if (u.key_end <= u.key_begin && u.partial >= 0) {
    // An empty split (a graph step pads every row to its split level): attention_reduce skips a
    // record whose max is -inf without reading its output, so only (max, sum) are written.
    for (int r = threadIdx.x; r < group; r += kThreads) {
      const uint64_t rec = static_cast<uint64_t>(u.partial) + kvh * group + r;
      a.partial_ml[2 * rec] = -INFINITY;
      a.partial_ml[2 * rec + 1] = 0.0f;
    }
    return;
  }
  uint32_t qf[HD / 16][4];
  float o[HD / 8][4];
#pragma unroll
  for (int n = 0; n < HD / 8; ++n) o[n][0] = o[n][1] = o[n][2] = o[n][3] = 0.0f;
  float m[2] = {-INFINITY, -INFINITY};
  float l[2] = {0.0f, 0.0f};
  stream_kv_tiles<HD, kTileKeys, kThreads>(
      a, u, kvh, reinterpret_cast<__nv_bfloat16*>(smem_raw),
      [&] { load_q_fragments<HD>(a, u, kvh, group, group, 0, g, t, qf); },
      [&](int c, const __nv_bfloat16* ks, const __nv_bfloat16* vs) {
        const int first = c + 16 * warp;  // this warp's keys: [first, first + 16)
        if (first <= last_key) {
          attend_tile<HD, 16>(ks + 16 * warp * S, vs + 16 * warp * S, qf, first, last, a.scale,
                              lane, m, l, o);
        }
      });

  // Each warp's state of rows g and g + 8 into shared memory: outputs [warp][row][HD], then
  // (max, sum) [warp][row][2].
  float* const merge_o = reinterpret_cast<float*>(smem_raw);
  float* const merge_ml = merge_o + WARPS * 16 * HD;
#pragma unroll
  for (int i = 0; i < 2; ++i) {
    const int r = g + 8 * i;
    float* row = merge_o + (warp * 16 + r) * HD + 2 * t;
#pragma unroll
    for (int n = 0; n < HD / 8; ++n) {
      row[n * 8] = o[n][2 * i];
      row[n * 8 + 1] = o[n][2 * i + 1];
    }
    if (t == 0) {
      merge_ml[2 * (warp * 16 + r)] = m[i];
      merge_ml[2 * (warp * 16 + r) + 1] = l[i];
    }
  }
  __syncthreads();
  for (int e = threadIdx.x; e < group * HD; e += kThreads) {
    const int r = e / HD;
    const int d = e % HD;
    float best = -INFINITY;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) best = fmaxf(best, merge_ml[2 * (w * 16 + r)]);
    float sum = 0.0f;
    float acc = 0.0f;
#pragma unroll
    for (int w = 0; w < WARPS; ++w) {
      const float mw = merge_ml[2 * (w * 16 + r)];
      if (mw == -INFINITY) continue;  // the warp saw no key of this row
      const float f = expf(mw - best);
      sum += merge_ml[2 * (w * 16 + r) + 1] * f;
      acc += merge_o[(w * 16 + r) * HD + d] * f;
    }
    const int head = kvh * group + r;
    if (u.partial < 0) {
      // Times the reciprocal, as every other kernel that ends a row does (attention_reduce among
      // them): a quotient may differ from it in the last bit, and a graph step's padded plan
      // reduces a row that the unpadded plan ends here (their results must be the same bits).
      const float inv = sum > 0.0f ? 1.0f / sum : 0.0f;
      a.out[static_cast<uint64_t>(u.q_row) * a.heads * HD + static_cast<uint64_t>(head) * HD + d] =
          detail::to_bf16(acc * inv);
    } else {
      const uint64_t rec = static_cast<uint64_t>(u.partial) + head;
      a.partial_acc[rec * HD + d] = acc;
      if (d == 0) {
        a.partial_ml[2 * rec] = best;
        a.partial_ml[2 * rec + 1] = sum;
      }
    }
  }
}

// Shared memory of a mma_decode_kernel block: its tile buffers, which the merge reuses.
template <int HD, int WARPS>
constexpr size_t kDecodeSmemBytes = std::max(kSmemBytes<HD, 16 * WARPS>,
                                             sizeof(float) * WARPS * 16 * (HD + 2));

template <int HD, int WARPS, int KEYS, bool LEAN = false>
cudaError_t launch(const AttentionArgs& a, const AttentionUnit* units, uint32_t count,
                   cudaStream_t stream) {
  constexpr size_t smem = kSmemBytes<HD, KEYS>;
  // Per launch rather than once: the attribute belongs to the current device's context, and
  // tensor-parallel shards launch on several devices.
  cudaError_t err =
      cudaFuncSetAttribute(mma_attention_kernel<HD, WARPS, KEYS, LEAN>,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (err != cudaSuccess) return err;
  const dim3 grid = LEAN ? dim3(count * a.kv_heads) : dim3(count, a.kv_heads);
  mma_attention_kernel<HD, WARPS, KEYS, LEAN><<<grid, 32 * WARPS, smem, stream>>>(a, units);
  return cudaGetLastError();
}

// on.overlap: an overlapped launch (launch.h) of mma_decode_kernel; the wide kernel it falls back
// on is launched as usual.
template <int HD>
cudaError_t launch_decode(const AttentionArgs& a, const AttentionUnit* units, uint32_t count,
                          const Launch& on) {
  constexpr size_t smem = kDecodeSmemBytes<HD, kKeySplitWarps>;
  const auto plain = mma_decode_kernel<HD, kKeySplitWarps, false>;
  const auto overlapping = mma_decode_kernel<HD, kKeySplitWarps, true>;
  cudaError_t err =
      cudaFuncSetAttribute(on.overlap ? overlapping : plain,
                           cudaFuncAttributeMaxDynamicSharedMemorySize, static_cast<int>(smem));
  if (err == cudaErrorInvalidValue) {
    // More shared memory than this GPU gives a block (132 KB at head_dim 256: an H100 or H200
    // has 227, an sm_86 or sm_89 GPU 99): the wide kernel's 32-key tiles take half.
    (void)cudaGetLastError();
    return launch<HD, kWideDecodeWarps, kWideDecodeTileKeys>(a, units, count, on.stream);
  }
  if (err != cudaSuccess) return err;
  return detail::launch_kernel(plain, overlapping, dim3(count, a.kv_heads), 32 * kKeySplitWarps,
                               smem, on, a, units);
}

template <int HD>
cudaError_t launch_kind(const AttentionArgs& a, const AttentionUnit* units, uint32_t count,
                        AttentionKind kind, const Launch& on) {
  const cudaStream_t stream = on.stream;
  if (kind == AttentionKind::kDecode) {
    if (a.heads / a.kv_heads <= 16) return launch_decode<HD>(a, units, count, on);
    return launch<HD, kWideDecodeWarps, kWideDecodeTileKeys>(a, units, count, stream);
  }
  if constexpr (HD != 64 && HD != 128) {  // effective_mma_tiling(): the default only
    return launch<HD, 4, 32>(a, units, count, stream);
  } else {
    switch (a.mma_tiling) {
      case MmaTiling::k64x32:
        return launch<HD, 4, 32>(a, units, count, stream);
      case MmaTiling::k64x64:
        return launch<HD, 4, 64>(a, units, count, stream);
      case MmaTiling::k128x32:
        return launch<HD, 8, 32>(a, units, count, stream);
      case MmaTiling::k128x64:
        return launch<HD, 8, 64>(a, units, count, stream);
      case MmaTiling::kLean64x32:
        return launch<HD, 4, 32, true>(a, units, count, stream);
      case MmaTiling::kLean64x64:
        return launch<HD, 4, 64, true>(a, units, count, stream);
      case MmaTiling::kLean128x32:
        return launch<HD, 8, 32, true>(a, units, count, stream);
      case MmaTiling::kLean128x64:
        return launch<HD, 8, 64, true>(a, units, count, stream);
    }
    return cudaErrorInvalidValue;
  }
}

}  // namespace

bool mma_attention_supports(uint32_t head_dim) {
  return head_dim == 32 || head_dim == 64 || head_dim == 128 || head_dim == 256;
}

cudaError_t mma_paged_attention(const AttentionArgs& a, const AttentionUnit* units,
                                uint32_t unit_count, AttentionKind kind, const Launch& on) {
  switch (a.head_dim) {
    case 32:
      return launch_kind<32>(a, units, unit_count, kind, on);
    case 64:
      return launch_kind<64>(a, units, unit_count, kind, on);
    case 128:
      return launch_kind<128>(a, units, unit_count, kind, on);
    case 256:
      return launch_kind<256>(a, units, unit_count, kind, on);
    default:
      return cudaErrorInvalidValue;
  }
}

}  // namespace headway::models::cuda::kernels
