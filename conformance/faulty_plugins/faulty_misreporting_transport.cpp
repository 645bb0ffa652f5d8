// Faulty on purpose: copies blocks synchronously, but mishandles a block outside its region in the
// way its `fault` option names, each a mistake a transport author makes (helper-120's walk wrote
// all three):
// - "unchecked_source": checks only the destination blocks. A source block past its region is
//   skipped (a real one would read past the source) and the transfer reports DONE;
// - "undefined_state": poll() answers state 3 for the failed transfer, which abi.h does not define;
// - "undefined_code": poll() fails with status code 15, which abi.h does not define (inside the
//   enum's range of values, so that the conversion itself is defined).
// kv.failure_reported must fail each; every round trip of blocks inside their regions passes.
// - "negative_duration": every transfer is right but poll() reports it DONE in -1 ms (a duration
//   taken as end minus start the wrong way round): the host refuses the answer, so every round
//   trip fails.
#include <cstring>
#include <headway/plugin.hpp>
#include <string>

#include "finished_transfers.h"

namespace {

constexpr hw_str kFaults[] = {
    headway::sdk::make_str("unchecked_source"), headway::sdk::make_str("undefined_state"),
    headway::sdk::make_str("undefined_code"), headway::sdk::make_str("negative_duration")};
constexpr hw_option_spec kOptions[] = {
    headway::sdk::enum_option("fault", "unchecked_source", kFaults,
                              "How a block outside its region is mishandled"),
};

class MisreportingTransport final : public headway::sdk::KvTransport {
 public:
  MisreportingTransport(const headway::sdk::Host&, const headway::sdk::Options& options)
      : fault_(options.get_string("fault")) {}

  uint64_t start(const hw_kv_transfer& t) override {
    bool ok = true;
    if (t.source.kind == HW_MEMORY_HOST && t.destination.kind == HW_MEMORY_HOST) {
      const auto* src = static_cast<const unsigned char*>(t.source.base);
      auto* dst = static_cast<unsigned char*>(t.destination.base);
      for (uint32_t i = 0; i < t.block_count; ++i) {
        const uint64_t from = t.source_blocks[i] * t.source.block_stride;
        const uint64_t to = t.destination_blocks[i] * t.destination.block_stride;
        const bool source_inside = from + t.source.block_bytes <= t.source.bytes;
        if (to + t.source.block_bytes > t.destination.bytes ||
            (!source_inside && fault_ != "unchecked_source")) {
          ok = false;
          break;
        }
        if (source_inside) std::memcpy(dst + to, src + from, t.source.block_bytes);
      }
    }
    return finished_.add(ok);
  }

  headway::sdk::TransferProgress poll(uint64_t handle) override {
    if (finished_.take(handle))
      return {HW_TRANSFER_DONE, fault_ == "negative_duration" ? -1e-3 : 1e-3};
    if (fault_ == "undefined_code") {
      throw headway::sdk::Error(static_cast<hw_status_code>(15), "a block is outside its region");
    }
    if (fault_ == "undefined_state") return {static_cast<hw_transfer_state>(3), 0.0};
    return {HW_TRANSFER_FAILED, 0.0};
  }

 private:
  std::string fault_;
  FinishedTransfers finished_;
};

}  // namespace

HEADWAY_EXPORT_KV_TRANSPORT(MisreportingTransport, "org.headway.faulty.misreporting_transport",
                            "faulty_misreporting", "0.0.1",
                            "Faulty on purpose: mishandles a block outside its region", kOptions)
