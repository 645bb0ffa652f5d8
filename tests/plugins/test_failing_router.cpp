// A router that misbehaves on purpose, for the service's handling of its router: requests whose
// prompt has `fail_at` tokens fail with status `code` (an sdk::Error; 0: a std::runtime_error,
// which the SDK's firewall turns into HW_INTERNAL), or, with `block_ms`, are placed on engine 0
// after sleeping that long (route() must not block); every other request goes to engine 0. With
// `create_throws_above`, create() throws a std::runtime_error on deployments of more engines (a
// bug, not a refusal).
#include <chrono>
#include <headway/plugin.hpp>
#include <stdexcept>
#include <string>
#include <thread>

namespace {

using namespace headway::sdk;

constexpr hw_option_spec kOptions[] = {
    int_option("fail_at", 3, 0, 1 << 20, "Prompt length of the requests to fail."),
    int_option("code", HW_INVALID_ARGUMENT, 0, HW_DEADLINE_EXCEEDED,
               "The status code to fail with; 0 throws a std::runtime_error."),
    int_option("block_ms", 0, 0, 60000,
               "When above 0: sleep this long instead of failing, then place the request."),
    int_option("create_throws_above", 0, 0, 1 << 20,
               "When above 0: create() throws on deployments of more engines than this."),
};

class FailingRouter final : public Router {
 public:
  FailingRouter(const Host&, const Options& options, std::span<const hw_engine_load> engines)
      : fail_at_(static_cast<uint32_t>(options.get_int("fail_at"))),
        code_(static_cast<int32_t>(options.get_int("code"))),
        block_ms_(options.get_int("block_ms")) {
    const int64_t above = options.get_int("create_throws_above");
    if (above > 0 && static_cast<int64_t>(engines.size()) > above) {
      throw std::runtime_error("test_failing_router: a bug on purpose in create()");
    }
  }

  hw_route_decision route(const hw_route_request& request,
                          std::span<const hw_engine_load> engines) override {
    if (request.prompt_tokens == fail_at_ && block_ms_ > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(block_ms_));
    } else if (request.prompt_tokens == fail_at_) {
      if (code_ == 0) throw std::runtime_error("test_failing_router: a bug on purpose");
      throw Error(static_cast<hw_status_code>(code_), "test_failing_router: status on purpose");
    }
    return hw_route_decision{sizeof(hw_route_decision), engines[0].engine_index,
                             engines[0].engine_index, 0};
  }

 private:
  uint32_t fail_at_;
  int32_t code_;
  int64_t block_ms_;
};

}  // namespace

HEADWAY_EXPORT_ROUTER(FailingRouter, "org.headway.test.failing_router", "test_failing_router",
                      "0.0.1", "Router that fails the requests of one prompt length", kOptions)
