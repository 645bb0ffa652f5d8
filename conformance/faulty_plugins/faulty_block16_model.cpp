// Faulty on purpose: addresses KV with a block size of 16 whatever init_kv() and the batch say.
// Alone it is consistent with itself. Under a deployment's block_size = 32 a position past 16 ×
// the table's length is looked up past the end of the block table (the suite's tables carry guard
// entries there, naming another sequence's block); under 8 a block shared with another request (a
// prefix) has that request's tokens written over its own. The suite must
// report model.block_sizes as FAIL (block 16 alone, every other test passes).
#include "block_kv_model.h"

namespace {

class Block16Model final : public headway::conformance::faulty::BlockKvModel {
 public:
  using BlockKvModel::BlockKvModel;

 protected:
  uint32_t kv_block_size(uint32_t) const override { return 16; }  // the fault
};

}  // namespace

HEADWAY_EXPORT_MODEL(Block16Model, "org.headway.faulty.block16_model", "faulty_block16", "0.0.1",
                     "Faulty on purpose: block size hard-coded to 16", headway::sdk::no_options)
