// Faulty on purpose: after each slice it clears the slot of the position after the slice's last
// (an off-by-one "end marker"). When the slice ends on a block boundary at the end of its block
// table, that slot is the first of the next physical block: another request's KV. It describes no
// kv_memory(), so model.kv_layout's check of the bytes outside the table cannot see it. The suite
// must report model.neighbour_blocks as FAIL.
#include "block_kv_model.h"

namespace {

class SpillingModel final : public headway::conformance::faulty::BlockKvModel {
 public:
  using BlockKvModel::BlockKvModel;

 protected:
  void after_slice(const hw_model_slice& s, uint32_t block_size) override {
    const uint32_t p = s.start + s.tokens;
    const uint32_t b = p / block_size;
    // The fault: past the table, "the next block" is taken to be the one after the last.
    const uint32_t block =
        b < s.block_count ? s.block_table[b] : s.block_table[s.block_count - 1] + 1;
    const size_t at = size_t{block} * block_size + p % block_size;
    if (at < kv_.size()) kv_[at] = 0.0f;
  }
};

}  // namespace

HEADWAY_EXPORT_MODEL(SpillingModel, "org.headway.faulty.spilling_model", "faulty_spilling", "0.0.1",
                     "Faulty on purpose: clears a slot of the block after its table",
                     headway::sdk::no_options)
