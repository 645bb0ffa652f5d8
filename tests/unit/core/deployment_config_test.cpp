#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <headway/core/deployment_config.h>
#include <headway/core/error.h>
#include <headway/core/plugin_registry.h>
#include <sys/stat.h>
#include <unistd.h>

#include <filesystem>
#include <functional>
#include <string>
#include <string_view>

namespace headway::core {
namespace {

namespace fs = std::filesystem;
using ::testing::AllOf;
using ::testing::HasSubstr;
using ::testing::Not;

const fs::path kRealPlugins = HEADWAY_PLUGIN_DIR;
const fs::path kTestPlugins = HEADWAY_TEST_PLUGIN_DIR;

std::string_view sv(hw_str s) { return s.data ? std::string_view(s.data, s.size) : ""; }

const hw_option_value* option(const PluginChoice& choice, std::string_view key) {
  for (const hw_option_value& v : choice.options->values()) {
    if (sv(v.key) == key) return &v;
  }
  return nullptr;
}

class DeploymentConfigTest : public ::testing::Test {
 protected:
  DeploymentConfigTest() { registry_.add_search_directory(kRealPlugins); }

  DeploymentConfig parse(std::string_view text, const fs::path& file = "deploy.toml") {
    return parse_deployment(text, file, registry_);
  }

  // Expects parse() to throw; returns the message.
  std::string error_of(std::string_view text, const fs::path& file = "deploy.toml") {
    try {
      parse(text, file);
    } catch (const Error& e) {
      return e.what();
    }
    ADD_FAILURE() << "no Error for:\n" << text;
    return {};
  }

  PluginRegistry registry_;
};

constexpr std::string_view kFull = R"(
name = "two-engines"

[model]
plugin = "sim"
options = { gpu = "h200", model = "llama-3.1-8b", tensor_parallel = 2 }

[[engines]]
count = 2
pool = "short"
role = "mixed"
block_size = 32
kv_blocks = 5000
max_model_len = 8192
max_waiting = 100
scheduler = { plugin = "chunked", options = { max_num_seqs = 64, max_num_batched_tokens = 2048 } }

[router]
plugin = "least_loaded"
)";

TEST_F(DeploymentConfigTest, FullDeploymentParses) {
  DeploymentConfig c = parse(kFull);
  EXPECT_EQ(c.file, fs::path("deploy.toml"));
  EXPECT_EQ(c.name, "two-engines");
  ASSERT_NE(c.model.plugin, nullptr);
  EXPECT_EQ(c.model.plugin->name(), "org.headway.model.sim");
  EXPECT_EQ(c.model.where, "deploy.toml: model");
  ASSERT_NE(option(c.model, "gpu"), nullptr);
  EXPECT_EQ(sv(option(c.model, "gpu")->string_value), "h200");
  EXPECT_EQ(option(c.model, "tensor_parallel")->int_value, 2);

  ASSERT_EQ(c.engines.size(), 2u);
  for (uint32_t i = 0; i < 2; ++i) {
    const EngineConfig& e = c.engines[i];
    EXPECT_EQ(e.index, i);
    EXPECT_EQ(e.name, "engine" + std::to_string(i));
    EXPECT_EQ(e.pool, "short");
    EXPECT_EQ(e.role, HW_ENGINE_ROLE_MIXED);
    EXPECT_EQ(e.block_size, 32u);
    EXPECT_EQ(e.kv_blocks, 5000u);
    EXPECT_EQ(e.max_model_len, 8192u);
    EXPECT_EQ(e.max_waiting, 100u);
    ASSERT_NE(e.scheduler.plugin, nullptr);
    EXPECT_EQ(e.scheduler.plugin->short_name(), "chunked");
    EXPECT_EQ(e.scheduler.where, "deploy.toml: engines[0].scheduler");
    EXPECT_EQ(option(e.scheduler, "max_num_seqs")->int_value, 64);
    EXPECT_EQ(option(e.scheduler, "max_num_batched_tokens")->int_value, 2048);
    EXPECT_EQ(option(e.scheduler, "long_prefill_token_threshold")->int_value, 0);  // default
  }
  ASSERT_NE(c.router.plugin, nullptr);
  EXPECT_EQ(c.router.plugin->name(), "org.headway.router.least_loaded");
  EXPECT_FALSE(c.kv_transport.has_value());
}

TEST_F(DeploymentConfigTest, EngineGroupsExpandInOrder) {
  DeploymentConfig c = parse(R"(
[model]
plugin = "sim"
[[engines]]
count = 2
pool = "short"
[[engines]]
pool = "long"
role = "prefill"
[[engines]]
count = 3
role = "decode"
scheduler = "chunked"
[kv_transport]
plugin = "host_copy"
)");
  ASSERT_EQ(c.engines.size(), 6u);
  const char* pools[] = {"short", "short", "long", "", "", ""};
  const int32_t roles[] = {HW_ENGINE_ROLE_MIXED,  HW_ENGINE_ROLE_MIXED,  HW_ENGINE_ROLE_PREFILL,
                           HW_ENGINE_ROLE_DECODE, HW_ENGINE_ROLE_DECODE, HW_ENGINE_ROLE_DECODE};
  for (uint32_t i = 0; i < 6; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(c.engines[i].index, i);
    EXPECT_EQ(c.engines[i].name, "engine" + std::to_string(i));
    EXPECT_EQ(c.engines[i].pool, pools[i]);
    EXPECT_EQ(c.engines[i].role, roles[i]);
  }
  EXPECT_EQ(c.engines[2].scheduler.where, "deploy.toml: engines[1].scheduler");
  // Prefill and decode engines among them: the router that serves those roles.
  EXPECT_EQ(c.router.plugin->short_name(), "disaggregated");
}

TEST_F(DeploymentConfigTest, DefaultsForOneEngine) {
  DeploymentConfig c = parse("[model]\nplugin = 'sim'\n[[engines]]\n", "configs/minimal.toml");
  EXPECT_EQ(c.name, "minimal");  // the file's stem
  ASSERT_EQ(c.engines.size(), 1u);
  const EngineConfig& e = c.engines[0];
  EXPECT_EQ(e.name, "engine0");
  EXPECT_EQ(e.pool, "");
  EXPECT_EQ(e.role, HW_ENGINE_ROLE_MIXED);
  EXPECT_EQ(e.block_size, 16u);
  EXPECT_EQ(e.kv_blocks, 0u);
  EXPECT_EQ(e.max_model_len, 0u);
  EXPECT_EQ(e.max_waiting, 0u);
  ASSERT_NE(e.scheduler.plugin, nullptr);
  EXPECT_EQ(e.scheduler.plugin->short_name(), "chunked");
  EXPECT_EQ(option(e.scheduler, "max_num_seqs")->int_value, 256);
  EXPECT_EQ(c.router.plugin->short_name(), "single");
  EXPECT_EQ(sv(option(c.model, "gpu")->string_value), "h100");
}

// [model] tokenizer: a directory relative to the file, as every path in it; empty is refused, and
// no other table takes the key.
TEST_F(DeploymentConfigTest, TheModelsTokenizerIsADirectoryBesideTheFile) {
  EXPECT_TRUE(parse("[model]\nplugin = 'sim'\n[[engines]]\n").tokenizer.empty());
  EXPECT_EQ(
      parse("[model]\nplugin = 'sim'\ntokenizer = '../tok/llama'\n[[engines]]\n", "configs/a.toml")
          .tokenizer,
      fs::path("tok/llama"));
  EXPECT_EQ(parse("[model]\nplugin = 'sim'\ntokenizer = '/opt/tok'\n[[engines]]\n").tokenizer,
            fs::path("/opt/tok"));
  EXPECT_NE(error_of("[model]\nplugin = 'sim'\ntokenizer = ''\n[[engines]]\n")
                .find("deploy.toml: model.tokenizer: empty"),
            std::string::npos);
  EXPECT_NE(error_of("[model]\nplugin = 'sim'\n[router]\nplugin = 'single'\ntokenizer = 'x'\n"
                     "[[engines]]\n")
                .find("unknown key 'tokenizer'"),
            std::string::npos);
}

TEST_F(DeploymentConfigTest, DefaultRouterForTwoEnginesIsLeastLoaded) {
  DeploymentConfig c = parse("[model]\nplugin = 'sim'\n[[engines]]\ncount = 2\n");
  EXPECT_EQ(c.router.plugin->short_name(), "least_loaded");
  DeploymentConfig d = parse("[model]\nplugin = 'sim'\n[[engines]]\n[[engines]]\n");
  EXPECT_EQ(d.router.plugin->short_name(), "least_loaded");
}

// The routers that place whole requests refuse prefill engines at create, so a deployment with
// prefill engines and no [router] table gets the one that serves them. Mixed engines keep theirs
// (helper-183: mixed beside decode engines loaded under least_loaded before, and disaggregated
// refuses a deployment without prefill engines unless local_prefill_max_tokens is set).
TEST_F(DeploymentConfigTest, DefaultRouterForPrefillAndDecodeEnginesIsDisaggregated) {
  const std::string model = "[model]\nplugin = 'sim'\n[kv_transport]\nplugin = 'host_copy'\n";
  const auto router_of = [&](const std::string& engines) {
    return parse(model + engines).router.plugin->short_name();
  };
  EXPECT_EQ(router_of("[[engines]]\nrole = 'prefill'\n[[engines]]\nrole = 'decode'\n"),
            "disaggregated");
  EXPECT_EQ(router_of("[[engines]]\n[[engines]]\nrole = 'prefill'\n[[engines]]\nrole = 'decode'\n"),
            "disaggregated");
  EXPECT_EQ(router_of("[[engines]]\n[[engines]]\nrole = 'decode'\n"), "least_loaded");
  EXPECT_EQ(router_of("[[engines]]\nrole = 'mixed'\n"), "single");
  // Decode engines alone: only disaggregated serves them (with local_prefill_max_tokens), and its
  // create() says so (DisaggregatedRouter.RefusesDeploymentsWithoutTheRolesItNeeds).
  EXPECT_EQ(router_of("[[engines]]\nrole = 'decode'\n"), "disaggregated");
}

// A prefill engine hands every request on: without a decode engine it decoded them itself, as a
// mixed engine under the name of a prefill engine (helper-182's fuzzing). In an engine process's
// file too (no router could start it: helper-183), with a word on where its role belongs.
TEST_F(DeploymentConfigTest, APrefillEngineWithoutADecodeEngineIsRefused) {
  const std::string model = "[model]\nplugin = 'sim'\n[kv_transport]\nplugin = 'host_copy'\n";
  for (const std::string& engines :
       {std::string("[[engines]]\nrole = 'prefill'\n"),
        std::string("[[engines]]\n[[engines]]\nrole = 'prefill'\ncount = 2\n")}) {
    EXPECT_THAT(error_of(model + engines + "[router]\nplugin = 'single'\n"),
                AllOf(HasSubstr("role = \"prefill\" hands each request's KV to a decode engine, "
                                "and the deployment has none"),
                      HasSubstr("role = \"decode\""), HasSubstr("\"mixed\""),
                      Not(HasSubstr("router process's file"))))
        << engines;
  }
  // Named by the first prefill engine.
  EXPECT_THAT(error_of(model + "[[engines]]\n[[engines]]\nrole = 'prefill'\n"),
              HasSubstr("deploy.toml: engine1: role = \"prefill\""));
  EXPECT_THAT(
      error_of(
          "[model]\nplugin = 'sim'\n[[engines]]\nrole = 'prefill'\n[server]\nrole = 'engine'\n"),
      AllOf(HasSubstr("engine0: role = \"prefill\" hands each request's KV"),
            HasSubstr("leave role out here and set role = \"prefill\" on its [[engines]] table in "
                      "the router process's file")));
  // An engine process pairing engines of its own is a deployment like any other: it needs a
  // transport between them (helper-184: it loaded without one and refused every request).
  EXPECT_THAT(error_of("[model]\nplugin = 'sim'\n[[engines]]\nrole = 'prefill'\n[[engines]]\n"
                       "role = 'decode'\n[server]\nrole = 'engine'\n"),
              HasSubstr("engine0: role = \"prefill\" hands each request's KV to a decode engine, "
                        "which needs a [kv_transport] table"));
  const DeploymentConfig pair =
      parse(model +
            "[[engines]]\nrole = 'prefill'\n[[engines]]\nrole = 'decode'\n"
            "[server]\nrole = 'engine'\n");
  EXPECT_EQ(pair.engines.size(), 2u);
}

TEST_F(DeploymentConfigTest, SchedulerOptionsWithoutAPluginUseTheDefaultScheduler) {
  DeploymentConfig c = parse(R"(
[model]
plugin = "sim"
[[engines]]
scheduler = { options = { max_num_seqs = 4 } }
)");
  EXPECT_EQ(c.engines[0].scheduler.plugin->short_name(), "chunked");
  EXPECT_EQ(option(c.engines[0].scheduler, "max_num_seqs")->int_value, 4);
}

TEST_F(DeploymentConfigTest, PluginsByReverseDnsName) {
  DeploymentConfig c = parse(R"(
[model]
plugin = "org.headway.model.sim"
[[engines]]
scheduler = "org.headway.scheduler.chunked"
[router]
plugin = "org.headway.router.single"
)");
  EXPECT_EQ(c.model.plugin->short_name(), "sim");
  EXPECT_EQ(c.engines[0].scheduler.plugin->short_name(), "chunked");
  EXPECT_EQ(c.router.plugin->short_name(), "single");
}

TEST_F(DeploymentConfigTest, TomlSyntaxErrorGivesLineAndColumn) {
  std::string m = error_of("[model]\nplugin = 'sim'\n[[engines]\n");
  EXPECT_THAT(m, HasSubstr("deploy.toml: line 3, column"));
  m = error_of("[model]\nplugin = sim\n");
  EXPECT_THAT(m, HasSubstr("deploy.toml: line 2, column"));
}

TEST_F(DeploymentConfigTest, UnknownTopLevelKey) {
  std::string m = error_of("[model]\nplugin = 'sim'\n[[engines]]\n[routr]\nplugin = 'single'\n");
  EXPECT_THAT(m, HasSubstr("deploy.toml: unknown key 'routr'"));
  EXPECT_THAT(m, HasSubstr("(line 4)"));
  EXPECT_THAT(m, HasSubstr("allowed: name, plugin_dirs, model, engines, router, kv_transport"));
}

// A workload given as the deployment failed on "unknown key 'arrival'".
TEST_F(DeploymentConfigTest, AWorkloadGivenAsTheDeploymentIsNamedAsOne) {
  std::string m = error_of("seed = 1\narrival = \"poisson\"\n[[classes]]\nname = 'a'\n");
  EXPECT_THAT(m, HasSubstr("deploy.toml: this is a workload file (it has 'classes'), not a "
                           "deployment: give it with --workload"));
}

TEST_F(DeploymentConfigTest, UnknownEngineKey) {
  std::string m = error_of("[model]\nplugin = 'sim'\n[[engines]]\nblocksize = 16\n");
  EXPECT_THAT(m, HasSubstr("deploy.toml: engines[0]: unknown key 'blocksize'"));
  EXPECT_THAT(m, HasSubstr("(line 4)"));
  EXPECT_THAT(m, HasSubstr("block_size"));
}

TEST_F(DeploymentConfigTest, UnknownKeyInAPluginChoice) {
  std::string m = error_of("[model]\nplugin = 'sim'\noption = {}\n[[engines]]\n");
  EXPECT_THAT(m, HasSubstr("deploy.toml: model: unknown key 'option'"));
  EXPECT_THAT(m, HasSubstr("allowed: plugin, options"));
}

TEST_F(DeploymentConfigTest, MissingModel) {
  EXPECT_THAT(error_of("[[engines]]\ncount = 1\n"),
              HasSubstr("deploy.toml: missing table [model]"));
  EXPECT_THAT(error_of("model = 'sim'\n[[engines]]\n"), HasSubstr("model: expected a table"));
  EXPECT_THAT(error_of("[model]\noptions = {}\n[[engines]]\n"), HasSubstr("missing key 'plugin'"));
}

TEST_F(DeploymentConfigTest, MissingEngines) {
  EXPECT_THAT(error_of("[model]\nplugin = 'sim'\n"), HasSubstr("deploy.toml: missing [[engines]]"));
  // A prefill engine's KV has no way to its decode engine: every request would be refused.
  EXPECT_THAT(error_of("[model]\nplugin = 'sim'\n[[engines]]\nrole = 'prefill'\n[[engines]]\n"
                       "role = 'decode'\n[router]\nplugin = 'disaggregated'\n"),
              AllOf(HasSubstr("deploy.toml: engine0: role = \"prefill\""),
                    HasSubstr("needs a [kv_transport] table")));
  EXPECT_THAT(error_of("engines = []\n[model]\nplugin = 'sim'\n"),
              HasSubstr("missing [[engines]]"));
  EXPECT_THAT(error_of("engines = 2\n[model]\nplugin = 'sim'\n"), HasSubstr("missing [[engines]]"));
  // The likeliest slip: single brackets. The message names it rather than calling engines missing.
  EXPECT_THAT(error_of("[model]\nplugin = 'sim'\n[engines]\nblock_size = 16\n"),
              AllOf(HasSubstr("deploy.toml: [engines] is a single table"),
                    HasSubstr("write [[engines]] (double brackets)")));
}

TEST_F(DeploymentConfigTest, UnknownPluginName) {
  std::string m = error_of("[model]\nplugin = 'simm'\n[[engines]]\n");
  EXPECT_THAT(m, HasSubstr("deploy.toml: model.plugin: unknown model plugin 'simm'"));
  EXPECT_THAT(m, HasSubstr("available: "));
  EXPECT_THAT(m, HasSubstr("sim"));
  EXPECT_THAT(m, HasSubstr(kRealPlugins.string()));

  m = error_of("[model]\nplugin = 'sim'\n[[engines]]\n[router]\nplugin = 'round_robin'\n");
  EXPECT_THAT(m, HasSubstr("router.plugin: unknown router plugin 'round_robin'"));
  EXPECT_THAT(m, HasSubstr("least_loaded"));
}

// Messages name places as "<file>: <table path>" ("deploy.toml: model",
// "deploy.toml: engines[0].scheduler"); the router must follow suit.
// KNOWN BUG (core/src/deployment_config.cpp, parse_deployment(): the read_inline_or_table() calls
// for "router" and "kv_transport" pass `name` as `where`, and read_inline_or_table() appends
// "." + key, so the router is named "deploy.toml.router" — which reads as a file name — in
// PluginChoice::where and in every message about it). Left failing on purpose until fixed.
TEST_F(DeploymentConfigTest, RouterIsNamedLikeTheOtherTables) {
  DeploymentConfig c = parse("[model]\nplugin = 'sim'\n[[engines]]\n");
  EXPECT_EQ(c.model.where, "deploy.toml: model");
  EXPECT_EQ(c.engines[0].scheduler.where, "deploy.toml: engines[0].scheduler");
  EXPECT_EQ(c.router.where, "deploy.toml: router");
  std::string m =
      error_of("[model]\nplugin = 'sim'\n[[engines]]\n[router]\nplugin = 'round_robin'\n");
  EXPECT_THAT(m, HasSubstr("deploy.toml: router.plugin: unknown router plugin 'round_robin'"));
}

TEST_F(DeploymentConfigTest, SchedulerOptionOutOfRange) {
  std::string m = error_of(R"(
[model]
plugin = "sim"
[[engines]]
scheduler = { plugin = "chunked", options = { max_num_seqs = 0 } }
)");
  EXPECT_THAT(m, HasSubstr("deploy.toml: engines[0].scheduler.options.max_num_seqs"));
  EXPECT_THAT(m, HasSubstr("[1, 65536]"));
  EXPECT_THAT(m, HasSubstr("(line 5)"));
  EXPECT_THAT(m, HasSubstr("got 0"));
}

// model_options lay an engine group's own options over [model]'s (a prefill pool at tensor_parallel
// 8 beside decode engines at 4): the same plugin, the other options kept; engines without it run
// the deployment's model; a bad key names the engine's table.
TEST_F(DeploymentConfigTest, ModelOptionsOverrideTheModelForOneEngineGroup) {
  const DeploymentConfig d = parse(R"(
[model]
plugin = "sim"
options = { gpu = "h100", model = "llama-3.3-70b", tensor_parallel = 4 }
[[engines]]
role = "prefill"
model_options = { tensor_parallel = 8 }
[[engines]]
role = "decode"
[router]
plugin = "disaggregated"
[kv_transport]
plugin = "host_copy"
)");
  ASSERT_EQ(d.engines.size(), 2u);
  ASSERT_TRUE(d.engines[0].model.has_value());
  EXPECT_FALSE(d.engines[1].model.has_value());
  const PluginChoice& prefill = model_of(d, d.engines[0]);
  EXPECT_EQ(prefill.plugin, d.model.plugin);
  EXPECT_EQ(option(prefill, "tensor_parallel")->int_value, 8);
  EXPECT_EQ(sv(option(prefill, "model")->string_value), "llama-3.3-70b");
  EXPECT_EQ(sv(option(prefill, "gpu")->string_value), "h100");
  EXPECT_EQ(option(model_of(d, d.engines[1]), "tensor_parallel")->int_value, 4);

  const std::string m = error_of(R"(
[model]
plugin = "sim"
[[engines]]
model_options = { tensor_paralel = 8 }
)");
  EXPECT_THAT(m, HasSubstr("engines[0].model_options"));
  EXPECT_THAT(m, HasSubstr("tensor_paralel"));
  EXPECT_THAT(error_of(R"(
[model]
plugin = "sim"
[[engines]]
model_options = { path = "other" }
)"),
              HasSubstr("engines[0].model_options.path (line 5): every engine runs [model]'s "
                        "weights"));
  // A value out of range names its line, as everywhere else in the file.
  EXPECT_THAT(error_of(R"(
[model]
plugin = "sim"
[[engines]]
model_options = { tensor_parallel = 100 }
)"),
              HasSubstr("(line 5)"));
}

TEST_F(DeploymentConfigTest, SecondGroupIsNamedInMessages) {
  std::string m = error_of(R"(
[model]
plugin = "sim"
[[engines]]
[[engines]]
scheduler = { options = { max_num_batched_tokens = -1 } }
)");
  EXPECT_THAT(m, HasSubstr("engines[1].scheduler.options.max_num_batched_tokens"));
}

TEST_F(DeploymentConfigTest, UnknownPluginOptionNamesThePlugin) {
  std::string m = error_of(R"(
[model]
plugin = "sim"
options = { gpus = "h100" }
[[engines]]
)");
  EXPECT_THAT(m, HasSubstr("deploy.toml: model.options: unknown key 'gpus'"));
  EXPECT_THAT(m, HasSubstr("org.headway.model.sim"));
  m = error_of("[model]\nplugin = 'sim'\n[[engines]]\n[router]\noptions = { x = 1 }\n");
  EXPECT_THAT(m, HasSubstr("router.options: unknown key 'x'"));
  EXPECT_THAT(m, HasSubstr("allowed: none"));
}

TEST_F(DeploymentConfigTest, BadRole) {
  std::string m = error_of("[model]\nplugin = 'sim'\n[[engines]]\nrole = 'both'\n");
  EXPECT_THAT(m, HasSubstr("deploy.toml: engines[0].role: unknown role \"both\""));
  EXPECT_THAT(m, HasSubstr("mixed, prefill, decode"));
  EXPECT_THAT(error_of("[model]\nplugin = 'sim'\n[[engines]]\nrole = 1\n"),
              HasSubstr("engines[0].role: expected a string"));
}

// What a request whose KV moves to an engine reserves there: "all" by default, "as_needed" on
// request; another value, the key on a prefill engine (which receives no moved KV) and the key
// beside an engine process's address are refused, naming the table.
TEST_F(DeploymentConfigTest, MovedKvBlocksIsAllUnlessAnEngineAsksForAsNeeded) {
  DeploymentConfig c = parse(R"(
[model]
plugin = "sim"
[[engines]]
role = "prefill"
[[engines]]
role = "decode"
moved_kv_blocks = "as_needed"
[[engines]]
role = "decode"
moved_kv_blocks = "all"
[[engines]]
[kv_transport]
plugin = "host_copy"
)");
  ASSERT_EQ(c.engines.size(), 4u);
  EXPECT_EQ(c.engines[0].moved_kv_blocks, EngineConfig::MovedKvBlocks::kAll);
  EXPECT_EQ(c.engines[1].moved_kv_blocks, EngineConfig::MovedKvBlocks::kAsNeeded);
  EXPECT_EQ(c.engines[2].moved_kv_blocks, EngineConfig::MovedKvBlocks::kAll);
  EXPECT_EQ(c.engines[3].moved_kv_blocks, EngineConfig::MovedKvBlocks::kAll);

  const std::string model = "[model]\nplugin = 'sim'\n";
  EXPECT_THAT(error_of(model + "[[engines]]\nmoved_kv_blocks = 'grow'\n"),
              AllOf(HasSubstr("deploy.toml: engines[0].moved_kv_blocks: unknown value \"grow\""),
                    HasSubstr("all, as_needed")));
  EXPECT_THAT(error_of(model + "[[engines]]\nmoved_kv_blocks = true\n"),
              HasSubstr("engines[0].moved_kv_blocks: expected a string"));
  EXPECT_THAT(error_of(model + "[[engines]]\nrole = 'decode'\n[[engines]]\nrole = 'prefill'\n" +
                       "moved_kv_blocks = 'as_needed'\n"),
              AllOf(HasSubstr("engines[1].moved_kv_blocks: a prefill engine receives no moved KV"),
                    HasSubstr("decode engines")));
  EXPECT_THAT(error_of(model + "[[engines]]\naddress = 'h:1'\nmoved_kv_blocks = 'as_needed'\n" +
                       "[server]\nrole = 'router'\n"),
              AllOf(HasSubstr("engines[0].moved_kv_blocks"), HasSubstr("own deployment file")));
}

// KV moves block by block from prefill to decode engines: a block_size that differs between the
// roles is refused at load, naming both engines (simulate used to fail at the first transfer).
TEST_F(DeploymentConfigTest, PrefillAndDecodeEnginesOfOtherBlockSizesAreRefused) {
  const std::string text =
      "[model]\nplugin = 'sim'\n[[engines]]\nrole = 'prefill'\nblock_size = 32\n"
      "[[engines]]\nrole = 'decode'\nblock_size = SIZE\n[router]\nplugin = 'disaggregated'\n"
      "[kv_transport]\nplugin = 'host_copy'\n";
  auto with = [&](const std::string& size) {
    std::string t = text;
    t.replace(t.find("SIZE"), 4, size);
    return t;
  };
  EXPECT_THAT(error_of(with("16")),
              AllOf(HasSubstr("engine0 (prefill) has block_size 32 and engine1 (decode) 16"),
                    HasSubstr("one block_size")));
  EXPECT_EQ(parse(with("32")).engines.at(1).block_size, 32u);
}

TEST_F(DeploymentConfigTest, IntegerFieldsAreRangeChecked) {
  struct Case {
    const char* line;
    const char* expected;
  } cases[] = {
      {"count = 0", "engines[0].count: expected an integer in [1, 4096]"},
      {"block_size = 0", "engines[0].block_size: expected an integer in [1, 1024]"},
      {"block_size = 2048", "engines[0].block_size: expected an integer in [1, 1024]"},
      {"block_size = 16.5", "engines[0].block_size: expected an integer in [1, 1024], not 16.5"},
      {"count = '2'", "engines[0].count: expected an integer in [1, 4096], not '2'"},
      {"kv_blocks = -1", "engines[0].kv_blocks: expected an integer in [0, 4294967295]"},
      {"max_model_len = 4294967296", "engines[0].max_model_len: expected an integer in [0, "},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.line);
    std::string m = error_of(std::string("[model]\nplugin = 'sim'\n[[engines]]\n") + c.line + "\n");
    EXPECT_THAT(m, HasSubstr(c.expected));
    EXPECT_THAT(m, HasSubstr("(line 4)"));
  }
}

TEST_F(DeploymentConfigTest, ModelNamedWhereASchedulerIsExpected) {
  // By name: the plugin exists but is of another kind, and the message says so.
  std::string m = error_of("[model]\nplugin = 'sim'\n[[engines]]\nscheduler = 'sim'\n");
  EXPECT_THAT(m, HasSubstr("engines[0].scheduler.plugin"));
  EXPECT_THAT(m, HasSubstr("'sim' is a model, but a step scheduler was expected"));
  // By path: the library is loaded and its kind is named.
  const std::string sim = (kRealPlugins / "headway_model_sim.so").string();
  m = error_of("[model]\nplugin = 'sim'\n[[engines]]\nscheduler = '" + sim + "'\n");
  EXPECT_THAT(m, HasSubstr("engines[0].scheduler.plugin"));
  EXPECT_THAT(m, HasSubstr("is a model, but a step scheduler was expected"));
  // And the other way round.
  const std::string chunked = (kRealPlugins / "headway_scheduler_chunked.so").string();
  m = error_of("[model]\nplugin = '" + chunked + "'\n[[engines]]\n");
  EXPECT_THAT(m, HasSubstr("model.plugin"));
  EXPECT_THAT(m, HasSubstr("is a step scheduler, but a model was expected"));
}

TEST_F(DeploymentConfigTest, PluginDirsAreRelativeToTheFile) {
  // The file lives in <build>/tests (a directory that exists: the kernel resolves "..");
  // ../test_plugins is <build>/test_plugins.
  const fs::path file = kTestPlugins.parent_path() / "tests" / "deploy.toml";
  PluginRegistry registry;  // no search directory added by the test
  DeploymentConfig c = parse_deployment(R"(
plugin_dirs = ["../test_plugins", ")" + kRealPlugins.string() +
                                            R"("]
[model]
plugin = ")" + (kRealPlugins / "headway_model_sim.so").string() +
                                            R"("
[[engines]]
scheduler = { plugin = "test_good", options = { max_num_seqs = 3 } }
[router]
plugin = ")" + (kRealPlugins / "headway_router_single.so").string() +
                                            R"("
)",
                                        file, registry);
  EXPECT_EQ(c.engines[0].scheduler.plugin->name(), "org.headway.test.good_scheduler");
  EXPECT_EQ(option(c.engines[0].scheduler, "max_num_seqs")->int_value, 3);
  // Listed order is search order, and both come before the defaults.
  auto dirs = registry.search_directories();
  ASSERT_GE(dirs.size(), 2u);
  EXPECT_EQ(dirs[0], file.parent_path() / "../test_plugins");
  EXPECT_EQ(dirs[1], kRealPlugins);
  // A directory that is not there is a typo to report, not a directory to skip.
  EXPECT_THAT(error_of("plugin_dirs = ['/nonexistent/second']\n[model]\nplugin = 'sim'\n"
                       "[[engines]]\n"),
              HasSubstr("plugin_dirs[0]: /nonexistent/second is not a directory"));
}

TEST_F(DeploymentConfigTest, RelativePluginPathIsRelativeToTheFile) {
  const fs::path file = kTestPlugins.parent_path() / "tests" / "deploy.toml";
  DeploymentConfig c = parse(
      "[model]\nplugin = 'sim'\n[[engines]]\nscheduler = "
      "'../test_plugins/test_good_scheduler.so'\n",
      file);
  EXPECT_EQ(c.engines[0].scheduler.plugin->short_name(), "test_good");
  EXPECT_EQ(c.engines[0].scheduler.plugin->path,
            fs::weakly_canonical(kTestPlugins / "test_good_scheduler.so"));
}

TEST_F(DeploymentConfigTest, RefusedPluginByPathNamesTheTableAndTheReason) {
  std::string m = error_of("[model]\nplugin = 'sim'\n[[engines]]\nscheduler = '" +
                           (kTestPlugins / "test_abi_major.so").string() + "'\n");
  EXPECT_THAT(m, HasSubstr("deploy.toml: engines[0].scheduler.plugin"));
  EXPECT_THAT(m, HasSubstr("test_abi_major.so"));
  EXPECT_THAT(m, HasSubstr("ABI " + std::to_string(HW_ABI_MAJOR + 1) + ".0"));
}

TEST_F(DeploymentConfigTest, LoadDeploymentOfAMissingFile) {
  try {
    load_deployment("/nonexistent/deploy.toml", registry_);
    FAIL() << "no Error";
  } catch (const Error& e) {
    EXPECT_EQ(e.code(), HW_NOT_FOUND);
    EXPECT_THAT(e.what(), HasSubstr("/nonexistent/deploy.toml"));
    EXPECT_THAT(e.what(), HasSubstr("cannot open deployment file (no such file)"));
  }
}

// A FIFO blocked open() for ever and /dev/zero read until memory ran out (helper-150's fuzzer).
TEST_F(DeploymentConfigTest, LoadDeploymentOfAFileThatIsNotARegularOne) {
  const fs::path fifo = fs::temp_directory_path() / ("deploy_fifo_" + std::to_string(::getpid()));
  ASSERT_EQ(::mkfifo(fifo.c_str(), 0600), 0);
  for (const fs::path& file : {fifo, fs::path("/dev/zero")}) {
    try {
      load_deployment(file, registry_);
      ADD_FAILURE() << "no Error for " << file;
    } catch (const Error& e) {
      EXPECT_EQ(e.code(), HW_INVALID_ARGUMENT);
      EXPECT_THAT(e.what(), HasSubstr(file.string() + ": is not a regular file"));
    }
  }
  fs::remove(fifo);
}

// --- [server]: how `headway serve` exposes the deployment ---------------------------------

constexpr std::string_view kSimEngine = R"(
[model]
plugin = "sim"
[[engines]]
)";

TEST_F(DeploymentConfigTest, ServerTableDefaultsWhenAbsent) {
  const DeploymentConfig c = parse(kSimEngine);
  EXPECT_EQ(c.server.host, "127.0.0.1");
  EXPECT_EQ(c.server.http_port, 8000);
  EXPECT_EQ(c.server.grpc_port, 50051);
  EXPECT_EQ(c.server.api_key_env, "");
  EXPECT_EQ(c.server.drain_timeout_s, 30.0);
  EXPECT_EQ(c.server.role, "all");
}

TEST_F(DeploymentConfigTest, ServerTableIsRead) {
  const DeploymentConfig c = parse(std::string(kSimEngine) + R"(
[server]
host = "0.0.0.0"
http_port = 0
grpc_port = 9001
api_key_env = "MY_KEY_2"
drain_timeout_s = 2.5
role = "all"
)");
  EXPECT_EQ(c.server.host, "0.0.0.0");
  EXPECT_EQ(c.server.http_port, 0);
  EXPECT_EQ(c.server.grpc_port, 9001);
  EXPECT_EQ(c.server.api_key_env, "MY_KEY_2");
  EXPECT_EQ(c.server.drain_timeout_s, 2.5);
  // An integer number of seconds is accepted too.
  EXPECT_EQ(
      parse(std::string(kSimEngine) + "[server]\ndrain_timeout_s = 3\n").server.drain_timeout_s,
      3.0);
}

TEST_F(DeploymentConfigTest, ServerTableRefusesBadValuesNamingFileAndKey) {
  const std::string base = std::string(kSimEngine) + "[server]\n";
  EXPECT_THAT(error_of(base + "port = 80\n"),
              AllOf(HasSubstr("deploy.toml: server"), HasSubstr("unknown key 'port'"),
                    HasSubstr("http_port")));
  EXPECT_THAT(error_of(base + "http_port = 70000\n"),
              AllOf(HasSubstr("deploy.toml: server.http_port"), HasSubstr("[0, 65535]")));
  EXPECT_THAT(error_of(base + "grpc_port = -1\n"), HasSubstr("deploy.toml: server.grpc_port"));
  EXPECT_THAT(error_of(base + "host = 5\n"),
              AllOf(HasSubstr("deploy.toml: server.host"), HasSubstr("expected a string")));
  EXPECT_THAT(error_of(base + "host = \"\"\n"), HasSubstr("server.host: must not be empty"));
  EXPECT_THAT(error_of(base + "drain_timeout_s = -1.0\n"),
              AllOf(HasSubstr("server.drain_timeout_s"), HasSubstr("[0, 3600]")));
  EXPECT_THAT(error_of(base + "drain_timeout_s = \"10s\"\n"), HasSubstr("server.drain_timeout_s"));
  EXPECT_THAT(error_of(base + "api_key_env = \"MY-KEY\"\n"),
              AllOf(HasSubstr("server.api_key_env"), HasSubstr("MY-KEY")));
  EXPECT_THAT(error_of(base + "role = \"worker\"\n"),
              AllOf(HasSubstr("server.role"), HasSubstr("unknown role \"worker\"")));
  EXPECT_THAT(error_of("server = 3\n" + std::string(kSimEngine)),
              HasSubstr("deploy.toml: server: expected a table"));
}

TEST_F(DeploymentConfigTest, ServedModelNameIsReadAndChecked) {
  // vLLM's --served-model-name: none unless given; not empty, no control characters.
  EXPECT_EQ(parse(std::string(kSimEngine)).server.served_model_name, "");
  EXPECT_EQ(parse(std::string(kSimEngine) + "[server]\nserved_model_name = \"org/model-7b\"\n")
                .server.served_model_name,
            "org/model-7b");
  EXPECT_THAT(error_of(std::string(kSimEngine) + "[server]\nserved_model_name = \"\"\n"),
              HasSubstr("server.served_model_name (line"));
  EXPECT_THAT(
      error_of(std::string(kSimEngine) + "[server]\nserved_model_name = \"a\\tb\"\n"),
      AllOf(HasSubstr("server.served_model_name (line"), HasSubstr("(byte 0x09) at byte 1")));
  // TOML strings are UTF-8 already; serve --served-model-name's are not checked by a parser.
  EXPECT_THROW(check_served_model_name("model-\xff", "--served-model-name"), Error);
  EXPECT_NO_THROW(check_served_model_name("mod\xc3\xa8le", "--served-model-name"));
}

TEST_F(DeploymentConfigTest, ARouterProcessNamesItsEngineProcesses) {
  const DeploymentConfig c = parse(R"(
[model]
plugin = "sim"
[[engines]]
pool = "short"
address = "127.0.0.1:50061"
[[engines]]
pool = "long"
address = "10.0.0.2:50061"
[router]
plugin = "length"
options = { pools = "short:0,long:1024" }
[server]
role = "router"
load_report_interval_s = 0.2
engine_connect_timeout_s = 5
)");
  EXPECT_EQ(c.server.role, "router");
  ASSERT_EQ(c.engines.size(), 2u);
  EXPECT_EQ(c.engines[0].address, "127.0.0.1:50061");
  EXPECT_EQ(c.engines[1].address, "10.0.0.2:50061");
  EXPECT_EQ(c.engines[1].pool, "long");
  EXPECT_EQ(c.server.load_report_interval_s, 0.2);
  EXPECT_EQ(c.server.engine_connect_timeout_s, 5.0);
  EXPECT_EQ(parse(std::string(kSimEngine) + "[server]\nrole = \"engine\"\n").server.role, "engine");
  // The stats line: every 10 s unless told; 0 turns it off; a negative interval is refused.
  EXPECT_EQ(c.server.log_stats_interval_s, 10.0);
  EXPECT_EQ(parse(std::string(kSimEngine) + "[server]\nlog_stats_interval_s = 0\n")
                .server.log_stats_interval_s,
            0.0);
  EXPECT_THAT(error_of(std::string(kSimEngine) + "[server]\nlog_stats_interval_s = -1\n"),
              HasSubstr("server.log_stats_interval_s"));
  // Tool calls: no parser unless named; a name vLLM's parsers do not include, or one in an engine
  // process (which has no HTTP frontend), is refused with the line.
  EXPECT_EQ(c.server.tool_call_parser, "");
  EXPECT_EQ(parse(std::string(kSimEngine) + "[server]\ntool_call_parser = \"llama3_json\"\n")
                .server.tool_call_parser,
            "llama3_json");
  EXPECT_EQ(parse(std::string(kSimEngine) + "[server]\ntool_call_parser = \"pythonic\"\n")
                .server.tool_call_parser,
            "pythonic");
  EXPECT_EQ(parse(std::string(kSimEngine) + "[server]\ntool_call_parser = \"mistral\"\n")
                .server.tool_call_parser,
            "mistral");
  EXPECT_THAT(error_of(std::string(kSimEngine) + "[server]\ntool_call_parser = \"granite\"\n"),
              AllOf(HasSubstr("server.tool_call_parser (line"), HasSubstr("\"granite\""),
                    HasSubstr("allowed: hermes"), HasSubstr("mistral")));
  EXPECT_THAT(error_of(std::string(kSimEngine) +
                       "[server]\nrole = \"engine\"\ntool_call_parser = \"hermes\"\n"),
              HasSubstr("router's file"));
  EXPECT_EQ(c.server.reasoning_parser, "");
  EXPECT_EQ(parse(std::string(kSimEngine) + "[server]\nreasoning_parser = \"qwen3\"\n")
                .server.reasoning_parser,
            "qwen3");
  EXPECT_THAT(error_of(std::string(kSimEngine) + "[server]\nreasoning_parser = \"o1\"\n"),
              AllOf(HasSubstr("server.reasoning_parser (line"), HasSubstr("allowed: deepseek_r1")));
  EXPECT_THAT(error_of(std::string(kSimEngine) +
                       "[server]\nrole = \"engine\"\nreasoning_parser = \"qwen3\"\n"),
              AllOf(HasSubstr("reasoning_parser"), HasSubstr("router's file")));
  EXPECT_EQ(c.server.responses_store_mb, 256u);
  EXPECT_EQ(parse(std::string(kSimEngine) + "[server]\nresponses_store_mb = 0\n")
                .server.responses_store_mb,
            0u);
  EXPECT_THAT(error_of(std::string(kSimEngine) + "[server]\nresponses_store_mb = -1\n"),
              HasSubstr("server.responses_store_mb: expected an integer in [0, 1048576]"));
  EXPECT_THAT(
      error_of(std::string(kSimEngine) + "[server]\nrole = \"engine\"\nresponses_store_mb = 8\n"),
      AllOf(HasSubstr("responses_store_mb"), HasSubstr("router's file")));
}

TEST_F(DeploymentConfigTest, CorsOriginsAreReadAndCheckedWithTheirLine) {
  const std::string server = std::string(kSimEngine) + "[server]\n";
  const DeploymentConfig none = parse(kSimEngine);
  EXPECT_TRUE(none.server.cors_allowed_origins.empty());
  EXPECT_FALSE(none.server.cors_allow_credentials);
  const DeploymentConfig listed =
      parse(server +
            "cors_allowed_origins = ['https://chat.example.com', 'http://localhost:3000']\n"
            "cors_allow_credentials = true\n");
  EXPECT_EQ(listed.server.cors_allowed_origins,
            (std::vector<std::string>{"https://chat.example.com", "http://localhost:3000"}));
  EXPECT_TRUE(listed.server.cors_allow_credentials);
  EXPECT_EQ(parse(server + "cors_allowed_origins = ['*']\n").server.cors_allowed_origins,
            std::vector<std::string>{"*"});

  EXPECT_THAT(error_of(server + "cors_allowed_origins = 'https://a.example'\n"),
              AllOf(HasSubstr("server.cors_allowed_origins (line"),
                    HasSubstr("expected an array of origins")));
  EXPECT_THAT(error_of(server + "cors_allowed_origins = ['https://a.example', 3]\n"),
              HasSubstr("server.cors_allowed_origins[1] (line 6): expected a string"));
  EXPECT_THAT(error_of(server + "cors_allowed_origins = ['https://a.example/']\n"),
              AllOf(HasSubstr("server.cors_allowed_origins[0] (line 6)"),
                    HasSubstr("trailing slash"), HasSubstr("write \"https://a.example\"")));
  EXPECT_THAT(error_of(server + "cors_allow_credentials = true\ncors_allowed_origins = ['*']\n"),
              AllOf(HasSubstr("server.cors_allow_credentials (line 6)"), HasSubstr("list the")));
  EXPECT_THAT(error_of(server + "cors_allow_credentials = true\n"),
              AllOf(HasSubstr("cors_allow_credentials"), HasSubstr("no origin listed")));
  EXPECT_THAT(error_of(server + "cors_allow_credentials = 1\n"),
              HasSubstr("server.cors_allow_credentials: expected true or false"));
  EXPECT_THAT(error_of(server + "role = 'engine'\ncors_allowed_origins = ['*']\n"),
              AllOf(HasSubstr("cors_allowed_origins (line 7)"), HasSubstr("router's file")));
}

TEST_F(DeploymentConfigTest, ProcessShapeMistakesAreRefusedNamingTheEngine) {
  const std::string model = "[model]\nplugin = 'sim'\n";
  const std::string router = "[server]\nrole = 'router'\n";
  EXPECT_THAT(error_of(model + "[[engines]]\n" + router),
              AllOf(HasSubstr("engine0"), HasSubstr("needs the address")));
  EXPECT_THAT(error_of(model + "[[engines]]\naddress = 'h:1'\n"),
              AllOf(HasSubstr("engine0"), HasSubstr("router processes only")));
  EXPECT_THAT(error_of(model + "[[engines]]\naddress = 'h:1'\ncount = 2\n" + router),
              AllOf(HasSubstr("engines[0].count"), HasSubstr("one [[engines]] table per")));
  EXPECT_THAT(error_of(model + "[[engines]]\naddress = 'h:1'\nscheduler = 'chunked'\n" + router),
              AllOf(HasSubstr("engines[0].scheduler"), HasSubstr("own deployment file")));
  EXPECT_THAT(error_of(model + "[[engines]]\naddress = ''\n" + router),
              HasSubstr("engines[0].address: must not be empty"));
  // Without a port gRPC would dial port 0 and the router find out at its connect timeout.
  for (const char* address : {"127.0.0.1", "h:", "h:0", "h:65536", "h:80x", "[::1]", ":50061"}) {
    EXPECT_THAT(
        error_of(model + "[[engines]]\naddress = '" + address + "'\n" + router),
        AllOf(HasSubstr(std::string("engines[0].address: \"") + address + "\" is not host:port"),
              HasSubstr("1-65535")))
        << address;
  }
  for (const char* address : {"::1", "::1:50061", "fe80::1:50061"}) {
    EXPECT_THAT(error_of(model + "[[engines]]\naddress = '" + address + "'\n" + router),
                HasSubstr("is an IPv6 address without brackets"))
        << address;
  }
  for (const char* address :
       {"h:1", "localhost:50061", "127.0.0.1:65535", "[::1]:50061", "unix:/tmp/engine.sock",
        "unix-abstract:engine", "dns:///localhost:50061", "ipv4:127.0.0.1:50061",
        "ipv6:[::1]:50061"}) {
    EXPECT_EQ(
        parse(model + "[[engines]]\naddress = '" + address + "'\n" + router).engines[0].address,
        address);
  }
  // One process named twice: its load would count twice.
  EXPECT_THAT(error_of(model + "[[engines]]\naddress = 'h:1'\n[[engines]]\naddress = 'h:2'\n" +
                       "[[engines]]\naddress = 'h:1'\n" + router),
              HasSubstr("engine0 and engine2 have the same address h:1"));
  EXPECT_THAT(
      error_of(model + "[[engines]]\naddress = 'h:1'\n[kv_transport]\nplugin = 'host_copy'\n" +
               router),
      AllOf(HasSubstr("kv_transport: not used by a router process"), HasSubstr("shared memory")));
  // Prefill and decode engine processes: disaggregation across processes (KV through shared
  // memory).
  const DeploymentConfig split =
      parse(model +
            "[[engines]]\naddress = 'h:1'\nrole = 'prefill'\n[[engines]]\naddress = "
            "'h:2'\nrole = 'decode'\n[router]\nplugin = 'disaggregated'\n" +
            router);
  EXPECT_EQ(split.engines[0].role, HW_ENGINE_ROLE_PREFILL);
  EXPECT_EQ(split.engines[1].role, HW_ENGINE_ROLE_DECODE);
  EXPECT_THAT(error_of(std::string(kSimEngine) + "[server]\nload_report_interval_s = 0\n"),
              AllOf(HasSubstr("server.load_report_interval_s"), HasSubstr("[0.005, 60]")));
}

TEST_F(DeploymentConfigTest, EngineProcessesChooseHowStagedKvReachesThem) {
  const std::string engine = std::string(kSimEngine) + "[server]\nrole = \"engine\"\n";
  const DeploymentConfig defaults = parse(engine);
  EXPECT_EQ(defaults.server.kv_stage_transport, "auto");
#ifdef NDEBUG
  EXPECT_FALSE(defaults.server.kv_stage_checksums);
#else
  EXPECT_TRUE(defaults.server.kv_stage_checksums);
#endif
  const DeploymentConfig socket =
      parse(engine + "kv_stage_transport = \"socket\"\nkv_stage_checksums = true\n");
  EXPECT_EQ(socket.server.kv_stage_transport, "socket");
  EXPECT_TRUE(socket.server.kv_stage_checksums);
  EXPECT_THAT(error_of(engine + "kv_stage_transport = \"rdma\"\n"),
              AllOf(HasSubstr("server.kv_stage_transport"), HasSubstr("\"rdma\""),
                    HasSubstr("allowed: auto")));
  EXPECT_THAT(error_of(engine + "kv_stage_checksums = 1\n"),
              AllOf(HasSubstr("server.kv_stage_checksums"), HasSubstr("true or false")));
  // Only engine processes receive staged KV.
  EXPECT_THAT(error_of(std::string(kSimEngine) + "[server]\nkv_stage_transport = \"socket\"\n"),
              AllOf(HasSubstr("server.kv_stage_transport"), HasSubstr("only for engine processes"),
                    HasSubstr("role \"all\"")));
  // An engine process has no HTTP frontend: http_port was ignored there without a word.
  EXPECT_THAT(error_of(engine + "http_port = 8001\n"),
              AllOf(HasSubstr("server.http_port (line"),
                    HasSubstr("an engine process (role = \"engine\") has no HTTP frontend")));
}

TEST_F(DeploymentConfigTest, AnApiKeyWrittenInTheFileIsRefused) {
  EXPECT_THAT(
      error_of(std::string(kSimEngine) + "[server]\napi_key = \"sk-secret\"\n"),
      AllOf(HasSubstr("server.api_key"), HasSubstr("api_key_env"), Not(HasSubstr("sk-secret"))));
}

}  // namespace
}  // namespace headway::core
