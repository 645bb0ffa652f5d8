// What guided decoding costs the engine thread per sampled row, at a Llama-3-sized vocabulary
// (128,256 tokens of a synthetic byte-level BPE-like vocabulary: all 256 bytes, then words and
// JSON punctuation pieces, with and without a leading space).
// - BM_GuideMaskNewPlace/<place>: the first mask at a place in the grammar: one ordered walk of the
//   vocabulary. "string" is the worst case (inside a string nearly every token fits, so nearly
//   every prefix is walked); "key" (after '{', only the declared keys fit) prunes at the first
//   byte.
//   "pattern string" is the same string under a pattern (^[a-z]+( [a-z]+)*$): its automaton
//   steps instead of the string rules. "regex answer": a guided_regex answer ([0-9]+( [a-z]+)*)
//   after "12", a match that may go on. "grammar word": a recursive guided_grammar after a word
//   that may end there or go on, which the matcher's forks decide for every token (no automaton
//   walk inside a grammar).
// - BM_GuideMaskKnownPlace: a place seen before: the cached mask applied to the row.
// - BM_GuidedAnswer: a whole answer (at most 160 tokens) under a schema, mask + argmax + accept
//   per token, random logits; reported per token (items), the row's copy and argmax included.
//   /0: each answer alone (its own kept sets); /1: answers of one schema sharing the grammar's
//   store, as a server's requests do after the first.
// - BM_PatternCompile: compiling a pattern, accepted or refused at a bound.
// - BM_GrammarCompile: compiling a guided_grammar (JSON in GBNF; a long chain of rules; a rule
//   too large for an automaton).
// - BM_GuideThinkingStep: a reasoning model's step before "</think>" (the shape not begun).
// - BM_GuideWithOpenerMade: admitting a request under the qwen3 reasoning parser: making its guide
//   (reasoning_opener "<think>"), which needs the tokens that open the reasoning.
// See docs/performance.md, "Guided decoding".
#include <benchmark/benchmark.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <memory>
#include <random>
#include <string>
#include <vector>

#include "grammar.h"
#include "grammar_guide.h"
#include "json_schema.h"

namespace {

using headway::serving::guided::compile_json_schema;
using headway::serving::guided::Grammar;
using headway::serving::guided::GrammarGuide;
using headway::serving::guided::VocabularyIndex;

constexpr size_t kVocab = 128256;
constexpr int32_t kEos = 128001;

const char* kSchema = R"({"type": "object", "properties": {
    "name": {"type": "string"},
    "age": {"type": "integer"},
    "city": {"type": "string"},
    "tags": {"type": "array", "items": {"type": "string"}, "maxItems": 4},
    "member": {"type": "boolean"}},
  "required": ["name", "age", "city", "tags", "member"]})";

std::shared_ptr<VocabularyIndex> vocabulary() {
  static const std::shared_ptr<VocabularyIndex> built = [] {
    std::mt19937 random(5);
    std::vector<std::string> tokens;
    tokens.reserve(kVocab);
    for (int byte = 0; byte < 256; ++byte) tokens.emplace_back(1, static_cast<char>(byte));
    const std::string letters = "etaoinshrdlcumwfgypbvkjxqz";
    const char* pieces[] = {"{\"", "\":", "\": ", "\",", "\", \"", "\"}", "}}", "]}", "[\"", "\"]",
                            "\n", "  ", "true", "false", "null", "0", "12", "3.5", "name", "age",
                            "city", "tags", "member",
                            // a reasoning model's closing tag, whole and in parts, and other
                            // tokens that end like it
                            "</think>", "</think>\n\n", ">", "k>", "nk>", "ink>", "->", ">>", "/>",
                            "=>", "<br>", "<div>",
                            // and its opening tag (Qwen3's reasoning_opener)
                            "<think>", "<think>\n"};
    for (const char* piece : pieces) tokens.emplace_back(piece);
    while (tokens.size() < kVocab) {
      std::string word = random() % 2 == 0 ? " " : "";
      const size_t length = 2 + random() % 9;
      for (size_t i = 0; i < length; ++i) word += letters[std::min<size_t>(random() % 40, 25)];
      if (random() % 16 == 0) word += "\",";
      tokens.push_back(std::move(word));
    }
    tokens[kEos] = "";
    return std::make_shared<VocabularyIndex>(tokens, kEos);
  }();
  return built;
}

std::shared_ptr<const Grammar> grammar() {
  static const auto compiled =
      std::make_shared<const Grammar>(compile_json_schema(kSchema, "guided_json"));
  return compiled;
}

// kSchema with a pattern on the name: lower-case words, which most of the vocabulary is.
std::shared_ptr<const Grammar> pattern_grammar() {
  static const auto compiled = std::make_shared<const Grammar>(compile_json_schema(
      R"({"type": "object", "properties": {"name": {"type": "string",
          "pattern": "^[a-z]+( [a-z]+)*$", "maxLength": 40}}})",
      "guided_json"));
  return compiled;
}

int32_t token_of(const VocabularyIndex& vocabulary, std::string_view bytes) {
  for (uint32_t id = 0; id < vocabulary.vocab_size(); ++id) {
    if (vocabulary.bytes_of(static_cast<int32_t>(id)) == bytes) return static_cast<int32_t>(id);
  }
  return -1;
}

// A guided_regex answer: a count, then words.
std::shared_ptr<const Grammar> regex_answer_grammar() {
  static const auto compiled = std::make_shared<const Grammar>(
      headway::serving::guided::regex_grammar("[0-9]+( [a-z]+)*", "guided_regex"));
  return compiled;
}

// A guided_grammar answer: words, and sentences nested in parentheses.
std::shared_ptr<const Grammar> recursive_grammar() {
  static const auto compiled =
      std::make_shared<const Grammar>(headway::serving::guided::ebnf_grammar(
          R"g(root ::= sentence
              sentence ::= word (" " word)* ("." | " (" sentence ")")
              word ::= [a-z]+)g",
          "guided_grammar"));
  return compiled;
}

// A guide at a place: 0 after '{' (a key), 1 inside the name's string, 2 inside it under a
// pattern, 3 after "12" of a guided_regex answer (a match that may go on), 4 after "name" of a
// guided_grammar answer (a word that may go on or end).
std::unique_ptr<GrammarGuide> guide_at(int place) {
  const std::shared_ptr<const Grammar> grammars[] = {grammar(), grammar(), pattern_grammar(),
                                                     regex_answer_grammar(), recursive_grammar()};
  auto guide =
      std::make_unique<GrammarGuide>(grammars[place], vocabulary(), std::vector<int32_t>{});
  const VocabularyIndex& v = *vocabulary();
  std::vector<std::string_view> path = {"{\""};
  if (place == 1 || place == 2) path.insert(path.end(), {"name", "\": ", "\""});
  if (place == 3) path = {"12"};
  if (place == 4) path = {"name"};
  for (const std::string_view piece : path) {
    if (!guide->accept(token_of(v, piece))) {
      std::fprintf(stderr, "the benchmark's vocabulary has no token '%.*s' the schema takes\n",
                   static_cast<int>(piece.size()), piece.data());
      std::abort();
    }
  }
  return guide;
}

void BM_GuideMaskNewPlace(benchmark::State& state) {
  std::vector<float> logits(kVocab, 0.0f);
  for (auto _ : state) {
    state.PauseTiming();
    std::unique_ptr<GrammarGuide> guide = guide_at(static_cast<int>(state.range(0)));
    std::fill(logits.begin(), logits.end(), 0.0f);
    state.ResumeTiming();
    guide->mask(logits);
    benchmark::DoNotOptimize(logits.data());
    state.PauseTiming();
    guide.reset();
    state.ResumeTiming();
  }
  const auto allowed =
      std::count_if(logits.begin(), logits.end(), [](float l) { return l == 0.0f; });
  const char* places[] = {"key", "string", "pattern string", "regex answer", "grammar word"};
  state.SetLabel(std::string(places[state.range(0)]) + ", " + std::to_string(allowed) +
                 " tokens allowed");
}
BENCHMARK(BM_GuideMaskNewPlace)
    ->Arg(0)
    ->Arg(1)
    ->Arg(2)
    ->Arg(3)
    ->Arg(4)
    ->Unit(benchmark::kMillisecond);

void BM_GuideMaskKnownPlace(benchmark::State& state) {
  std::unique_ptr<GrammarGuide> guide = guide_at(1);
  std::vector<float> logits(kVocab, 0.0f);
  guide->mask(logits);
  for (auto _ : state) {
    guide->mask(logits);
    benchmark::DoNotOptimize(logits.data());
  }
}
BENCHMARK(BM_GuideMaskKnownPlace)->Unit(benchmark::kMicrosecond);

// A reasoning model's thinking before the shape (starts_after "</think>"): a step's mask bans the
// end token and checks the few tokens that could close the thinking. /0: the first step (it
// finds those tokens in the vocabulary); /1: the steps after it.
void BM_GuideThinkingStep(benchmark::State& state) {
  std::vector<float> logits(kVocab, 0.0f);
  const auto thinking = [] {
    return std::make_unique<GrammarGuide>(grammar(), vocabulary(), std::vector<int32_t>{}, nullptr,
                                          GrammarGuide::kWorthKeeping, "</think>");
  };
  std::unique_ptr<GrammarGuide> guide = thinking();
  guide->mask(logits);
  for (auto _ : state) {
    if (state.range(0) == 0) {
      state.PauseTiming();
      guide = thinking();
      state.ResumeTiming();
    }
    guide->mask(logits);
    benchmark::DoNotOptimize(logits.data());
  }
}
BENCHMARK(BM_GuideThinkingStep)->Arg(0)->Arg(1)->Unit(benchmark::kMicrosecond);

// A guide made at admission under the qwen3 reasoning parser: the answer may open with "<think>"
// (reasoning_opener) or go straight to the shape.
void BM_GuideWithOpenerMade(benchmark::State& state) {
  for (auto _ : state) {
    GrammarGuide guide(grammar(), vocabulary(), {}, nullptr, GrammarGuide::kWorthKeeping,
                       "</think>", "<think>");
    benchmark::DoNotOptimize(&guide);
  }
}
BENCHMARK(BM_GuideWithOpenerMade)->Unit(benchmark::kMicrosecond);

void BM_GuidedAnswer(benchmark::State& state) {
  constexpr int kTokens = 160;
  std::mt19937 random(9);
  std::normal_distribution<float> normal(0.0f, 3.0f);
  std::vector<std::vector<float>> rows(kTokens, std::vector<float>(kVocab));
  for (auto& row : rows) {
    for (float& l : row) l = normal(random);
  }
  std::vector<float> logits(kVocab);
  int64_t tokens = 0;
  // Arg 1: every answer's guide shares one store (requests of one schema after the first).
  const auto shared = std::make_shared<headway::serving::guided::MaskStore>(128);
  for (auto _ : state) {
    GrammarGuide guide(grammar(), vocabulary(), {}, state.range(0) == 1 ? shared : nullptr);
    for (int i = 0; i < kTokens && !guide.ended(); ++i) {
      logits = rows[i];
      guide.mask(logits);
      const auto best =
          static_cast<int32_t>(std::max_element(logits.begin(), logits.end()) - logits.begin());
      guide.accept(best);
      ++tokens;
    }
  }
  state.SetItemsProcessed(tokens);
}
BENCHMARK(BM_GuidedAnswer)->Arg(0)->Arg(1)->Unit(benchmark::kMillisecond);

}  // namespace

// What compiling a pattern costs a request's admission: /0 pydantic's HttpUrl (uri, 1 to 2,083
// characters), /1 a pattern refused at the automaton's state bound ((a|b)*a(a|b){15}), /2 one
// refused by the construction's step budget ((\w+\s*){1000}).
void BM_PatternCompile(benchmark::State& state) {
  for (auto _ : state) {
    try {
      switch (state.range(0)) {
        case 0:
          benchmark::DoNotOptimize(compile_json_schema(
              R"({"type": "string", "format": "uri", "minLength": 1, "maxLength": 2083})",
              "guided_json"));
          break;
        case 1:
          benchmark::DoNotOptimize(
              headway::serving::guided::regex_grammar("(a|b)*a(a|b){15}", "guided_regex"));
          break;
        default:
          benchmark::DoNotOptimize(
              headway::serving::guided::regex_grammar("(\\w+\\s*){1000}", "guided_regex"));
      }
    } catch (const std::exception&) {  // the refusals are what /1 and /2 measure
    }
  }
}
BENCHMARK(BM_PatternCompile)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

// Compiling a guided_grammar: /0 JSON in GBNF, written the way llama.cpp's json.gbnf is (escapes,
// numbers, optional whitespace; recursion through values); /1 2,000 rules each using the next,
// which stops being inlined into one automaton at the inlining depth and is matched as nodes;
// /2 100 rules using one that doubles at each of 20 levels (2^20 "b"s), too large to build.
void BM_GrammarCompile(benchmark::State& state) {
  std::string text;
  if (state.range(0) == 0) {
    text = R"g(root   ::= object
      value  ::= object | array | string | number | ("true" | "false" | "null") ws
      object ::= "{" ws (string ":" ws value ("," ws string ":" ws value)*)? "}" ws
      array  ::= "[" ws (value ("," ws value)*)? "]" ws
      string ::= "\"" ([^"\\\x7F\x00-\x1F] | "\\" (["\\/bfnrt] | "u" [0-9a-fA-F]{4}))* "\"" ws
      number ::= "-"? ("0" | [1-9] [0-9]{0,15}) ("." [0-9]+)? ([eE] [-+]? [0-9]{1,3})? ws
      ws     ::= | " " | "\n" [ \t]{0,20})g";
  } else if (state.range(0) == 2) {
    text = "root ::= x0";
    for (int j = 1; j < 100; ++j) text += " | x" + std::to_string(j);
    text += "\n";
    for (int j = 0; j < 100; ++j) text += "x" + std::to_string(j) + " ::= d0 \"c\"\n";
    for (int i = 0; i < 20; ++i) {
      text += "d" + std::to_string(i) + " ::= d" + std::to_string(i + 1) + " d" +
              std::to_string(i + 1) + "\n";
    }
    text += "d20 ::= \"b\"\n";
  } else {
    text = "root ::= r0\n";
    for (int i = 0; i < 2000; ++i) {
      text += "r" + std::to_string(i) + " ::= \"a\" r" + std::to_string(i + 1) + " | \"b\"\n";
    }
    text += "r2000 ::= \"c\"\n";
  }
  size_t nodes = 0;
  for (auto _ : state) {
    const Grammar compiled = headway::serving::guided::ebnf_grammar(text, "guided_grammar");
    nodes = compiled.nodes.size();
    benchmark::DoNotOptimize(nodes);
  }
  state.SetLabel(std::to_string(nodes) + " nodes");
}
BENCHMARK(BM_GrammarCompile)->Arg(0)->Arg(1)->Arg(2)->Unit(benchmark::kMillisecond);

BENCHMARK_MAIN();
