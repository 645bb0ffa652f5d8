#include "bpe_merges.h"

#include <queue>
#include <tuple>

namespace headway::core {

void BpeMerges::add(int32_t left, int32_t right, int32_t merged, int32_t rank) {
  merges_.try_emplace(key(left, right), Merge{rank, merged});
}

const BpeMerges::Merge* BpeMerges::find(int32_t left, int32_t right) const {
  const auto it = merges_.find(key(left, right));
  return it == merges_.end() ? nullptr : &it->second;
}

std::vector<int32_t> BpeMerges::apply(std::span<const int32_t> symbols) const {
  const int n = static_cast<int>(symbols.size());
  if (n < 2) return {symbols.begin(), symbols.end()};

  // A doubly linked list over the symbols; a merged-away symbol is marked dead.
  struct Symbol {
    int32_t id;
    int prev;
    int next;
    bool alive;
  };
  std::vector<Symbol> list(n);
  for (int i = 0; i < n; ++i) list[i] = {symbols[i], i - 1, i + 1 < n ? i + 1 : -1, true};

  // Candidate merges by (rank, position): the lowest rank first, the leftmost among equal ranks.
  // An entry goes stale when either side changed since it was pushed; it is checked on pop.
  using Candidate =
      std::tuple<int32_t, int, int32_t, int32_t>;  // rank, left pos, left id, right id
  std::priority_queue<Candidate, std::vector<Candidate>, std::greater<>> heap;
  const auto push = [&](int left) {
    if (left < 0 || list[left].next < 0) return;
    const int right = list[left].next;
    if (const Merge* m = find(list[left].id, list[right].id)) {
      heap.emplace(m->rank, left, list[left].id, list[right].id);
    }
  };
  for (int i = 0; i + 1 < n; ++i) push(i);

  while (!heap.empty()) {
    const auto [rank, left, left_id, right_id] = heap.top();
    heap.pop();
    Symbol& l = list[left];
    if (!l.alive || l.id != left_id || l.next < 0) continue;
    Symbol& r = list[l.next];
    if (r.id != right_id) continue;
    l.id = find(left_id, right_id)->merged;
    r.alive = false;
    l.next = r.next;
    if (r.next >= 0) list[r.next].prev = left;
    push(l.prev);
    push(left);
  }

  std::vector<int32_t> out;
  for (int i = 0; i >= 0; i = list[i].next) out.push_back(list[i].id);
  return out;
}

}  // namespace headway::core
