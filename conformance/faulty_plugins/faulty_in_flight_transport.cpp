// Faulty on purpose: hands each transfer to a worker thread (an RDMA library's completion queue,
// as a third-party author's "ring" transport did), which copies it 20 ms after start(), and
// answers poll() state 3 ("in flight", its own enum) until then, which abi.h does not define (3,
// the largest value an hw_transfer_state can hold: the SDK's adapter passes it as one, and a value
// past the enum's range is undefined behaviour, which UBSan stops at in the plugin). The
// host refuses the answer at the first poll() (core::PluginContractError) while the worker still
// owes the copy: every round trip must FAIL naming the state, and the suite must keep the regions
// alive for the worker's write (a suite that freed them crashed under AddressSanitizer, reported
// only as suite.completed). Blocks outside their region are refused at start().
//
// Simulated memory (HW_MEMORY_NONE), as the option `simulated` says: "refused" (HW_UNIMPLEMENTED:
// kv.simulated_memory is NOT_SUPPORTED); "undefined_state", answered DONE as state 3 (the ring
// transport's own enum: kv.simulated_memory must FAIL on the host's check, not take it for a
// refusal); "after_500ms", PENDING until 500 ms after start() and then DONE (abi.h allows 2 s: it
// must PASS).
#include <chrono>
#include <condition_variable>
#include <deque>
#include <headway/plugin.hpp>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <unordered_map>
#include <vector>

#include "host_block_copy.h"

namespace {

constexpr auto kCopyDelay = std::chrono::milliseconds(20);
constexpr auto kSimulatedDelay = std::chrono::milliseconds(500);

constexpr hw_str kSimulated[] = {headway::sdk::make_str("refused"),
                                 headway::sdk::make_str("undefined_state"),
                                 headway::sdk::make_str("after_500ms")};
constexpr hw_option_spec kOptions[] = {
    headway::sdk::enum_option("simulated", "refused", kSimulated,
                              "How a simulated (HW_MEMORY_NONE) transfer is answered"),
};

struct Job {
  hw_kv_transfer transfer;
  std::vector<uint32_t> source_blocks;  // the transfer's lists are lent for start() only
  std::vector<uint32_t> destination_blocks;
  std::chrono::steady_clock::time_point due;
  bool done = false;  // under the transport's mutex
};

class InFlightTransport final : public headway::sdk::KvTransport {
 public:
  InFlightTransport(const headway::sdk::Host&, const headway::sdk::Options& options)
      : simulated_(options.get_string("simulated")), worker_([this] { run(); }) {}
  ~InFlightTransport() override {
    {
      std::lock_guard lock(mutex_);
      stop_ = true;
    }
    wake_.notify_all();
    worker_.join();
  }

  uint64_t start(const hw_kv_transfer& t) override {
    if (t.source.kind == HW_MEMORY_NONE && simulated_ != "refused") {
      std::lock_guard lock(mutex_);
      simulated_started_[next_] = std::chrono::steady_clock::now();
      return next_++;
    }
    if (t.source.kind != HW_MEMORY_HOST || t.destination.kind != HW_MEMORY_HOST) {
      throw headway::sdk::Error(HW_UNIMPLEMENTED, "host memory only");
    }
    for (uint32_t i = 0; i < t.block_count; ++i) {
      if (!headway::sdk::block_in_region(t.source, t.source_blocks[i]) ||
          !headway::sdk::block_in_region(t.destination, t.destination_blocks[i])) {
        throw headway::sdk::Error(HW_INVALID_ARGUMENT, "a block is outside its region");
      }
    }
    auto job = std::make_shared<Job>();
    job->transfer = t;
    job->source_blocks.assign(t.source_blocks, t.source_blocks + t.block_count);
    job->destination_blocks.assign(t.destination_blocks, t.destination_blocks + t.block_count);
    job->transfer.source_blocks = job->source_blocks.data();
    job->transfer.destination_blocks = job->destination_blocks.data();
    job->due = std::chrono::steady_clock::now() + kCopyDelay;
    std::lock_guard lock(mutex_);
    const uint64_t handle = next_++;
    jobs_[handle] = job;
    queue_.push_back(job);
    wake_.notify_one();
    return handle;
  }

  headway::sdk::TransferProgress poll(uint64_t handle) override {
    std::lock_guard lock(mutex_);
    if (const auto sim = simulated_started_.find(handle); sim != simulated_started_.end()) {
      if (simulated_ == "undefined_state") return {static_cast<hw_transfer_state>(3), 1e-3};
      if (std::chrono::steady_clock::now() < sim->second + kSimulatedDelay) {
        return {HW_TRANSFER_PENDING, 0.0};
      }
      simulated_started_.erase(sim);
      return {HW_TRANSFER_DONE, 1e-3};
    }
    const auto it = jobs_.find(handle);
    if (it == jobs_.end()) throw headway::sdk::Error(HW_NOT_FOUND, "unknown handle");
    if (!it->second->done) return {static_cast<hw_transfer_state>(3), 0.0};
    jobs_.erase(it);
    return {HW_TRANSFER_DONE, 1e-3};
  }

 private:
  void run() {
    std::unique_lock lock(mutex_);
    for (;;) {
      wake_.wait(lock, [&] { return stop_ || !queue_.empty(); });
      if (stop_) return;  // the rest are abandoned, as the instance is destroyed
      const std::shared_ptr<Job> job = queue_.front();
      queue_.pop_front();
      lock.unlock();
      std::this_thread::sleep_until(job->due);
      headway::faulty::copy_host_blocks(job->transfer);
      lock.lock();
      job->done = true;
    }
  }

  const std::string simulated_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<std::shared_ptr<Job>> queue_;
  std::unordered_map<uint64_t, std::shared_ptr<Job>> jobs_;
  std::unordered_map<uint64_t, std::chrono::steady_clock::time_point> simulated_started_;
  uint64_t next_ = 1;
  bool stop_ = false;
  std::thread worker_;  // last: started once the members it uses exist
};

}  // namespace

HEADWAY_EXPORT_KV_TRANSPORT(InFlightTransport, "org.headway.faulty.in_flight_transport",
                            "faulty_in_flight", "0.0.1",
                            "Faulty on purpose: answers poll() state 3 while a worker still copies",
                            kOptions)
