// LocalGenerationService over the real CPU model on the wall clock: streaming, validation,
// aborts, stop strings, queue bounds, drain, and that a request leaves nothing behind (KV blocks,
// bookkeeping) when it finishes.
#include <gtest/gtest.h>
#include <headway/core/error.h>
#include <headway/core/tokenizer.h>
#include <headway/serving/chat_template.h>
#include <headway/serving/local_generation_service.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <filesystem>
#include <fstream>
#include <map>
#include <nlohmann/json.hpp>
#include <random>
#include <string_view>
#include <thread>
#include <utility>
#include <vector>

#include "owning_decoder.h"
#include "request_admission.h"
#include "request_validation.h"
#include "rows_on_request_rule.h"
#include "service_fixture.h"

namespace headway::serving {
namespace {

using test::collect;
using test::text_request;
using test::tiny_deployment;
using test::TinyCheckpoint;

const std::string kOneEngine =
    "[[engines]]\nscheduler = { plugin = \"chunked\", options = { max_num_batched_tokens = 256, "
    "max_num_seqs = 16 } }\n";

class ServiceTest : public ::testing::Test {
 protected:
  static TinyCheckpoint& checkpoint() { return test::shared_tiny_checkpoint(); }
};

TEST_F(ServiceTest, StreamsTokensAndTextOfATextPrompt) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  auto stream = service.submit(text_request("hello", 8));
  const test::Collected out = collect(*stream);
  EXPECT_EQ(out.finish, Finish::kLength);
  EXPECT_EQ(out.ids.size(), 8u);
  EXPECT_EQ(out.usage.prompt_tokens, 6u);  // BOS + 5 bytes
  EXPECT_EQ(out.usage.completion_tokens, 8u);
  EXPECT_GE(out.timings.e2e_seconds, out.timings.ttft_seconds);
  EXPECT_GE(out.timings.ttft_seconds, out.timings.queue_seconds);
  EXPECT_GE(out.timings.queue_seconds, 0.0);
  EXPECT_FALSE(stream->id().empty());
}

// The usage says how much of the prompt the engine found in its prefix cache: nothing the first
// time, every full block but the one with the last token (always computed) the second time.
TEST_F(ServiceTest, UsageCountsThePromptTokensFoundInThePrefixCache) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  const std::string prompt(100, 'q');  // BOS + 100 bytes: 101 tokens, six full blocks of 16
  const test::Collected first = collect(*service.submit(text_request(prompt, 4)));
  const test::Collected second = collect(*service.submit(text_request(prompt, 4)));
  EXPECT_EQ(first.usage.prompt_tokens, 101u);
  EXPECT_EQ(first.usage.cached_prompt_tokens, 0u);
  EXPECT_EQ(second.usage.prompt_tokens, 101u);
  EXPECT_EQ(second.usage.cached_prompt_tokens, 96u);
  EXPECT_EQ(second.ids, first.ids);
}

// Behind prefix_aware (ABI 1.8) the service hands the router the hashes of each prompt's
// beginning: a second prompt that begins as the first goes to the first's engine and finds its
// blocks cached. Behind least_loaded, the same two requests alternate between the idle engines
// (round-robin ties) and the second computes everything again.
TEST_F(ServiceTest, APromptThatBeginsAsAnEarlierOneGoesWhereItsBeginningIsCached) {
  const std::string two_engines = "[[engines]]\ncount = 2\n";
  const std::string document(200, 'd');  // BOS + 200 bytes: three whole pieces of 64 ids
  for (const char* router : {"prefix_aware", "least_loaded"}) {
    SCOPED_TRACE(router);
    LocalGenerationService service(tiny_deployment(
        checkpoint(), two_engines, std::string("[router]\nplugin = \"") + router + "\"\n"));
    const test::Collected first = collect(*service.submit(text_request(document + " first?", 2)));
    const test::Collected second = collect(*service.submit(text_request(document + " other?", 2)));
    ASSERT_EQ(first.finish, Finish::kLength) << first.error;
    ASSERT_EQ(second.finish, Finish::kLength) << second.error;
    const std::string metrics = service.metrics_text();
    const double on_engine0 =
        test::sum_of(metrics, "headway_request_success_total", "engine=\"0\"");
    if (std::string_view(router) == "prefix_aware") {
      EXPECT_EQ(on_engine0, 2.0) << metrics;
      EXPECT_EQ(second.usage.cached_prompt_tokens, 192u);  // its 12 whole blocks of 16 in common
    } else {
      EXPECT_EQ(on_engine0, 1.0) << metrics;
      EXPECT_EQ(second.usage.cached_prompt_tokens, 0u);
    }
  }
}

// With prefix caching off on every engine no engine holds a beginning: the service hands the
// router no hashes, and prefix_aware places the same two requests as least_loaded does (one on
// each idle engine) instead of keeping the second with a beginning nobody cached.
TEST_F(ServiceTest, WithPrefixCachingOffEverywhereTheRouterIsGivenNoBeginnings) {
  const std::string two_engines = "[[engines]]\ncount = 2\nprefix_caching = false\n";
  const std::string document(200, 'd');
  LocalGenerationService service(
      tiny_deployment(checkpoint(), two_engines, "[router]\nplugin = \"prefix_aware\"\n"));
  const test::Collected first = collect(*service.submit(text_request(document + " first?", 2)));
  const test::Collected second = collect(*service.submit(text_request(document + " other?", 2)));
  ASSERT_EQ(first.finish, Finish::kLength) << first.error;
  ASSERT_EQ(second.finish, Finish::kLength) << second.error;
  const std::string metrics = service.metrics_text();
  EXPECT_EQ(test::sum_of(metrics, "headway_request_success_total", "engine=\"0\""), 1.0) << metrics;
  EXPECT_EQ(second.usage.cached_prompt_tokens, 0u);
}

// tokenize() gives the ids submit() runs (the usage's prompt_tokens is their count), without
// the context-length check; detokenize() gives the text back.
TEST_F(ServiceTest, TokenizeGivesThePromptSubmitRunsAndDetokenizeItsText) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  GenerateInput input = text_request("hello", 1);
  const std::vector<int32_t> ids = service.tokenize(input);
  EXPECT_EQ(ids, (std::vector<int32_t>{256, 'h', 'e', 'l', 'l', 'o'}));  // BOS, then bytes
  EXPECT_EQ(collect(*service.submit(input)).usage.prompt_tokens, ids.size());
  EXPECT_EQ(service.detokenize("", ids), "hello");  // BOS left out, as in generated text

  GenerateInput chat;
  chat.prompt_kind = GenerateInput::PromptKind::kChat;
  chat.messages = {{"user", "hi"}};
  const std::vector<int32_t> rendered = service.tokenize(chat);
  ASSERT_FALSE(rendered.empty());
  EXPECT_EQ(std::count(rendered.begin(), rendered.end(), 256), 1);
  EXPECT_EQ(rendered.front(), 256);

  // Without the generation prompt the prompt ends with the last turn; continuing the final message
  // ends it inside that message (the built-in Llama 3 template, byte tokenizer: text in, text out).
  chat.messages = {{"user", "hi"}, {"assistant", "The answer is "}};
  chat.add_generation_prompt = false;
  const std::string ended = service.detokenize("", service.tokenize(chat));
  EXPECT_TRUE(ended.ends_with("The answer is<|eot_id|>")) << ended;
  chat.continue_final_message = true;
  const std::string continued = service.detokenize("", service.tokenize(chat));
  EXPECT_TRUE(continued.ends_with("<|start_header_id|>assistant<|end_header_id|>\n\nThe answer is"))
      << continued;
  chat.add_generation_prompt = true;  // both: refused, naming the field
  try {
    service.tokenize(chat);
    ADD_FAILURE() << "no refusal";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.param(), "continue_final_message");
  }

  // Longer than the context: counted all the same (that is what a client asks it for).
  EXPECT_EQ(service.tokenize(text_request(std::string(2000, 'x'), 1)).size(), 2001u);
}

TEST_F(ServiceTest, TokenizeAndDetokenizeRefuseNamingTheField) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  const auto refusal = [](const auto& call) -> std::pair<ErrorCode, std::string> {
    try {
      call();
    } catch (const ServiceError& e) {
      return {e.code(), e.param()};
    }
    return {ErrorCode::kInternal, "no refusal"};
  };
  GenerateInput ids;
  ids.prompt_kind = GenerateInput::PromptKind::kTokenIds;
  ids.prompt_ids = {1, 320};  // the tiny vocabulary has 320 ids
  EXPECT_EQ(refusal([&] { service.tokenize(ids); }),
            std::pair(ErrorCode::kInvalidArgument, std::string("prompt[1]")));
  GenerateInput other = text_request("x", 1);
  other.model = "another";
  EXPECT_EQ(refusal([&] { service.tokenize(other); }),
            std::pair(ErrorCode::kNotFound, std::string("model")));
  const std::vector<int32_t> outside = {5, -1};
  EXPECT_EQ(refusal([&] { service.detokenize("", outside); }),
            std::pair(ErrorCode::kInvalidArgument, std::string("tokens[1]")));
  EXPECT_EQ(refusal([&] { service.detokenize("another", std::span(outside).first(1)); }),
            std::pair(ErrorCode::kNotFound, std::string("model")));
}

TEST_F(ServiceTest, GreedyTokensAreTheSameForTextAndTheEquivalentTokenIds) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  const test::Collected text = collect(*service.submit(text_request("abc", 6)));
  GenerateInput ids;
  ids.prompt_kind = GenerateInput::PromptKind::kTokenIds;
  ids.prompt_ids = {256, 'a', 'b', 'c'};  // BOS then bytes: the byte tokenizer's encoding
  ids.max_tokens = 6;
  ids.sampling.ignore_eos = true;
  const test::Collected direct = collect(*service.submit(ids));
  EXPECT_EQ(text.ids, direct.ids);
}

TEST_F(ServiceTest, ChatMessagesAreRenderedWithTheTemplateAndStartWithOneBos) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  const std::vector<ChatMessage> messages = {{"system", "Be brief."}, {"user", "Hi there"}};
  // What the service should send the engine: the checkpoint's template, encoded, one BOS first.
  const auto tokenizer = core::Tokenizer::load(checkpoint().path / "tiny");
  const auto chat_template = ChatTemplate::load(checkpoint().path / "tiny", *tokenizer);
  std::vector<int32_t> expected = tokenizer->encode(chat_template->render(messages, true));
  if (expected.empty() || expected.front() != tokenizer->bos()) {
    expected.insert(expected.begin(), tokenizer->bos());
  }

  GenerateInput chat;
  chat.prompt_kind = GenerateInput::PromptKind::kChat;
  chat.messages = messages;
  chat.max_tokens = 5;
  chat.sampling.ignore_eos = true;
  const test::Collected from_chat = collect(*service.submit(chat));
  GenerateInput ids;
  ids.prompt_kind = GenerateInput::PromptKind::kTokenIds;
  ids.prompt_ids = expected;
  ids.max_tokens = 5;
  ids.sampling.ignore_eos = true;
  const test::Collected from_ids = collect(*service.submit(ids));
  EXPECT_EQ(from_chat.finish, Finish::kLength);
  EXPECT_EQ(from_chat.usage.prompt_tokens, expected.size());
  EXPECT_EQ(from_chat.ids, from_ids.ids);
}

// A request whose answer is split at "</think>" (GenerateInput::reasoning_end) learns from its
// stream where the prompt left the thinking: a template that opens it (Qwen3-Thinking-2507's ends
// with "<think>\n") or closes it (Qwen3's with enable_thinking off).
TEST_F(ServiceTest, TheStreamSaysWhereThePromptLeftTheThinking) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  const auto where = [&](const std::string& prompt, const std::string& reasoning_end) {
    GenerateInput input = text_request(prompt, 1);
    input.reasoning_end = reasoning_end;
    const std::shared_ptr<RequestStream> stream = service.submit(std::move(input));
    collect(*stream);
    return stream->prompt_reasoning();
  };
  EXPECT_EQ(where("Capital?\n<think>\n", "</think>"), PromptReasoning::kOpen);
  EXPECT_EQ(where("Capital?\n<think>\n\n</think>\n\n", "</think>"), PromptReasoning::kEnded);
  EXPECT_EQ(where("Capital?\n", "</think>"), PromptReasoning::kNone);
  EXPECT_EQ(where("Capital?\n<think>\n", ""), PromptReasoning::kNone);  // not asked
}

// The router checks its engine processes' vocabulary against the checkpoint's: a vocab_size
// written as a float (300.0) is read as the model plugins read it (it was taken for none, and the
// check skipped).
TEST_F(ServiceTest, TheCheckpointsVocabSizeIsReadWrittenAsAFloat) {
  const std::filesystem::path dir = checkpoint().path / "float_vocab";
  std::filesystem::create_directories(dir);
  std::filesystem::copy(checkpoint().path / "tiny", dir / "tiny",
                        std::filesystem::copy_options::recursive);
  nlohmann::json config = nlohmann::json::parse(std::ifstream(dir / "tiny" / "config.json"));
  const uint32_t vocab = config.at("vocab_size").get<uint32_t>();
  config["vocab_size"] = static_cast<double>(vocab);
  std::ofstream(dir / "tiny" / "config.json", std::ios::trunc) << config.dump();
  const core::DeploymentConfig deployment = core::parse_deployment(
      "name = \"float\"\n[model]\nplugin = \"cpu\"\noptions = { path = \"tiny\" }\n" + kOneEngine,
      dir / "deploy.toml", headway::test::built_plugins());
  EXPECT_EQ(checkpoint_vocab_size(deployment), vocab);
  config["vocab_size"] = vocab + 0.5;
  std::ofstream(dir / "tiny" / "config.json", std::ios::trunc) << config.dump();
  EXPECT_EQ(checkpoint_vocab_size(deployment), std::nullopt);
  std::filesystem::remove_all(dir);
}

TEST_F(ServiceTest, ModelInfoNamesTheCheckpoint) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  const ModelSummary model = service.model_info();
  EXPECT_EQ(model.name, "tiny");
  EXPECT_EQ(model.max_model_len, 1024u);
  EXPECT_EQ(model.vocab, 320u);
  EXPECT_EQ(model.tokenizer, "byte");
  const ClusterSummary cluster = service.cluster_info();
  EXPECT_EQ(cluster.deployment, "svc-test");
  EXPECT_EQ(cluster.router, "single");
  ASSERT_EQ(cluster.engines.size(), 1u);
  EXPECT_TRUE(cluster.engines[0].alive);
  EXPECT_GT(cluster.engines[0].kv_blocks_total, 0u);
  // Drawn once per service (a router tells a restarted process by it): the same at every call, and
  // another service's differs.
  EXPECT_NE(cluster.incarnation, 0u);
  EXPECT_EQ(service.cluster_info().incarnation, cluster.incarnation);
  EXPECT_NE(
      LocalGenerationService(tiny_deployment(checkpoint(), kOneEngine)).cluster_info().incarnation,
      cluster.incarnation);
  const HealthSummary health = service.health();
  EXPECT_TRUE(health.serving);
  EXPECT_EQ(health.engines_alive, 1u);
  EXPECT_EQ(health.engines_total, 1u);
}

// The name clients send: the checkpoint directory's however its path is written (a user's
// trailing slash served the model as ""), or the one [server] served_model_name gives, as vLLM's
// --served-model-name (clients written for "meta-llama/..." keep working).
TEST_F(ServiceTest, TheModelIsNamedAfterItsDirectoryOrAsTheServerSays) {
  const auto name_for = [&](const std::string& path, const std::string& server = "") {
    const std::string text =
        "name = \"svc-test\"\n[model]\nplugin = \"cpu\"\noptions = { path = \"" + path + "\" }\n" +
        kOneEngine + server;
    return default_model_name(core::parse_deployment(text, checkpoint().path / "deploy.toml",
                                                     headway::test::built_plugins()));
  };
  for (const char* path : {"tiny", "tiny/", "./tiny/", "tiny/.", "tiny//"}) {
    EXPECT_EQ(name_for(path), "tiny") << path;
  }
  EXPECT_EQ(name_for("tiny/", "[server]\nserved_model_name = \"meta-llama/Llama-3.1-8B\"\n"),
            "meta-llama/Llama-3.1-8B");

  core::DeploymentConfig deployment = tiny_deployment(checkpoint(), kOneEngine);
  deployment.server.served_model_name = "meta-llama/Llama-3.1-8B";
  LocalGenerationService service(std::move(deployment));
  EXPECT_EQ(service.model_info().name, "meta-llama/Llama-3.1-8B");
  GenerateInput named = text_request("ab", 1);
  named.model = "meta-llama/Llama-3.1-8B";
  EXPECT_EQ(collect(*service.submit(named)).finish, Finish::kLength);
  named.model = "tiny";  // the directory's name is no longer the model's
  try {
    service.submit(named);
    ADD_FAILURE() << "the directory's name was taken for a model served as another";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kNotFound);
    EXPECT_NE(std::string(e.what()).find("meta-llama/Llama-3.1-8B"), std::string::npos) << e.what();
  }
}

struct BadInput {
  const char* what;
  std::function<void(GenerateInput&)> change;
  ErrorCode code;
  const char* param;
};

TEST_F(ServiceTest, RefusesInvalidRequestsNamingTheField) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  const std::vector<BadInput> cases = {
      {"unknown model", [](GenerateInput& in) { in.model = "gpt-9"; }, ErrorCode::kNotFound,
       "model"},
      {"empty text", [](GenerateInput& in) { in.prompt_text.clear(); }, ErrorCode::kInvalidArgument,
       "prompt"},
      {"two prompt forms",
       [](GenerateInput& in) {
         in.prompt_ids = {1, 2};
       },
       ErrorCode::kInvalidArgument, "prompt"},
      {"empty chat",
       [](GenerateInput& in) {
         in.prompt_kind = GenerateInput::PromptKind::kChat;
         in.prompt_text.clear();
       },
       ErrorCode::kInvalidArgument, "messages"},
      {"bad role",
       [](GenerateInput& in) {
         in.prompt_kind = GenerateInput::PromptKind::kChat;
         in.prompt_text.clear();
         in.messages = {{"user", "hi"}, {"robot", "beep"}};
       },
       ErrorCode::kInvalidArgument, "messages[1].role"},
      // Tools are the chat template's: with a text prompt nothing would render them.
      {"tools with a text prompt", [](GenerateInput& in) { in.tools_json = "[]"; },
       ErrorCode::kInvalidArgument, "tools"},
      // The template gets them: what it cannot read is refused naming them.
      {"tools not an array",
       [](GenerateInput& in) {
         in.prompt_kind = GenerateInput::PromptKind::kChat;
         in.prompt_text.clear();
         in.messages = {{"user", "hi"}};
         in.tools_json = R"({"name": "f"})";
       },
       ErrorCode::kInvalidArgument, "tools"},
      {"template kwargs with a text prompt",
       [](GenerateInput& in) { in.template_kwargs_json = "{}"; }, ErrorCode::kInvalidArgument,
       "chat_template_kwargs"},
      // The template gets them: one that would replace the messages is refused naming it.
      {"template kwargs naming messages",
       [](GenerateInput& in) {
         in.prompt_kind = GenerateInput::PromptKind::kChat;
         in.prompt_text.clear();
         in.messages = {{"user", "hi"}};
         in.template_kwargs_json = R"({"messages": []})";
       },
       ErrorCode::kInvalidArgument, "chat_template_kwargs.messages"},
      {"max_tokens 0", [](GenerateInput& in) { in.max_tokens = 0; }, ErrorCode::kInvalidArgument,
       "max_tokens"},
      {"too long", [](GenerateInput& in) { in.max_tokens = 1022; }, ErrorCode::kInvalidArgument,
       "max_tokens"},
      // Named as the client sent it (OpenAI chat's max_completion_tokens).
      {"too long, as max_completion_tokens",
       [](GenerateInput& in) {
         in.max_tokens = 1022;
         in.max_tokens_field = "max_completion_tokens";
       },
       ErrorCode::kInvalidArgument, "max_completion_tokens"},
      // A prompt that fills the context is the prompt's fault, also when the client set no
      // max_tokens (OpenAI chat) and the service chose the limit.
      {"prompt fills the context",
       [](GenerateInput& in) {
         in.prompt_kind = GenerateInput::PromptKind::kTokenIds;
         in.prompt_text.clear();
         in.prompt_ids.assign(1024, 7);
       },
       ErrorCode::kInvalidArgument, "prompt"},
      {"chat longer than the context, no max_tokens",
       [](GenerateInput& in) {
         in.prompt_kind = GenerateInput::PromptKind::kChat;
         in.prompt_text.clear();
         in.messages = {{"user", std::string(3000, 'a')}};
         in.max_tokens_to_context_end = true;
       },
       ErrorCode::kInvalidArgument, "messages"},
      {"negative temperature", [](GenerateInput& in) { in.sampling.temperature = -0.5f; },
       ErrorCode::kInvalidArgument, "temperature"},
      {"NaN temperature", [](GenerateInput& in) { in.sampling.temperature = NAN; },
       ErrorCode::kInvalidArgument, "temperature"},
      {"top_p 0", [](GenerateInput& in) { in.sampling.top_p = 0.0f; }, ErrorCode::kInvalidArgument,
       "top_p"},
      {"top_p above 1", [](GenerateInput& in) { in.sampling.top_p = 1.5f; },
       ErrorCode::kInvalidArgument, "top_p"},
      {"min_p above 1", [](GenerateInput& in) { in.sampling.min_p = 2.0f; },
       ErrorCode::kInvalidArgument, "min_p"},
      {"empty stop string",
       [](GenerateInput& in) {
         in.stop = {"x", ""};
       },
       ErrorCode::kInvalidArgument, "stop[1]"},
      {"five stop strings",
       [](GenerateInput& in) {
         in.stop = {"a", "b", "c", "d", "e"};
       },
       ErrorCode::kInvalidArgument, "stop"},
      {"stop token outside vocab", [](GenerateInput& in) { in.sampling.stop_token_ids = {5000}; },
       ErrorCode::kInvalidArgument, "stop_token_ids[0]"},
      {"prompt id outside vocab",
       [](GenerateInput& in) {
         in.prompt_kind = GenerateInput::PromptKind::kTokenIds;
         in.prompt_text.clear();
         in.prompt_ids = {1, -3};
       },
       ErrorCode::kInvalidArgument, "prompt[1]"},
      {"bad request class", [](GenerateInput& in) { in.request_class = "has space"; },
       ErrorCode::kInvalidArgument, "request_class"},
      {"request id too long", [](GenerateInput& in) { in.request_id = std::string(257, 'r'); },
       ErrorCode::kInvalidArgument, "request_id"},
      {"request id with a line break", [](GenerateInput& in) { in.request_id = "a\nb"; },
       ErrorCode::kInvalidArgument, "request_id"},
      {"presence_penalty above 2", [](GenerateInput& in) { in.sampling.presence_penalty = 2.5f; },
       ErrorCode::kInvalidArgument, "presence_penalty"},
      {"NaN frequency_penalty", [](GenerateInput& in) { in.sampling.frequency_penalty = NAN; },
       ErrorCode::kInvalidArgument, "frequency_penalty"},
      {"repetition_penalty 0", [](GenerateInput& in) { in.sampling.repetition_penalty = 0.0f; },
       ErrorCode::kInvalidArgument, "repetition_penalty"},
      {"logit_bias outside vocab",
       [](GenerateInput& in) {
         in.sampling.logit_bias = {{3, 1.0f}, {4096, 1.0f}};
       },
       ErrorCode::kInvalidArgument, "logit_bias.4096"},
      {"logit_bias above 100",
       [](GenerateInput& in) {
         in.sampling.logit_bias = {{3, 101.0f}};
       },
       ErrorCode::kInvalidArgument, "logit_bias.3"},
      {"logit_bias names an id twice",
       [](GenerateInput& in) {
         in.sampling.logit_bias = {{9, 1.0f}, {3, 1.0f}, {9, 2.0f}};
       },
       ErrorCode::kInvalidArgument, "logit_bias.9"},
      {"min_tokens above max_tokens", [](GenerateInput& in) { in.sampling.min_tokens = 5; },
       ErrorCode::kInvalidArgument, "min_tokens"},
  };
  for (const BadInput& c : cases) {
    GenerateInput input = text_request("hi", 4);
    c.change(input);
    try {
      service.submit(input);
      ADD_FAILURE() << c.what << ": accepted";
    } catch (const ServiceError& e) {
      EXPECT_EQ(e.code(), c.code) << c.what << ": " << e.what();
      EXPECT_EQ(e.param(), c.param) << c.what << ": " << e.what();
      EXPECT_FALSE(std::string(e.what()).empty());
    }
  }
  EXPECT_EQ(service.in_flight(), 0u);
  // Each refusal is counted.
  EXPECT_NE(service.metrics_text().find("headway_request_rejected_total{reason=\"invalid\"} " +
                                        std::to_string(cases.size()) + "\n"),
            std::string::npos);
}

// A client may send megabytes in any string field: the refusal repeats its start only, so that
// it stays readable and fits a gRPC status (a 5 MB model name used to make the client see
// RESOURCE_EXHAUSTED for its own metadata limit instead of NOT_FOUND).
TEST_F(ServiceTest, ARefusalRepeatsOnlyTheStartOfALongInput) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  const std::string huge(5 << 20, 'x');
  const std::vector<std::pair<const char*, void (*)(GenerateInput&, const std::string&)>> cases = {
      {"model", [](GenerateInput& in, const std::string& v) { in.model = v; }},
      {"request_class", [](GenerateInput& in, const std::string& v) { in.request_class = v; }},
      {"request_id", [](GenerateInput& in, const std::string& v) { in.request_id = v; }},
      {"messages[0].role",
       [](GenerateInput& in, const std::string& v) {
         in.prompt_kind = GenerateInput::PromptKind::kChat;
         in.prompt_text.clear();
         in.messages = {{v, "hi"}};
       }},
  };
  for (const auto& [field, set] : cases) {
    GenerateInput input = text_request("hi", 4);
    set(input, huge);
    try {
      service.submit(input);
      ADD_FAILURE() << field << ": accepted";
    } catch (const ServiceError& e) {
      EXPECT_EQ(e.param(), field);
      const std::string message = e.what();
      EXPECT_LT(message.size(), 300u) << field << ": " << message.substr(0, 300);
      EXPECT_NE(message.find("(5242880 bytes)"), std::string::npos) << field << ": " << message;
    }
  }
}

// The longest id a client may choose is taken as it is.
TEST_F(ServiceTest, ARequestIdOfTheMaximumLengthIsTaken) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  GenerateInput input = text_request("hi", 2);
  input.request_id = std::string(256, '~');
  auto stream = service.submit(input);
  EXPECT_EQ(stream->id(), input.request_id);
  EXPECT_EQ(collect(*stream).finish, Finish::kLength);
}

TEST_F(ServiceTest, ADuplicateIdInFlightIsRefused) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  GenerateInput first = text_request("hi", 500);
  first.request_id = "same";
  auto stream = service.submit(first);
  GenerateInput second = text_request("hi", 4);
  second.request_id = "same";
  try {
    service.submit(second);
    ADD_FAILURE() << "duplicate accepted";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.param(), "request_id");
  }
  EXPECT_TRUE(service.abort("same"));
  EXPECT_EQ(collect(*stream).finish, Finish::kAbort);
}

// As in vLLM, an aborted request's id is free at once: a client that cancels and retries with the
// same id is not refused while the engine still lets go of the old request, and a later abort of
// the retry's stream reaches the retry, while one of the old stream reaches nothing.
TEST_F(ServiceTest, AnAbortedIdCanBeReusedAtOnce) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  GenerateInput first = text_request("hi", 500);
  first.request_id = "retried";
  auto aborted = service.submit(first);
  ASSERT_TRUE(service.abort("retried"));
  EXPECT_FALSE(service.abort("retried"));  // once is enough: the id names nothing now

  GenerateInput retry = text_request("hi", 500);
  retry.request_id = "retried";
  auto second = service.submit(retry);  // threw "already in flight" before
  // The old request's handler, aborting what it holds, does not reach the retry.
  EXPECT_FALSE(service.abort(*aborted));
  EXPECT_EQ(collect(*aborted).finish, Finish::kAbort);
  ASSERT_TRUE(service.abort(*second));
  EXPECT_EQ(collect(*second).finish, Finish::kAbort);
  EXPECT_FALSE(service.abort("retried"));

  GenerateInput third = text_request("hi", 4);
  third.request_id = "retried";
  EXPECT_EQ(collect(*service.submit(third)).finish, Finish::kLength);
  test::wait_idle(service);
  EXPECT_EQ(service.in_flight(), 0u);
}

TEST_F(ServiceTest, GeneratedIdsWithoutAKvSourceAreRefused) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  GenerateInput input = text_request("hi", 8);
  input.generated_ids = {65, 66};
  try {
    service.submit(input);
    ADD_FAILURE() << "generated_ids without kv_source accepted (and silently ignored)";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.param(), "generated_ids");
  }
}

// truncate_prompt_tokens keeps the prompt's last N tokens, as vLLM: the request generates what
// the shortened prompt generates and counts N prompt tokens. A text prompt's BOS stays first (so
// "abcdefghij" kept to 4 is "hij" after its BOS); token ids are cut as given.
TEST_F(ServiceTest, TruncatePromptTokensKeepsTheLastTokens) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  const auto greedy = [](GenerateInput input) {
    input.sampling.temperature = 0.0f;
    return input;
  };
  GenerateInput long_text = greedy(text_request("abcdefghij", 6));
  long_text.truncate_prompt_tokens = 4;
  const test::Collected cut = collect(*service.submit(long_text));
  const test::Collected short_text = collect(*service.submit(greedy(text_request("hij", 6))));
  ASSERT_EQ(cut.finish, Finish::kLength) << cut.error;
  EXPECT_EQ(cut.usage.prompt_tokens, 4u);
  EXPECT_EQ(short_text.usage.prompt_tokens, 4u);  // BOS + 3 bytes
  EXPECT_EQ(cut.ids, short_text.ids);

  GenerateInput ids = greedy(text_request("", 6));
  ids.prompt_kind = GenerateInput::PromptKind::kTokenIds;
  for (int32_t id = 40; id < 60; ++id) ids.prompt_ids.push_back(id);
  GenerateInput last_five = ids;
  last_five.prompt_ids.assign(ids.prompt_ids.end() - 5, ids.prompt_ids.end());
  ids.truncate_prompt_tokens = 5;
  const test::Collected cut_ids = collect(*service.submit(ids));
  EXPECT_EQ(cut_ids.usage.prompt_tokens, 5u);
  EXPECT_EQ(cut_ids.ids, collect(*service.submit(last_five)).ids);

  // -1 is max_model_len (1024): a shorter prompt is kept whole.
  GenerateInput whole = greedy(text_request("hij", 6));
  whole.truncate_prompt_tokens = -1;
  EXPECT_EQ(collect(*service.submit(whole)).ids, short_text.ids);
}

TEST_F(ServiceTest, TruncatePromptTokensOutsideItsRangeIsRefusedNamingIt) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  for (const int32_t bad : {0, -2, 1025}) {
    GenerateInput input = text_request("x", 2);
    input.truncate_prompt_tokens = bad;
    try {
      service.submit(input);
      ADD_FAILURE() << "accepted truncate_prompt_tokens " << bad;
    } catch (const ServiceError& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
      EXPECT_EQ(e.param(), "truncate_prompt_tokens");
      EXPECT_NE(std::string(e.what()).find("maximum context length, 1024"), std::string::npos)
          << e.what();
    }
  }
  // -1 cuts a prompt over the context to max_model_len, which leaves no room for a completion: the
  // prompt is refused (vLLM does the same).
  GenerateInput over = text_request(std::string(2000, 'o'), 2);
  over.truncate_prompt_tokens = -1;
  try {
    service.submit(over);
    ADD_FAILURE() << "accepted a prompt of max_model_len tokens";
  } catch (const ServiceError& e) {
    EXPECT_NE(std::string(e.what()).find("the prompt is 1024 tokens"), std::string::npos)
        << e.what();
  }
}

TEST_F(ServiceTest, AbortFreesTheKvBlocksAndFinishesTheStream) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  const uint32_t total = service.cluster_info().engines[0].kv_blocks_total;
  GenerateInput input = text_request(std::string(300, 'x'), 600);
  input.request_id = "long-one";
  auto stream = service.submit(input);
  StreamChunk chunk;
  while (!stream->next(chunk, std::chrono::milliseconds(100))) {
  }
  EXPECT_TRUE(service.abort("long-one"));
  const test::Collected rest = collect(*stream);
  EXPECT_EQ(rest.finish, Finish::kAbort);
  EXPECT_EQ(rest.error, "");  // the client asked: nothing to explain
  test::wait_idle(service);
  EXPECT_FALSE(service.abort("long-one"));
  EXPECT_EQ(service.cluster_info().engines[0].kv_blocks_free, total);
  EXPECT_FALSE(service.abort("never-was"));
}

TEST_F(ServiceTest, AStopStringEndsTheRequestUpstream) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  const uint32_t total = service.cluster_info().engines[0].kv_blocks_total;
  // Random weights: learn the (seeded, so repeatable) output first, then stop at a character of
  // it. Sampling at temperature 1 spreads over the byte vocabulary, so ASCII shows up.
  GenerateInput probe = text_request("stop test", 40);
  probe.sampling.temperature = 1.0f;
  probe.sampling.seed = 42;
  const test::Collected free_run = collect(*service.submit(probe));
  size_t at = free_run.text.find_first_of(
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 !#$%&()*+,-./:;<=>?@");
  if (at == std::string::npos)
    GTEST_SKIP() << "the sampled output has no ASCII character to stop at";
  GenerateInput input = probe;
  input.stop = {free_run.text.substr(at, 1)};
  const test::Collected stopped = collect(*service.submit(input));
  EXPECT_EQ(stopped.finish, Finish::kStop);
  EXPECT_EQ(stopped.stop_reason, StopReason(free_run.text.substr(at, 1)));  // vLLM's stop_reason
  EXPECT_EQ(stopped.text, free_run.text.substr(0, at));
  test::wait_idle(service);
  EXPECT_EQ(service.cluster_info().engines[0].kv_blocks_free, total);
  // Counted as a stop, never as an abort. (Text is decoded on the consumer's thread, so the engine
  // may have generated the remaining tokens and finished by length before the consumer saw the stop
  // string: the client still gets finish reason stop, the metrics then count length.)
  const std::string metrics = service.metrics_text();
  const bool stop = metrics.find("request_class=\"completion\",finished_reason=\"stop\"} 1\n") !=
                    std::string::npos;
  const bool length =
      metrics.find("request_class=\"completion\",finished_reason=\"length\"} 2\n") !=
      std::string::npos;
  EXPECT_TRUE(stop || length) << metrics;
  EXPECT_EQ(metrics.find("finished_reason=\"abort\"} 1"), std::string::npos) << metrics;
  // vLLM's include_stop_str_in_output: the same stop, with its text (after the
  // metrics above, which count two requests).
  input.include_stop_str_in_output = true;
  const test::Collected kept = collect(*service.submit(input));
  EXPECT_EQ(kept.finish, Finish::kStop);
  EXPECT_EQ(kept.text, free_run.text.substr(0, at + 1));
}

// Repeated stop token ids are dropped (each would cost the engine a comparison per generated
// token); more distinct ids than kMaxStopTokenIds are refused naming the field.
TEST(StopTokenIds, RepeatsAreDroppedAndTooManyRefused) {
  std::vector<int32_t> ids(100000, 7);
  ids.push_back(3);
  dedupe_stop_token_ids(ids);
  EXPECT_EQ(ids, (std::vector<int32_t>{3, 7}));
  std::vector<int32_t> most(kMaxStopTokenIds);
  for (size_t i = 0; i < most.size(); ++i) most[i] = static_cast<int32_t>(i);
  EXPECT_NO_THROW(dedupe_stop_token_ids(most));
  most.push_back(static_cast<int32_t>(kMaxStopTokenIds));
  // The checkpoint's end tokens, which the admission adds, do not count against the client.
  const std::vector<int32_t> end_tokens = {static_cast<int32_t>(kMaxStopTokenIds), 1 << 20};
  EXPECT_NO_THROW(dedupe_stop_token_ids(most, end_tokens));
  try {
    dedupe_stop_token_ids(most);
    ADD_FAILURE() << "accepted " << most.size() << " distinct stop token ids";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.param(), "stop_token_ids");
  }
}

// A stop token id ends the request with its id among the generated ones but without its text,
// as vLLM returns it.
TEST_F(ServiceTest, AStopTokenIdEndsTheRequestWithoutItsText) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  GenerateInput probe = text_request("stop token test", 24);
  probe.sampling.temperature = 1.0f;  // seeded: the same ids every run
  probe.sampling.seed = 42;
  const test::Collected free_run = collect(*service.submit(probe));
  ASSERT_GE(free_run.ids.size(), 4u);
  // The first printable ASCII id (a byte token whose text is one visible character; the seeded
  // run always has the same ones).
  const auto ascii = std::find_if(free_run.ids.begin(), free_run.ids.end(),
                                  [](int32_t id) { return id >= 32 && id <= 126; });
  ASSERT_NE(ascii, free_run.ids.end()) << "the seeded run has no ASCII token to stop at";
  const size_t at = ascii - free_run.ids.begin();
  GenerateInput input = probe;
  input.sampling.stop_token_ids = {free_run.ids[at]};
  const test::Collected stopped = collect(*service.submit(input));
  EXPECT_EQ(stopped.finish, Finish::kStop);
  EXPECT_EQ(stopped.stop_reason, StopReason(free_run.ids[at]));  // vLLM's stop_reason: the id
  EXPECT_EQ(stopped.ids, std::vector<int32_t>(free_run.ids.begin(), free_run.ids.begin() + at + 1));
  // The text is that of the ids before the stop: what the same run cut at `at` tokens gives.
  GenerateInput prefix = probe;
  prefix.max_tokens = static_cast<uint32_t>(at);
  const test::Collected before = collect(*service.submit(prefix));
  ASSERT_EQ(before.ids, std::vector<int32_t>(free_run.ids.begin(), free_run.ids.begin() + at));
  EXPECT_EQ(stopped.text, before.text);
}

// `input` run with +100 on the logit of a printable byte token other than `avoid`, which it then
// generates; that token.
std::pair<test::Collected, int32_t> run_forced(LocalGenerationService& service, GenerateInput input,
                                               int32_t avoid) {
  const int32_t token = avoid == 'q' ? 'z' : 'q';
  input.sampling.logit_bias = {{token, 100.0f}};
  return {collect(*service.submit(std::move(input))), token};
}

// logit_bias and the penalties reach the sampler: +100 on one id makes every greedy token that id;
// a presence penalty changes a greedy run that repeats itself.
TEST_F(ServiceTest, LogitBiasAndPenaltiesChangeWhatIsGenerated) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  GenerateInput plain = text_request("logits processing", 12);
  plain.sampling.temperature = 0.0f;
  const test::Collected free_run = collect(*service.submit(plain));
  ASSERT_EQ(free_run.ids.size(), 12u);
  const auto [forced_run, forced] = run_forced(service, plain, free_run.ids[0]);
  EXPECT_EQ(forced_run.ids, std::vector<int32_t>(12, forced));
  EXPECT_EQ(forced_run.text, std::string(12, static_cast<char>(forced)));

  // A longer greedy run repeats itself; penalised, it goes another way.
  GenerateInput longer = plain;
  longer.max_tokens = 64;
  const test::Collected long_run = collect(*service.submit(longer));
  std::vector<int32_t> sorted = long_run.ids;
  std::sort(sorted.begin(), sorted.end());
  ASSERT_NE(std::adjacent_find(sorted.begin(), sorted.end()), sorted.end())
      << "the greedy run repeats no token: the penalty would have nothing to act on";
  GenerateInput penalised = longer;
  penalised.sampling.presence_penalty = 2.0f;
  penalised.sampling.repetition_penalty = 1.5f;
  const test::Collected penalised_run = collect(*service.submit(penalised));
  EXPECT_EQ(penalised_run.ids.size(), 64u);
  EXPECT_NE(penalised_run.ids, long_run.ids);
}

// logprobs: one entry per generated token, from the model's raw logits: a greedy token is the most
// likely one; a token forced by logit_bias keeps its unbiased (lower) log-probability, and the most
// likely token is then the one greedy decoding would have taken.
TEST_F(ServiceTest, LogprobsAreThoseOfTheRawLogits) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  GenerateInput greedy = text_request("logprobs", 6);
  greedy.sampling.logprobs = 3;
  const test::Collected run = collect(*service.submit(greedy));
  ASSERT_EQ(run.ids.size(), 6u);
  ASSERT_EQ(run.logprobs.size(), 6u);
  for (size_t i = 0; i < run.ids.size(); ++i) {
    const GeneratedLogprobs& token = run.logprobs[i];
    EXPECT_EQ(token.chosen.token, run.ids[i]);
    // The byte tokenizer: ids below 256 are their byte, the rest (special tokens) have no text.
    EXPECT_EQ(token.chosen.bytes,
              run.ids[i] < 256 ? std::string(1, static_cast<char>(run.ids[i])) : std::string())
        << i;
    ASSERT_EQ(token.top.size(), 3u);
    EXPECT_EQ(token.top[0].token, run.ids[i]) << i;
    EXPECT_EQ(token.top[0].logprob, token.chosen.logprob) << i;
    EXPECT_LE(token.chosen.logprob, 0.0f);
    EXPECT_GE(token.top[0].logprob, token.top[1].logprob);
    EXPECT_GE(token.top[1].logprob, token.top[2].logprob);
    double mass = 0.0;
    for (const TokenCandidate& candidate : token.top) mass += std::exp(candidate.logprob);
    EXPECT_LE(mass, 1.0 + 1e-5);
  }
  const auto [biased, token] = run_forced(service, greedy, run.ids[0]);
  ASSERT_EQ(biased.logprobs.size(), 6u);
  EXPECT_EQ(biased.logprobs[0].chosen.token, token);
  EXPECT_LT(biased.logprobs[0].chosen.logprob, biased.logprobs[0].top[0].logprob);
  EXPECT_EQ(biased.logprobs[0].top[0].token, run.ids[0]);
  EXPECT_EQ(biased.logprobs[0].top[0].logprob, run.logprobs[0].top[0].logprob);
  // Not asked: none.
  EXPECT_TRUE(collect(*service.submit(text_request("logprobs", 2))).logprobs.empty());
}

// allowed_token_ids: sampled freely, every token is one of them (the byte tokenizer: 'x', 'y',
// 'z'); an id outside the vocabulary and guided output beside them are refused naming the field.
TEST_F(ServiceTest, OnlyAllowedTokensAreGenerated) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  GenerateInput input = text_request("allowed", 24);
  input.sampling.temperature = 1.0f;
  input.sampling.seed = 5;
  const std::vector<int32_t> free_ids = collect(*service.submit(input)).ids;
  ASSERT_FALSE(std::all_of(free_ids.begin(), free_ids.end(), [](int32_t id) {
    return id >= 'x' && id <= 'z';
  })) << "the free run stays within the allowed set: the test would show nothing";
  input.sampling.allowed_token_ids = {'z', 'x', 'y', 'x'};
  const test::Collected allowed = collect(*service.submit(input));
  ASSERT_EQ(allowed.ids.size(), 24u) << allowed.error;
  for (const int32_t id : allowed.ids) EXPECT_TRUE(id >= 'x' && id <= 'z') << id;

  for (const bool guided : {false, true}) {
    GenerateInput refused = input;
    if (guided) {
      refused.sampling.ignore_eos = false;  // which guided output refuses too
      refused.guided.kind = GuidedOutput::Kind::kRegex;
      refused.guided.regex = "x+";
      refused.guided.field = "guided_regex";
    } else {
      refused.sampling.allowed_token_ids = {'x', 1 << 20};
    }
    try {
      service.submit(refused);
      ADD_FAILURE() << (guided ? "guided output with allowed_token_ids"
                               : "an id past the vocabulary")
                    << " was taken";
    } catch (const ServiceError& e) {
      EXPECT_EQ(e.param(), guided ? "allowed_token_ids" : "allowed_token_ids[1]") << e.what();
    }
  }
}

// bad_words (the byte tokenizer: a token per character): a one-character word never comes out, a
// two-character word's second character never right after its first; refused beside guided
// output, naming the field.
TEST_F(ServiceTest, BadWordsAreNotGenerated) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  GenerateInput input = text_request("bad words", 24);
  input.sampling.temperature = 0.0f;
  const std::vector<int32_t> free_ids = collect(*service.submit(input)).ids;
  // A byte that is a word of its own (leading whitespace is dropped from bad words).
  const auto printable = [](int32_t id) {
    return id >= 0 && id < 256 && id != ' ' && !(id >= '\t' && id <= '\r');
  };
  std::map<int32_t, int> counts;
  for (const int32_t id : free_ids) {
    if (printable(id)) ++counts[id];
  }
  ASSERT_FALSE(counts.empty()) << "the free run has no byte to ban";
  const int32_t banned =
      std::max_element(counts.begin(), counts.end(), [](const auto& a, const auto& b) {
        return a.second < b.second;
      })->first;
  GenerateInput one = input;
  one.bad_words = {std::string(1, static_cast<char>(banned))};
  const test::Collected without = collect(*service.submit(one));
  ASSERT_EQ(without.ids.size(), 24u) << without.error;
  EXPECT_EQ(std::count(without.ids.begin(), without.ids.end(), banned), 0);

  size_t at = 1;
  while (at < free_ids.size() && !(printable(free_ids[at - 1]) && printable(free_ids[at]))) ++at;
  ASSERT_LT(at, free_ids.size()) << "no two bytes in a row in the free run";
  const int32_t first = free_ids[at - 1], second = free_ids[at];
  GenerateInput two = input;
  two.bad_words = {std::string{static_cast<char>(first), static_cast<char>(second)}};
  const test::Collected pair_run = collect(*service.submit(two));
  ASSERT_EQ(pair_run.ids.size(), 24u) << pair_run.error;
  EXPECT_NE(pair_run.ids, free_ids);
  for (size_t k = 1; k < pair_run.ids.size(); ++k) {
    EXPECT_FALSE(pair_run.ids[k - 1] == first && pair_run.ids[k] == second) << k;
  }

  GenerateInput guided = two;
  guided.sampling.ignore_eos = false;  // which guided output refuses too
  guided.guided.kind = GuidedOutput::Kind::kRegex;
  guided.guided.regex = "x+";
  guided.guided.field = "guided_regex";
  try {
    service.submit(guided);
    ADD_FAILURE() << "guided output with bad_words was taken";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.param(), "bad_words") << e.what();
  }
}

// bad_words_ids as gRPC sends them: bounded, each sequence named by its index, and not banning
// every allowed token.
TEST(LogitsProcessing, BadWordSequencesAreBoundedAndNamed) {
  ModelSummary model;
  model.vocab = 256;
  const auto param_of = [&](std::vector<std::vector<int32_t>> words,
                            std::vector<int32_t> allowed = {}) {
    core::SamplingParams s;
    s.bad_words_ids = std::move(words);
    s.allowed_token_ids = std::move(allowed);
    try {
      validate_logits_processing(s, model);
      return std::string("accepted");
    } catch (const ServiceError& e) {
      return e.param();
    }
  };
  EXPECT_EQ(param_of({{1, 2}, {3}}), "accepted");
  EXPECT_EQ(param_of({{1}, {}}), "bad_words_ids[1]");
  EXPECT_EQ(param_of({{1}, {2, 300}}), "bad_words_ids[1][1]");
  EXPECT_EQ(param_of(std::vector<std::vector<int32_t>>(kMaxBadWordSequences + 1, {1})),
            "bad_words");
  EXPECT_EQ(param_of({std::vector<int32_t>(kMaxBadWordTokens + 1, 1)}), "bad_words");
  EXPECT_EQ(param_of({{4}, {5}}, {4, 5}), "bad_words");  // nothing left to choose
  EXPECT_EQ(param_of({{4}, {6, 5}}, {4, 5}), "accepted");
}

// Requests batched in one step, each with its own count of top tokens (or none), get the figures
// they get alone: the engine keeps each sampling slice's top tokens apart.
TEST_F(ServiceTest, BatchedRequestsKeepTheirOwnLogprobs) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  const std::vector<int32_t> counts = {5, -1, 1, 0};
  std::vector<GenerateInput> inputs;
  std::vector<test::Collected> alone;
  for (size_t i = 0; i < counts.size(); ++i) {
    inputs.push_back(text_request(std::string(3 + 7 * i, static_cast<char>('a' + i)), 5));
    inputs.back().sampling.logprobs = counts[i];
    alone.push_back(collect(*service.submit(inputs.back())));
  }
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (const GenerateInput& input : inputs) streams.push_back(service.submit(input));
  for (size_t i = 0; i < counts.size(); ++i) {
    SCOPED_TRACE("request " + std::to_string(i));
    const test::Collected batched = collect(*streams[i]);
    EXPECT_EQ(batched.ids, alone[i].ids);
    ASSERT_EQ(batched.logprobs.size(), counts[i] < 0 ? 0u : 5u);
    for (size_t t = 0; t < batched.logprobs.size(); ++t) {
      const GeneratedLogprobs& got = batched.logprobs[t];
      const GeneratedLogprobs& want = alone[i].logprobs[t];
      EXPECT_NEAR(got.chosen.logprob, want.chosen.logprob, 1e-4) << t;
      ASSERT_EQ(got.top.size(), static_cast<size_t>(counts[i])) << t;
      for (size_t k = 0; k < got.top.size(); ++k) {
        EXPECT_EQ(got.top[k].token, want.top[k].token) << t << " " << k;
        EXPECT_NEAR(got.top[k].logprob, want.top[k].logprob, 1e-4) << t << " " << k;
      }
    }
  }
}

// min_tokens: a stop token id the free run ends on cannot end the request (or be generated) before
// min_tokens tokens; a stop string in their text does not count either.
TEST_F(ServiceTest, MinTokensHoldsBackStopTokenIdsAndStopStrings) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  GenerateInput probe = text_request("min tokens test", 24);
  probe.sampling.temperature = 1.0f;
  probe.sampling.seed = 7;
  probe.sampling.ignore_eos = true;  // EOS is then not masked: the draws stay those of the probe
  const test::Collected free_run = collect(*service.submit(probe));
  ASSERT_EQ(free_run.ids.size(), 24u);
  // The first printable ASCII id: its text is one visible character, which no other token's
  // text contains (the byte tokenizer's other ids are control bytes, parts of UTF-8 or special
  // tokens without text).
  const auto ascii = std::find_if(free_run.ids.begin(), free_run.ids.end(),
                                  [](int32_t id) { return id >= 33 && id <= 126; });
  ASSERT_NE(ascii, free_run.ids.end()) << "the seeded run has no ASCII token to stop at";
  const int32_t stop_id = *ascii;
  const size_t at = ascii - free_run.ids.begin();
  ASSERT_LE(at + 2, 24u);

  GenerateInput by_id = probe;
  by_id.sampling.stop_token_ids = {stop_id};
  const test::Collected stops = collect(*service.submit(by_id));
  ASSERT_EQ(stops.ids.size(), at + 1);  // without min_tokens it ends on the stop id
  const uint32_t min_tokens = static_cast<uint32_t>(at + 2);
  by_id.sampling.min_tokens = min_tokens;
  const test::Collected held = collect(*service.submit(by_id));
  ASSERT_GE(held.ids.size(), min_tokens);
  EXPECT_EQ(std::count(held.ids.begin(), held.ids.begin() + min_tokens, stop_id), 0);

  // The same character as a stop string cuts the probe at `at`; under min_tokens it does not
  // count, and with no stop id to mask the run is the probe's, the character in its text.
  GenerateInput by_string = probe;
  by_string.stop = {std::string(1, static_cast<char>(stop_id))};
  const test::Collected cut = collect(*service.submit(by_string));
  EXPECT_EQ(cut.finish, Finish::kStop);
  EXPECT_EQ(cut.stop_reason, StopReason(by_string.stop[0]));
  EXPECT_EQ(cut.text.find(static_cast<char>(stop_id)), std::string::npos) << cut.text;
  by_string.sampling.min_tokens = 24;
  const test::Collected kept = collect(*service.submit(by_string));
  EXPECT_EQ(kept.ids, free_run.ids);
  // Byte for byte, U+FFFD of the random bytes included, however the ids were read together.
  EXPECT_EQ(kept.text, free_run.text);
  EXPECT_NE(kept.text.find(static_cast<char>(stop_id)), std::string::npos) << kept.text;
  EXPECT_EQ(kept.finish, Finish::kLength);
}

// A model that samples on its device never sees the logits processing: it is refused by name.
TEST(LogitsProcessing, IsRefusedWhereTheModelSamplesOnItsDevice) {
  using Change = void (*)(core::SamplingParams&);
  const std::vector<std::pair<std::string, Change>> fields = {
      {"frequency_penalty", [](core::SamplingParams& s) { s.frequency_penalty = -1.0f; }},
      {"repetition_penalty", [](core::SamplingParams& s) { s.repetition_penalty = 1.2f; }},
      {"min_tokens", [](core::SamplingParams& s) { s.min_tokens = 1; }},
      {"logit_bias",
       [](core::SamplingParams& s) {
         s.logit_bias = {{1, 1.0f}};
       }},
      {"allowed_token_ids", [](core::SamplingParams& s) { s.allowed_token_ids = {3}; }},
      {"bad_words",
       [](core::SamplingParams& s) {
         s.bad_words_ids = {{3}, {4, 5}};
       }},
      {"prompt_logprobs", [](core::SamplingParams& s) { s.prompt_logprobs = 0; }},
  };
  ModelSummary on_host;
  on_host.vocab = 256;
  ModelSummary on_device = on_host;
  on_device.samples_on_host = false;
  for (const auto& [name, change] : fields) {
    core::SamplingParams s;
    change(s);
    EXPECT_NO_THROW(validate_logits_processing(s, on_host)) << name;
    try {
      validate_logits_processing(s, on_device);
      ADD_FAILURE() << name << ": accepted";
    } catch (const ServiceError& e) {
      EXPECT_EQ(e.param(), name);
      EXPECT_NE(std::string(e.what()).find("samples on its device"), std::string::npos) << e.what();
    }
  }
  core::SamplingParams defaults;
  EXPECT_NO_THROW(validate_logits_processing(defaults, on_device));
}

// [model] tokenizer gives serve a tokenizer the model's options do not name (a backend whose
// checkpoint is not a directory, or whose option has another name): text prompts are encoded with
// it, and a tokenizer that cannot be read is an error naming the key.
TEST(ModelTokenizer, TheTokenizerKeyServesTextToAModelWithoutAPath) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() /
                                    ("headway-tokenizer-key-" + std::to_string(::getpid()));
  std::filesystem::create_directories(dir / "tok");
  {
    // A byte tokenizer of 256 tokens and no specials: it fits the id-blind model's vocabulary.
    std::ofstream json(dir / "tok" / "tokenizer.json");
    json << R"({"model": {"type": "HeadwayByte", "byte_offset": 0}, "vocab_size": 256})";
  }
  const std::string plugin = std::string(HEADWAY_TEST_PLUGIN_DIR) + "/test_id_blind_model.so";
  const std::string head = "[model]\nplugin = \"" + plugin + "\"\n";
  {
    LocalGenerationService without(core::parse_deployment(
        head + "[[engines]]\n", dir / "deploy.toml", headway::test::built_plugins()));
    EXPECT_EQ(without.model_info().tokenizer, "none");
  }
  LocalGenerationService service(core::parse_deployment(head + "tokenizer = \"tok\"\n[[engines]]\n",
                                                        dir / "deploy.toml",
                                                        headway::test::built_plugins()));
  EXPECT_NE(service.model_info().tokenizer, "none");
  const test::Collected out = test::collect(*service.submit(test::text_request("abc", 2)));
  EXPECT_EQ(out.finish, Finish::kLength);
  EXPECT_EQ(out.usage.prompt_tokens, 3u);  // a, b and c: one byte each, no BOS
  try {
    LocalGenerationService missing(
        core::parse_deployment(head + "tokenizer = \"nowhere\"\n[[engines]]\n", dir / "deploy.toml",
                               headway::test::built_plugins()));
    ADD_FAILURE() << "a tokenizer directory that does not exist was taken";
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("deploy.toml: model.tokenizer: "), std::string::npos)
        << e.what();
    EXPECT_NE(std::string(e.what()).find("nowhere: no such directory"), std::string::npos)
        << e.what();
  }
  std::filesystem::remove_all(dir);
}

// A model that returns logits but reads no token ids leaves the engine nothing to count: the
// penalties are refused by name at submit (a 400, not an engine error mid-request), while the
// processing that needs no ids is served.
TEST(LogitsProcessing, PenaltiesAreRefusedWhereTheModelReadsNoTokenIds) {
  const std::string plugin = std::string(HEADWAY_TEST_PLUGIN_DIR) + "/test_id_blind_model.so";
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "headway-id-blind";
  LocalGenerationService service(core::parse_deployment(
      "name = \"id-blind\"\n[model]\nplugin = \"" + plugin + "\"\n[[engines]]\n",
      dir / "deploy.toml", headway::test::built_plugins()));
  EXPECT_FALSE(service.model_info().reads_token_ids);
  EXPECT_TRUE(service.model_info().samples_on_host);
  const auto request = [](void (*change)(core::SamplingParams&)) {
    GenerateInput input;
    input.prompt_kind = GenerateInput::PromptKind::kTokenIds;
    input.prompt_ids = {1, 2, 3};
    input.max_tokens = 4;
    input.sampling.temperature = 0.0f;
    change(input.sampling);
    return input;
  };
  using Change = void (*)(core::SamplingParams&);
  const std::vector<std::pair<std::string, Change>> penalties = {
      {"presence_penalty", [](core::SamplingParams& s) { s.presence_penalty = 0.5f; }},
      {"frequency_penalty", [](core::SamplingParams& s) { s.frequency_penalty = -1.0f; }},
      {"repetition_penalty", [](core::SamplingParams& s) { s.repetition_penalty = 1.2f; }},
      {"bad_words", [](core::SamplingParams& s) { s.bad_words_ids = {{3}}; }},
  };
  for (const auto& [name, change] : penalties) {
    try {
      const test::Collected ran = collect(*service.submit(request(change)));
      ADD_FAILURE() << name << ": accepted, finished " << static_cast<int>(ran.finish) << " "
                    << ran.error;
    } catch (const ServiceError& e) {
      EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument) << e.what();
      EXPECT_EQ(e.param(), name);
      EXPECT_NE(std::string(e.what()).find("reads only their number"), std::string::npos)
          << e.what();
    }
  }
  const std::vector<std::pair<std::string, Change>> served = {
      {"logit_bias",
       [](core::SamplingParams& s) {
         s.logit_bias = {{7, 100.0f}};
       }},
      {"min_tokens", [](core::SamplingParams& s) { s.min_tokens = 2; }},
      {"logprobs", [](core::SamplingParams& s) { s.logprobs = 1; }},
  };
  for (const auto& [name, change] : served) {
    const test::Collected ran = collect(*service.submit(request(change)));
    EXPECT_EQ(ran.finish, Finish::kLength) << name << ": " << ran.error;
    EXPECT_EQ(ran.ids.size(), 4u) << name;
    if (name == "logit_bias") EXPECT_EQ(ran.ids, std::vector<int32_t>(4, 7));
  }
}

// Tokens a request of test_rows_on_request_model at temperature 1 gets: the rows' favourites when
// the host samples it, the model's own picks otherwise.
std::vector<int32_t> predicted_tokens(std::vector<int32_t> tokens, uint32_t count, bool by_host) {
  namespace rule = ::headway::test::rows_on_request;
  std::vector<int32_t> out;
  for (uint32_t i = 0; i < count; ++i) {
    const uint32_t position = static_cast<uint32_t>(tokens.size() - 1);
    const int32_t next = by_host ? rule::favourite(tokens.back(), position)
                                 : rule::device_pick(tokens.back(), position, 1.0f);
    out.push_back(next);
    tokens.push_back(next);
  }
  return out;
}

// A model that samples on its device and returns logits rows on request (ABI 1.5) serves the
// processing only the host does, for the requests that ask, while it samples the rest itself;
// the model checks that the engine sized the rows by the same rule.
TEST(LogitsOnRequest, TheHostSamplesTheRequestsThatNeedItAndTheModelTheRest) {
  namespace rule = ::headway::test::rows_on_request;
  const std::string plugin =
      std::string(HEADWAY_TEST_PLUGIN_DIR) + "/test_rows_on_request_model.so";
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "headway-on-request";
  LocalGenerationService service(core::parse_deployment(
      "name = \"on-request\"\n[model]\nplugin = \"" + plugin + "\"\n[[engines]]\n",
      dir / "deploy.toml", headway::test::built_plugins()));
  EXPECT_TRUE(service.model_info().samples_on_host);
  EXPECT_TRUE(service.model_info().reports_prompt_logprobs);
  const auto request = [](std::vector<int32_t> prompt, uint32_t max_tokens) {
    GenerateInput input;
    input.prompt_kind = GenerateInput::PromptKind::kTokenIds;
    input.prompt_ids = std::move(prompt);
    input.max_tokens = max_tokens;
    input.sampling.temperature = 1.0f;
    input.sampling.seed = 11;
    return input;
  };
  // Submitted together, so that they are likely to share steps (nothing depends on it: every
  // step's rows must match the slices that asked).
  const std::vector<int32_t> prompt = {1, 2, 3};
  GenerateInput with_logprobs = request(prompt, 60);
  with_logprobs.sampling.logprobs = 2;
  GenerateInput biased = request({4, 5}, 20);
  biased.sampling.logit_bias = {{7, 100.0f}};
  GenerateInput with_prompt_figures = request({9, 8, 7, 6}, 20);
  with_prompt_figures.sampling.prompt_logprobs = 1;
  const auto device_stream = service.submit(request(prompt, 60));
  const auto logprobs_stream = service.submit(with_logprobs);
  const auto biased_stream = service.submit(biased);
  const auto prompt_stream = service.submit(with_prompt_figures);
  const test::Collected device = collect(*device_stream);
  const test::Collected logprobs = collect(*logprobs_stream);
  const test::Collected bias = collect(*biased_stream);
  const test::Collected prompt_figures = collect(*prompt_stream);

  EXPECT_EQ(device.finish, Finish::kLength) << device.error;
  EXPECT_EQ(device.ids, predicted_tokens(prompt, 60, false));
  EXPECT_TRUE(device.logprobs.empty());

  EXPECT_EQ(logprobs.finish, Finish::kLength) << logprobs.error;
  EXPECT_EQ(logprobs.ids, predicted_tokens(prompt, 60, true));
  // log softmax of the favourite's logit against 63 zeros (about -1.3e-7), and of a zero.
  const double favourite_logprob =
      rule::kFavouriteLogit -
      std::log(std::exp(double{rule::kFavouriteLogit}) + (rule::kVocab - 1));
  const double other_logprob =
      -std::log(std::exp(double{rule::kFavouriteLogit}) + (rule::kVocab - 1));
  ASSERT_EQ(logprobs.logprobs.size(), 60u);
  for (size_t i = 0; i < logprobs.logprobs.size(); ++i) {
    const GeneratedLogprobs& figures = logprobs.logprobs[i];
    EXPECT_EQ(figures.chosen.token, logprobs.ids[i]);
    EXPECT_NEAR(figures.chosen.logprob, favourite_logprob, 1e-4) << i;
    ASSERT_EQ(figures.top.size(), 2u);
    EXPECT_EQ(figures.top[0].token, logprobs.ids[i]);
    EXPECT_NEAR(figures.top[1].logprob, other_logprob, 1e-3) << i;
  }

  EXPECT_EQ(bias.finish, Finish::kLength) << bias.error;
  EXPECT_EQ(bias.ids, std::vector<int32_t>(20, 7));

  EXPECT_EQ(prompt_figures.finish, Finish::kLength) << prompt_figures.error;
  EXPECT_EQ(prompt_figures.ids, predicted_tokens({9, 8, 7, 6}, 20, true));
  ASSERT_EQ(prompt_figures.prompt_logprobs.size(), 4u);
  EXPECT_FALSE(prompt_figures.prompt_logprobs[0].has_figures);
  const std::vector<int32_t> prompt_ids = {9, 8, 7, 6};
  for (uint32_t p = 1; p < 4; ++p) {
    const PromptLogprobs& figures = prompt_figures.prompt_logprobs[p];
    EXPECT_EQ(figures.position, p);
    EXPECT_EQ(figures.token.token, prompt_ids[p]);
    ASSERT_EQ(figures.top.size(), 1u) << p;
    EXPECT_EQ(figures.top[0].token, rule::favourite(prompt_ids[p - 1], p - 1)) << p;
    EXPECT_NEAR(figures.top[0].logprob, favourite_logprob, 1e-4) << p;
    // A prompt token that is not the favourite has a zero logit.
    if (figures.token.token != figures.top[0].token) {
      EXPECT_NEAR(figures.token.logprob, other_logprob, 1e-3) << p;
    }
  }
}

TEST_F(ServiceTest, AFullWaitingQueueIsResourceExhausted) {
  // One request runs at a time; two may wait.
  LocalGenerationService service(tiny_deployment(
      checkpoint(),
      "[[engines]]\nmax_waiting = 2\nscheduler = { plugin = \"chunked\", options = { "
      "max_num_seqs = 1 } }\n"));
  std::vector<std::shared_ptr<RequestStream>> accepted;
  bool refused = false;
  // Long requests: while the first one decodes its 1000 tokens nothing leaves the queue, so the
  // bound is reached after at most 1 running + 2 waiting.
  for (int i = 0; i < 6 && !refused; ++i) {
    try {
      accepted.push_back(service.submit(text_request("q", 1000)));
    } catch (const ServiceError& e) {
      EXPECT_EQ(e.code(), ErrorCode::kResourceExhausted) << e.what();
      refused = true;
    }
  }
  EXPECT_TRUE(refused);
  EXPECT_GE(accepted.size(), 2u);
  EXPECT_LE(accepted.size(), 3u);
  for (auto& s : accepted) service.abort(s->id());
  for (auto& s : accepted) EXPECT_EQ(collect(*s).finish, Finish::kAbort);
  EXPECT_NE(service.metrics_text().find("headway_request_rejected_total{reason=\"queue_full\"} 1"),
            std::string::npos);
}

// A router that reads the engines' limits (ABI 1.6) sends a request past the less loaded engine
// when that one's queue is full: before, least_loaded picked it and the request was refused (429)
// while the other engine had an empty queue.
TEST_F(ServiceTest, ARequestGoesPastAFullQueueToAnEngineWithRoom) {
  const std::string engine =
      "[[engines]]\nmax_waiting = 1\nscheduler = { plugin = \"chunked\", options = { "
      "max_num_seqs = 1 } }\n";
  LocalGenerationService service(
      tiny_deployment(checkpoint(), engine + engine, "[router]\nplugin = \"least_loaded\"\n"));
  std::vector<std::shared_ptr<RequestStream>> accepted;
  // Each engine runs a long answer (1000 and 600 tokens; max_num_seqs = 1), and a short request
  // waits behind one of them: that engine's queue is full (max_waiting = 1), the other's empty.
  // (The answers outlast the few calls below by far; were one done first, the ASSERTs on the
  // queues would say so.)
  // Each running (its first token out) before the next is routed: a request still in an engine's
  // inbox counts as waiting there.
  const auto running = [&](const char* prompt, uint32_t max_tokens) {
    accepted.push_back(service.submit(text_request(prompt, max_tokens)));
    StreamChunk chunk;
    const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(5);
    while (std::chrono::steady_clock::now() < give_up) {
      if (!accepted.back()->next(chunk, std::chrono::milliseconds(100))) continue;
      if (!chunk.token_ids.empty() || chunk.finish != Finish::kNone) break;
    }
  };
  running("a", 1000);
  running("b", 600);
  // A token reaches its stream before its step's load is published: wait until both engines
  // show theirs running, so that no queue looks full with a request that runs.
  const auto both_running = [&] {
    const ClusterSummary info = service.cluster_info();
    return info.engines[0].running == 1 && info.engines[1].running == 1;
  };
  const auto give_up = std::chrono::steady_clock::now() + std::chrono::minutes(5);
  while (!both_running() && std::chrono::steady_clock::now() < give_up) {
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
  // The short request goes to the engine with fewer tokens left. Which one that is depends on how
  // far engine 0's answer got meanwhile (on a busy machine, past 400 tokens), so the test finds
  // the engine whose queue it filled rather than assume engine 1's.
  accepted.push_back(service.submit(text_request("c", 5)));
  const ClusterSummary queued = service.cluster_info();
  const size_t full = queued.engines[0].waiting == 1 ? 0 : 1;
  ASSERT_EQ(queued.engines[full].waiting, 1u) << "the third request waits on one engine";
  ASSERT_EQ(queued.engines[1 - full].waiting, 0u) << "the third request waits on one engine";
  // The engine with the full queue is still the less loaded (by the short request's few tokens
  // more): a router blind to queue bounds would place the next request there, to be refused.
  try {
    accepted.push_back(service.submit(text_request("d", 5)));
  } catch (const ServiceError& e) {
    ADD_FAILURE() << "refused while engine" << 1 - full << "'s queue had room: " << e.what();
  }
  for (auto& s : accepted) service.abort(s->id());
  for (auto& s : accepted) EXPECT_EQ(collect(*s).finish, Finish::kAbort);
  EXPECT_EQ(service.metrics_text().find("reason=\"queue_full\"} 1"), std::string::npos);
}

// Engines of one deployment may hold different lengths (a long-prompt engine with a larger
// max_model_len): with a router that places by length (ABI 1.7) the service admits up to the
// largest, and a request only the longer engine holds is served there. Before, the service
// admitted only what the smallest held, so the longer engine's extra length was unusable.
TEST_F(ServiceTest, ARequestOnlyTheLongerEngineHoldsIsAdmittedAndServedThere) {
  const std::string short_engine = "[[engines]]\nmax_model_len = 64\n";
  const std::string long_engine = "[[engines]]\n";
  LocalGenerationService service(tiny_deployment(checkpoint(), short_engine + long_engine,
                                                 "[router]\nplugin = \"least_loaded\"\n"));
  EXPECT_EQ(service.model_info().max_model_len, 1024u);
  const auto stream = service.submit(text_request("a prompt that fits in either", 100));
  const test::Collected answer = collect(*stream);
  EXPECT_EQ(answer.finish, Finish::kLength) << answer.error;
  EXPECT_EQ(answer.ids.size(), 100u);
  const std::string metrics = service.metrics_text();
  EXPECT_EQ(test::sum_of(metrics, "headway_request_success_total", "engine=\"1\""), 1.0) << metrics;
  EXPECT_EQ(test::sum_of(metrics, "headway_request_success_total", "engine=\"0\""), 0.0) << metrics;
  // Without max_tokens (chat), a request is routed by its prompt and runs to the end of the
  // context of the engine it lands on: both idle, least_loaded's round-robin turn is engine 0's,
  // which holds 64 tokens. (Routed by the largest length, it could only go to engine 1.)
  GenerateInput open = text_request("open", 1);
  open.max_tokens_to_context_end = true;
  const test::Collected ended = collect(*service.submit(open));
  EXPECT_EQ(ended.finish, Finish::kLength) << ended.error;
  EXPECT_EQ(ended.usage.prompt_tokens + ended.usage.completion_tokens, 64u);
  EXPECT_EQ(test::sum_of(service.metrics_text(), "headway_request_success_total", "engine=\"0\""),
            1.0);
  // A one-token request takes engine 1's turn, so that engine 0's is next. With min_tokens = 100
  // an open-ended request needs more than engine 0 holds: engine 1, to the end of its 1,024.
  // (Routed by one token, it would go to engine 0 and end short of its min_tokens.)
  EXPECT_EQ(collect(*service.submit(text_request("turn", 1))).finish, Finish::kLength);
  open.sampling.min_tokens = 100;
  const test::Collected longer = collect(*service.submit(open));
  EXPECT_EQ(longer.finish, Finish::kLength) << longer.error;
  EXPECT_EQ(longer.usage.prompt_tokens + longer.usage.completion_tokens, 1024u);
  EXPECT_EQ(test::sum_of(service.metrics_text(), "headway_request_success_total", "engine=\"1\""),
            3.0);
  // Past the longest: refused as the client's error, naming the length.
  try {
    service.submit(text_request("x", 1024));
    ADD_FAILURE() << "admitted past every engine's max_model_len";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("maximum context length is 1024 tokens"),
              std::string::npos)
        << e.what();
    EXPECT_EQ(e.openai_code(), "context_length_exceeded");  // OpenAI's, which clients test
  }
  try {
    service.submit(text_request(std::string(1100, 'x'), 1));
    ADD_FAILURE() << "admitted a prompt longer than every engine's max_model_len";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.param(), "prompt");
    EXPECT_EQ(e.openai_code(), "context_length_exceeded");
  }
}

// A router built before ABI 1.7 knows no lengths and may place a request on any engine: the
// service admits only what every engine holds.
TEST_F(ServiceTest, ARouterThatKnowsNoLengthsGetsWhatEveryEngineHolds) {
  const std::string router = "[router]\nplugin = \"" + std::string(HEADWAY_TEST_PLUGIN_DIR) +
                             "/test_abi_1_6_router.so\"\n";
  LocalGenerationService service(
      tiny_deployment(checkpoint(), "[[engines]]\nmax_model_len = 64\n[[engines]]\n", router));
  EXPECT_EQ(service.model_info().max_model_len, 64u);
  try {
    service.submit(text_request("a prompt", 100));
    ADD_FAILURE() << "admitted past the smaller engine's max_model_len";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_NE(std::string(e.what()).find("maximum context length is 64 tokens"), std::string::npos)
        << e.what();
  }
}

TEST_F(ServiceTest, DrainAbortsWhatOutlivesTheTimeoutAndRefusesNewWork) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  std::vector<std::shared_ptr<RequestStream>> streams;
  for (int i = 0; i < 3; ++i) streams.push_back(service.submit(text_request("d", 1000)));
  const size_t aborted = service.drain(0.0);
  EXPECT_EQ(aborted, 3u);
  for (auto& s : streams) {
    const test::Collected drained = collect(*s);
    EXPECT_EQ(drained.finish, Finish::kAbort);
    // The client learns it was the server going, not a mistake of its own.
    EXPECT_EQ(drained.error,
              "the server is shutting down, and its drain ended before the request finished");
  }
  EXPECT_FALSE(service.health().serving);
  try {
    service.submit(text_request("late", 2));
    ADD_FAILURE() << "accepted while draining";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kUnavailable);
  }
  EXPECT_EQ(service.cluster_info().engines[0].kv_blocks_free,
            service.cluster_info().engines[0].kv_blocks_total);
}

TEST_F(ServiceTest, DrainLetsShortRequestsFinish) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  auto stream = service.submit(text_request("short", 3));
  EXPECT_EQ(service.drain(600.0), 0u);
  EXPECT_EQ(collect(*stream).finish, Finish::kLength);
}

TEST_F(ServiceTest, DestroyingTheServiceFinishesOpenStreams) {
  std::shared_ptr<RequestStream> stream;
  {
    LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
    GenerateInput input = text_request("bye", 1000);
    input.stop = {"zzzz"};
    stream = service.submit(input);
  }
  // The stream (and its decoder's tokenizer) outlive the service.
  const test::Collected ended = collect(*stream);
  EXPECT_EQ(ended.finish, Finish::kAbort);
  EXPECT_NE(ended.error.find("the server is shutting down"), std::string::npos) << ended.error;
}

// A model without a tokenizer streams ids without text, and a stop token id still names what
// stopped the request (vLLM's stop_reason).
TEST(TokenIdDecoder, GivesNoTextButTheStopToken) {
  auto decoder = make_token_id_decoder({.stop_token_ids = {7, 9}});
  const std::vector<int32_t> ids = {1, 2, 3};
  EXPECT_EQ(decoder->append(ids), "");
  EXPECT_EQ(decoder->stop_reason(), StopReason());
  const std::vector<int32_t> last = {4, 9};
  EXPECT_EQ(decoder->append(last), "");
  EXPECT_EQ(decoder->flush(), "");
  EXPECT_EQ(decoder->stop_reason(), StopReason(int32_t{9}));
  EXPECT_FALSE(decoder->stopped());  // no stop string: nothing to end upstream
}

TEST_F(ServiceTest, RefusesASimulatedModel) {
  const std::string text = "[model]\nplugin = \"sim\"\n[[engines]]\nscheduler = \"chunked\"\n";
  const core::DeploymentConfig deployment =
      core::parse_deployment(text, checkpoint().path / "sim.toml", headway::test::built_plugins());
  try {
    LocalGenerationService service(deployment);
    ADD_FAILURE() << "a virtual-clock model was accepted";
  } catch (const core::Error& e) {
    EXPECT_NE(std::string(e.what()).find("wall clock"), std::string::npos) << e.what();
    EXPECT_NE(std::string(e.what()).find("sim.toml"), std::string::npos) << e.what();
  }
}

TEST_F(ServiceTest, RoutesAcrossEnginesUnderConcurrentClients) {
  LocalGenerationService service(tiny_deployment(
      checkpoint(), "[[engines]]\ncount = 2\nscheduler = { plugin = \"chunked\" }\n"));
  constexpr int kClients = 4;
  constexpr int kEach = 10;
  std::vector<std::thread> clients;
  std::atomic<int> finished{0};
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      for (int i = 0; i < kEach; ++i) {
        auto stream = service.submit(text_request("client " + std::to_string(c), 4));
        if (collect(*stream).finish == Finish::kLength) ++finished;
      }
    });
  }
  for (auto& t : clients) t.join();
  EXPECT_EQ(finished.load(), kClients * kEach);
  test::wait_idle(service);
  for (const EngineSummary& e : service.cluster_info().engines) {
    EXPECT_EQ(e.kv_blocks_free, e.kv_blocks_total) << "engine" << e.index;
    EXPECT_EQ(e.running, 0u);
    EXPECT_EQ(e.waiting, 0u);
  }
}

// Many requests with random aborts (queued, running, or after they finished): every stream ends,
// the service forgets every request, and every engine gets all its KV blocks back.
TEST_F(ServiceTest, SoakWithRandomAbortsLeavesNothingBehind) {
  LocalGenerationService service(
      tiny_deployment(checkpoint(),
                      "[[engines]]\ncount = 2\nscheduler = { plugin = \"chunked\", options = { "
                      "max_num_batched_tokens = 256, max_num_seqs = 32 } }\n"));
  std::mt19937 random(7);
  constexpr int kRequests = 2000;
  constexpr int kBatch = 100;
  int aborted_or_done = 0;
  uint64_t generated = 0;
  for (int b = 0; b < kRequests / kBatch; ++b) {
    std::vector<std::shared_ptr<RequestStream>> streams;
    for (int i = 0; i < kBatch; ++i) {
      GenerateInput input =
          text_request(std::string(1 + random() % 40, 'a' + random() % 26), 1 + random() % 6);
      if (random() % 4 == 0) input.stop = {"q"};
      streams.push_back(service.submit(std::move(input)));
      if (random() % 5 == 0) service.abort(streams.back()->id());
    }
    for (auto& s : streams) {
      if (random() % 7 == 0) service.abort(s->id());
      const test::Collected out = collect(*s);
      EXPECT_NE(out.finish, Finish::kNone);
      EXPECT_NE(out.finish, Finish::kError) << out.error;
      generated += out.usage.completion_tokens;
      ++aborted_or_done;
    }
  }
  EXPECT_EQ(aborted_or_done, kRequests);
  test::wait_idle(service);
  EXPECT_EQ(service.in_flight(), 0u);
  for (const EngineSummary& e : service.cluster_info().engines) {
    EXPECT_EQ(e.kv_blocks_free, e.kv_blocks_total) << "engine" << e.index;
    EXPECT_EQ(e.running, 0u);
    EXPECT_EQ(e.waiting, 0u);
  }
  EXPECT_GT(generated, 0u);
}

// A stop string seen by the consumer of a finished request must not abort a later request that
// reuses its client id (the callback targets the request, not just the id).
TEST_F(ServiceTest, ALateStopStringDoesNotAbortARequestThatReusedTheId) {
  LocalGenerationService service(tiny_deployment(checkpoint(), kOneEngine));
  GenerateInput probe = text_request("stop test", 40);
  probe.sampling.temperature = 1.0f;
  probe.sampling.seed = 42;
  const test::Collected free_run = collect(*service.submit(probe));
  const size_t at = free_run.text.find_first_of(
      "abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ0123456789 !#$%&()*+,-./:;<=>?@");
  if (at == std::string::npos) {
    GTEST_SKIP() << "the sampled output has no ASCII character to stop at";
  }
  GenerateInput first = probe;
  first.request_id = "shared";
  first.stop = {free_run.text.substr(at, 1)};
  auto unread = service.submit(first);
  test::wait_idle(service);  // finished upstream (by length) and forgotten; nobody read it yet
  GenerateInput second = text_request("second", 300);
  second.request_id = "shared";
  auto running = service.submit(second);
  EXPECT_EQ(collect(*unread).finish, Finish::kStop);  // the consumer matches the stop string now
  EXPECT_EQ(collect(*running).finish, Finish::kLength);
}

// Clients submit, abort and read on several threads while the service drains: every stream ends,
// a client may reuse its request id as soon as its stream ended, nothing is left in flight once
// drain() returns, and every KV block comes back.
TEST_F(ServiceTest, DrainWhileClientsSubmitAndAbortOnOtherThreads) {
  LocalGenerationService service(tiny_deployment(
      checkpoint(), "[[engines]]\ncount = 2\nscheduler = { plugin = \"chunked\" }\n"));
  constexpr int kClients = 4;
  std::atomic<int> ended{0};
  std::atomic<int> bad{0};
  std::vector<std::thread> clients;
  for (int c = 0; c < kClients; ++c) {
    clients.emplace_back([&, c] {
      std::mt19937 random(c);
      for (;;) {
        GenerateInput input = text_request("client " + std::to_string(c), 1 + random() % 40);
        // Reused by every request of this client: an id is free again once its stream has ended.
        input.request_id = "c" + std::to_string(c);
        if (random() % 3 == 0) input.stop = {"e"};
        std::shared_ptr<RequestStream> stream;
        try {
          stream = service.submit(std::move(input));
        } catch (const ServiceError& e) {
          if (e.code() != ErrorCode::kUnavailable) ADD_FAILURE() << e.what();
          return;
        }
        if (random() % 4 == 0) service.abort(stream->id());
        const Finish finish = collect(*stream).finish;
        if (finish == Finish::kNone || finish == Finish::kError) ++bad;  // kError: see out.error
        ++ended;
      }
    });
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  service.drain(0.05);
  EXPECT_EQ(service.in_flight(), 0u);
  for (auto& t : clients) t.join();
  EXPECT_EQ(bad.load(), 0);
  EXPECT_GT(ended.load(), 0);
  for (const EngineSummary& e : service.cluster_info().engines) {
    EXPECT_EQ(e.kv_blocks_free, e.kv_blocks_total) << "engine" << e.index;
  }
}

// The service is destroyed while other threads still read its streams (some with stop strings,
// whose callback races the destructor): every stream ends.
TEST_F(ServiceTest, DestroyingTheServiceWhileConsumersRead) {
  std::vector<std::shared_ptr<RequestStream>> streams;
  std::vector<std::thread> consumers;
  std::atomic<int> unfinished{0};
  {
    LocalGenerationService service(tiny_deployment(
        checkpoint(), "[[engines]]\ncount = 2\nscheduler = { plugin = \"chunked\" }\n"));
    for (int i = 0; i < 8; ++i) {
      GenerateInput input = text_request("reader " + std::to_string(i), 1000);
      input.sampling.temperature = 1.0f;
      input.sampling.seed = static_cast<uint64_t>(i);
      if (i % 2 == 0) input.stop = {"a", "e", "o"};
      streams.push_back(service.submit(std::move(input)));
    }
    for (auto& stream : streams) {
      consumers.emplace_back([&unfinished, stream] {
        if (collect(*stream).finish == Finish::kNone) ++unfinished;
      });
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  for (auto& t : consumers) t.join();
  EXPECT_EQ(unfinished.load(), 0);
}

}  // namespace
}  // namespace headway::serving
