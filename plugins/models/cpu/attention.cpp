#include "attention.h"

#include <dnnl.h>
#include <omp.h>

#include <algorithm>
#include <cmath>
#include <limits>

#include "vector_exp.h"

namespace headway::models::cpu {

Attention::Attention(const AttentionShape& shape, int threads)
    : shape_(shape), threads_(threads), group_(shape.heads / shape.kv_heads) {}

void Attention::run(KvCache& cache, uint32_t layer, const std::vector<SliceSpan>& slices,
                    const float* q, float* out) {
  const uint32_t bs = cache.block_size();
  if (bs != scratch_block_size_) {
    const size_t hd = shape_.head_dim;
    // Vector kernel, per row: running max, running sum, head_dim accumulators, block scores.
    const size_t rows = static_cast<size_t>(kTile) * group_;
    const size_t vector_floats = rows * (2 + hd + bs);
    // sgemm kernel: Q tile, gathered K^T and V chunks, scores, accumulators, max and sum.
    const size_t grows = static_cast<size_t>(gemm_tile_tokens()) * group_;
    const size_t chunk = static_cast<size_t>(kChunk) + bs;  // a chunk rounded up to whole blocks
    const size_t gemm_floats = grows * hd + 2 * hd * chunk + grows * chunk + grows * hd + 2 * grows;
    scratch_stride_ = (std::max(vector_floats, gemm_floats) + 15) / 16 * 16;
    scratch_.reserve(scratch_stride_ * threads_);
    scratch_block_size_ = bs;
  }
  items_.clear();
  for (uint32_t s = 0; s < slices.size(); ++s) {
    const bool gemm = slices[s].tokens >= kGemmTokens;
    const uint32_t tile = gemm ? gemm_tile_tokens() : kTile;
    // Later tiles see more keys: queue them first so dynamic scheduling balances the tail.
    const uint32_t tiles = (slices[s].tokens + tile - 1) / tile;
    for (uint32_t t = tiles; t-- > 0;) {
      const uint32_t first = t * tile;
      const uint32_t count = std::min(tile, slices[s].tokens - first);
      for (uint32_t g = 0; g < shape_.kv_heads; ++g) items_.push_back({s, g, first, count});
    }
  }
  const int64_t n = static_cast<int64_t>(items_.size());
  float* scratch = scratch_.data();
  const size_t stride = scratch_stride_;
  // oneDNN runs sgemm sequentially inside an OpenMP parallel region: each item is one thread's.
#pragma omp parallel for num_threads(threads_) schedule(dynamic, 1)
  for (int64_t i = 0; i < n; ++i) {
    const Item& item = items_[i];
    float* mine = scratch + stride * static_cast<size_t>(omp_get_thread_num());
    if (slices[item.slice].tokens >= kGemmTokens) {
      run_gemm_item(cache, layer, slices[item.slice], item, q, out, mine);
    } else {
      run_item(cache, layer, slices[item.slice], item, q, out, mine);
    }
  }
}

void Attention::run_gemm_item(KvCache& cache, uint32_t layer, const SliceSpan& span,
                              const Item& item, const float* q, float* out, float* scratch) {
  const uint32_t hd = shape_.head_dim;
  const uint32_t bs = cache.block_size();
  const uint32_t g = group_;
  const uint32_t rows = item.count * g;
  const size_t q_stride = static_cast<size_t>(shape_.heads) * hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();
  // Keys per chunk: whole blocks, at least kChunk positions, aligned to absolute positions so
  // that a row's chunking does not depend on where its slice started.
  const uint32_t chunk_blocks = (kChunk + bs - 1) / bs;
  const uint32_t chunk = chunk_blocks * bs;

  float* qs = scratch;                                    // rows x hd, pre-scaled
  float* kc = qs + static_cast<size_t>(rows) * hd;        // hd x chunk (K^T)
  float* vc = kc + static_cast<size_t>(hd) * chunk;       // chunk x hd
  float* sc = vc + static_cast<size_t>(chunk) * hd;       // rows x chunk
  float* acc = sc + static_cast<size_t>(rows) * chunk;    // rows x hd
  float* row_max = acc + static_cast<size_t>(rows) * hd;  // rows
  float* row_sum = row_max + rows;                        // rows

  for (uint32_t t = 0; t < item.count; ++t) {
    const float* src = q + static_cast<size_t>(span.first_row + item.first + t) * q_stride +
                       static_cast<size_t>(item.kv_head) * g * hd;
    float* dst = qs + static_cast<size_t>(t) * g * hd;
#pragma omp simd
    for (uint32_t i = 0; i < g * hd; ++i) dst[i] = src[i] * scale;
  }
  std::fill(row_max, row_max + rows, kNegInf);
  std::fill(row_sum, row_sum + rows, 0.0f);
  std::fill(acc, acc + static_cast<size_t>(rows) * hd, 0.0f);

  const uint32_t first_pos = span.start + item.first;
  const uint32_t last_pos = first_pos + item.count - 1;
  for (uint32_t c0 = 0; c0 <= last_pos; c0 += chunk) {
    // Keys of this chunk any row may see.
    const uint32_t keys = std::min(chunk, last_pos + 1 - c0);
    const uint32_t blocks = (keys + bs - 1) / bs;
    for (uint32_t b = 0; b < blocks; ++b) {
      const uint32_t block = span.block_table[c0 / bs + b];
      const float* kt = cache.keys(block, layer, item.kv_head);
      const uint32_t n = std::min(bs, keys - b * bs);
      // Plain loops: n is a block (16 floats), too short for a memmove call to pay off.
      for (uint32_t d = 0; d < hd; ++d) {
        const float* from = kt + static_cast<size_t>(d) * bs;
        float* to = kc + static_cast<size_t>(d) * keys + static_cast<size_t>(b) * bs;
#pragma omp simd
        for (uint32_t i = 0; i < n; ++i) to[i] = from[i];
      }
      std::copy_n(cache.values(block, layer, item.kv_head), static_cast<size_t>(n) * hd,
                  vc + static_cast<size_t>(b) * bs * hd);
    }
    // S = Qs * K^T over the chunk.
    dnnl_sgemm('N', 'N', rows, keys, hd, 1.0f, qs, hd, kc, keys, 0.0f, sc, keys);
    for (uint32_t r = 0; r < rows; ++r) {
      const uint32_t pos = first_pos + r / g;
      float* s = sc + static_cast<size_t>(r) * keys;
      // Keys after the row's own position are masked; rows that see none of this chunk get an
      // all-zero P row and keep their state unchanged.
      const uint32_t visible = pos >= c0 ? std::min(keys, pos - c0 + 1) : 0;
      float chunk_max = kNegInf;
#pragma omp simd reduction(max : chunk_max)
      for (uint32_t j = 0; j < visible; ++j) chunk_max = std::max(chunk_max, s[j]);
      const float new_max = std::max(row_max[r], chunk_max);
      const float correction = visible ? std::exp(row_max[r] - new_max) : 1.0f;
      float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
      for (uint32_t j = 0; j < visible; ++j) {
        s[j] = vector_exp(s[j] - new_max);
        sum += s[j];
      }
      std::fill(s + visible, s + keys, 0.0f);
      row_sum[r] = row_sum[r] * correction + sum;
      row_max[r] = new_max;
      float* ar = acc + static_cast<size_t>(r) * hd;
#pragma omp simd
      for (uint32_t d = 0; d < hd; ++d) ar[d] *= correction;
    }
    // acc += P * V over the chunk.
    dnnl_sgemm('N', 'N', rows, hd, keys, 1.0f, sc, keys, vc, hd, 1.0f, acc, hd);
  }
  for (uint32_t r = 0; r < rows; ++r) {
    const uint32_t t = r / g;
    const uint32_t j = r % g;
    float* o = out + static_cast<size_t>(span.first_row + item.first + t) * q_stride +
               static_cast<size_t>(item.kv_head * g + j) * hd;
    const float inv = 1.0f / row_sum[r];
    const float* ar = acc + static_cast<size_t>(r) * hd;
#pragma omp simd
    for (uint32_t d = 0; d < hd; ++d) o[d] = ar[d] * inv;
  }
}

void Attention::run_item(KvCache& cache, uint32_t layer, const SliceSpan& span, const Item& item,
                         const float* q, float* out, float* scratch) {
  const uint32_t hd = shape_.head_dim;
  const uint32_t bs = cache.block_size();
  const uint32_t g = group_;
  const uint32_t rows = item.count * g;
  const size_t q_stride = static_cast<size_t>(shape_.heads) * hd;
  const float scale = 1.0f / std::sqrt(static_cast<float>(hd));
  constexpr float kNegInf = -std::numeric_limits<float>::infinity();

  float* row_max = scratch;
  float* row_sum = row_max + rows;
  float* acc = row_sum + rows;                           // rows x hd
  float* scores = acc + static_cast<size_t>(rows) * hd;  // bs
  std::fill(row_max, row_max + rows, kNegInf);
  std::fill(row_sum, row_sum + rows, 0.0f);
  std::fill(acc, acc + static_cast<size_t>(rows) * hd, 0.0f);

  // Row r = (token t, head j of the group): query head kv_head * g + j.
  const uint32_t last_pos = span.start + item.first + item.count - 1;
  const uint32_t blocks = last_pos / bs + 1;
  for (uint32_t b = 0; b < blocks; ++b) {
    const uint32_t block = span.block_table[b];
    const float* kt = cache.keys(block, layer, item.kv_head);
    const float* v = cache.values(block, layer, item.kv_head);
    const uint32_t first_key = b * bs;
    for (uint32_t t = 0; t < item.count; ++t) {
      const uint32_t pos = span.start + item.first + t;
      if (first_key > pos) continue;  // block entirely in this token's future
      // Keys of this block the token may see; later slots may hold stale or unwritten data and
      // are never read past the QK product, which masks them.
      const uint32_t valid = std::min(bs, pos - first_key + 1);
      const float* q_token = q + static_cast<size_t>(span.first_row + item.first + t) * q_stride;
      for (uint32_t j = 0; j < g; ++j) {
        const uint32_t r = t * g + j;
        const float* qr = q_token + static_cast<size_t>(item.kv_head * g + j) * hd;
#pragma omp simd
        for (uint32_t o = 0; o < bs; ++o) scores[o] = 0.0f;
        for (uint32_t d = 0; d < hd; ++d) {
          const float qd = qr[d];
          const float* kd = kt + static_cast<size_t>(d) * bs;
#pragma omp simd
          for (uint32_t o = 0; o < bs; ++o) scores[o] += qd * kd[o];
        }
        float block_max = kNegInf;
        for (uint32_t o = 0; o < valid; ++o) {
          scores[o] *= scale;
          block_max = std::max(block_max, scores[o]);
        }
        const float new_max = std::max(row_max[r], block_max);
        const float correction = std::exp(row_max[r] - new_max);
        float sum = 0.0f;
#pragma omp simd reduction(+ : sum)
        for (uint32_t o = 0; o < valid; ++o) {
          scores[o] = vector_exp(scores[o] - new_max);
          sum += scores[o];
        }
        row_sum[r] = row_sum[r] * correction + sum;
        row_max[r] = new_max;
        float* ar = acc + static_cast<size_t>(r) * hd;
#pragma omp simd
        for (uint32_t d = 0; d < hd; ++d) ar[d] *= correction;
        for (uint32_t o = 0; o < valid; ++o) {
          const float w = scores[o];
          const float* vo = v + static_cast<size_t>(o) * hd;
#pragma omp simd
          for (uint32_t d = 0; d < hd; ++d) ar[d] += w * vo[d];
        }
      }
    }
  }
  for (uint32_t t = 0; t < item.count; ++t) {
    float* out_token = out + static_cast<size_t>(span.first_row + item.first + t) * q_stride;
    for (uint32_t j = 0; j < g; ++j) {
      const uint32_t r = t * g + j;
      const float inv = 1.0f / row_sum[r];
      const float* ar = acc + static_cast<size_t>(r) * hd;
      float* o = out_token + static_cast<size_t>(item.kv_head * g + j) * hd;
#pragma omp simd
      for (uint32_t d = 0; d < hd; ++d) o[d] = ar[d] * inv;
    }
  }
}

}  // namespace headway::models::cpu
