// A valid, minimal step scheduler with one option of every type, for the registry and option tests.
// Its limits echo its options (budget -> max_num_batched_tokens, max_num_seqs) so that a test can
// see the values the host passed to create(). It schedules nothing.
#include <headway/plugin.hpp>

namespace {

using namespace headway::sdk;

constexpr hw_str kPolicies[] = {make_str("fcfs"), make_str("priority"), make_str("lifo")};

constexpr hw_option_spec kOptions[] = {
    int_option("max_num_seqs", 8, 1, 1024, "Requests running at once."),
    int_option("budget", 512, 1, 1 << 20, "Token budget of one step."),
    double_option("ratio", 0.5, 0.0, 1.0, "A fraction, for double tests."),
    double_option("scale", 2.0, -10.0, 10.0, "A double whose default is integral."),
    bool_option("verbose", false, "Log every step."),
    string_option("label", "none", "A free-form label."),
    enum_option("policy", "fcfs", kPolicies, "Queue order."),
};

class GoodScheduler final : public StepScheduler {
 public:
  GoodScheduler(const Host&, const Options& options, const hw_engine_facts&)
      : max_num_seqs_(static_cast<uint32_t>(options.get_int("max_num_seqs"))),
        budget_(static_cast<uint32_t>(options.get_int("budget"))) {
    // Reading every option proves that each arrives with the declared type.
    (void)options.get_double("ratio");
    (void)options.get_double("scale");
    (void)options.get_bool("verbose");
    (void)options.get_string("label");
    (void)options.get_string("policy");
  }
  hw_scheduler_limits limits() const override {
    return hw_scheduler_limits{sizeof(hw_scheduler_limits), budget_, max_num_seqs_};
  }
  void schedule(const hw_scheduler_snapshot&, PlanWriter&) override {}

 private:
  uint32_t max_num_seqs_;
  uint32_t budget_;
};

}  // namespace

HEADWAY_EXPORT_SCHEDULER(GoodScheduler, "org.headway.test.good_scheduler", "test_good", "1.2.3",
                         "Valid test scheduler with options of every type", kOptions)
