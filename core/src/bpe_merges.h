// The BPE merge step of one pre-tokenized word: start from one symbol per byte and repeatedly merge
// the adjacent pair with the lowest merge rank (the leftmost among equals), as Hugging Face's BPE
// model does. O(n log n) in the word's length with a heap, so a prompt that is one long "word" (a
// run of letters, a base64 blob) does not cost quadratic time.
//
// Ownership: plain value. Threading: immutable after construction; apply() is reentrant.
#pragma once

#include <cstdint>
#include <span>
#include <unordered_map>
#include <vector>

namespace headway::core {

class BpeMerges {
 public:
  // Merge number `rank` turns the pair (left, right) into `merged`; a pair listed twice keeps its
  // first (lowest) rank, as Hugging Face does.
  void add(int32_t left, int32_t right, int32_t merged, int32_t rank);

  // Merges `symbols` (token ids, one per byte) in place of the returned ids.
  std::vector<int32_t> apply(std::span<const int32_t> symbols) const;

 private:
  struct Merge {
    int32_t rank;
    int32_t merged;
  };
  static uint64_t key(int32_t left, int32_t right) {
    return (static_cast<uint64_t>(static_cast<uint32_t>(left)) << 32) |
           static_cast<uint32_t>(right);
  }
  const Merge* find(int32_t left, int32_t right) const;

  std::unordered_map<uint64_t, Merge> merges_;
};

}  // namespace headway::core
