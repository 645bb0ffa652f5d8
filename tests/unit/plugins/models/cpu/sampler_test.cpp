// core::Sampler: greedy, temperature, top-k, top-p, min-p, and determinism per (seed, index);
// min_tokens, logit_bias and the repetition, frequency and presence penalties.
#include "headway/core/sampler.h"

#include <gtest/gtest.h>
#include <headway/core/error.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <vector>

#include "logits_scan.h"

namespace headway::core {
namespace {

// Logits of a known distribution: probabilities proportional to `weights`.
std::vector<float> logits_of(const std::vector<double>& weights) {
  std::vector<float> l;
  for (double w : weights) l.push_back(static_cast<float>(std::log(w)));
  return l;
}

// Token frequencies over `n` draws with seeds 0..n-1.
std::map<int32_t, int> histogram(const std::vector<float>& logits, SamplingParams p, int n = 4000) {
  Sampler sampler;
  std::map<int32_t, int> counts;
  for (int i = 0; i < n; ++i) {
    std::vector<float> scratch = logits;
    p.seed = static_cast<uint64_t>(i);
    ++counts[sampler.sample(scratch, p, 0)];
  }
  return counts;
}

const std::vector<double> kWeights = {0.05, 0.4, 0.1, 0.3, 0.15};  // order: 1, 3, 4, 2, 0

TEST(Sampler, GreedyPicksTheArgmaxAndTheLowestIdOnTies) {
  Sampler s;
  std::vector<float> l = {0.1f, 2.0f, -1.0f, 2.0f};
  EXPECT_EQ(s.sample(l, SamplingParams{}, 0), 1);
  std::vector<float> nan = {NAN, 1.0f, 3.0f};
  EXPECT_EQ(s.sample(nan, SamplingParams{}, 0), 2);
}

TEST(Sampler, RowsWithNoWeightToDrawFromGiveTheGreedyToken) {
  // Sampling weights are exp((l - max) / T): a +inf logit makes them all NaN (then 0), as does a
  // row of NaN or a temperature so small that 1 / T overflows. Every seed must give the greedy
  // token, not whichever token happened to come last.
  SamplingParams p;
  p.temperature = 1.0f;
  const std::vector<std::vector<float>> rows = {
      {0.5f, INFINITY, 2.0f, -1.0f}, {NAN, NAN, NAN, NAN}, {0.5f, 3.0f, 2.0f, -1.0f}};
  const std::vector<float> temperatures = {1.0f, 1.0f, 1e-45f};
  for (size_t r = 0; r < rows.size(); ++r) {
    p.temperature = temperatures[r];
    std::vector<float> greedy_scratch = rows[r];
    Sampler s;
    const int32_t greedy = s.sample(greedy_scratch, SamplingParams{}, 0);
    for (uint64_t seed = 0; seed < 50; ++seed) {
      p.seed = seed;
      std::vector<float> scratch = rows[r];
      ASSERT_EQ(s.sample(scratch, p, 0), greedy) << "row " << r << ", seed " << seed;
    }
  }
}

TEST(Sampler, SameSeedAndIndexGiveTheSameTokenWhateverTheCallOrder) {
  const std::vector<float> logits = logits_of({1, 1, 1, 1, 1, 1, 1, 1});
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = 42;
  Sampler a;
  Sampler b;
  std::vector<int32_t> forward;
  std::vector<int32_t> backward(16);
  for (uint32_t i = 0; i < 16; ++i) {
    std::vector<float> l = logits;
    forward.push_back(a.sample(l, p, i));
  }
  for (uint32_t i = 16; i-- > 0;) {
    std::vector<float> l = logits;
    backward[i] = b.sample(l, p, i);
  }
  EXPECT_EQ(forward, backward);
  EXPECT_GT(std::set<int32_t>(forward.begin(), forward.end()).size(), 3u);  // not constant
  p.seed = 43;
  std::vector<int32_t> other;
  for (uint32_t i = 0; i < 16; ++i) {
    std::vector<float> l = logits;
    other.push_back(a.sample(l, p, i));
  }
  EXPECT_NE(forward, other);
}

TEST(Sampler, TemperatureOneFollowsTheDistribution) {
  SamplingParams p;
  p.temperature = 1.0f;
  const auto counts = histogram(logits_of(kWeights), p);
  for (size_t t = 0; t < kWeights.size(); ++t) {
    EXPECT_NEAR(counts.count(t) ? counts.at(t) / 4000.0 : 0.0, kWeights[t], 0.03) << t;
  }
}

// A row long enough for the vectorised weights: the draw follows the softmax over the tokens
// that can be drawn, and a token at -inf or NaN never comes out, wherever it sits in the row.
TEST(Sampler, ALongRowFollowsTheDistributionAndNeverDrawsTheImpossible) {
  constexpr size_t kVocab = 1003;  // 250 vectors and a tail of 3
  std::vector<float> logits(kVocab, -INFINITY);
  for (size_t t = 0; t < kVocab; t += 7) logits[t] = NAN;
  const std::vector<size_t> live = {5, 250, 501, 1001, 1002};
  for (size_t i = 0; i < live.size(); ++i) {
    logits[live[i]] = static_cast<float>(std::log(kWeights[i]));
  }
  SamplingParams p;
  p.temperature = 1.0f;
  const auto counts = histogram(logits, p);
  int drawn = 0;
  for (size_t i = 0; i < live.size(); ++i) {
    const int n = counts.count(static_cast<int32_t>(live[i])) ? counts.at(live[i]) : 0;
    EXPECT_NEAR(n / 4000.0, kWeights[i], 0.03) << live[i];
    drawn += n;
  }
  EXPECT_EQ(drawn, 4000) << "a token at -inf or NaN was drawn";
}

// The total of an unfiltered draw is summed in vector lanes, the walk in token order; where the
// lanes' sum comes out higher, a draw near 1 must still land on a token by its weight, not on the
// last token that has any weight (here one at logit -80, probability about 1e-35). The row and the
// seed are one such case (helper-72's).
TEST(Sampler, ADrawThatTheSumsDisagreeOnStillFollowsTheWeights) {
  // One block of 256 weights: 1 at tokens 0-3 (the first of each float lane) and about 9e-8
  // elsewhere, each of which rounds every lane's float sum up by a third of an ulp. The total
  // (the lanes' sums) then exceeds the walk's double sum by about 7e-6 of 4, and a draw whose u
  // lies in that last sliver has its target past the walk's end. Token 255 weighs e^-80: the
  // fallback to "the last token of any weight" would pick it; drawing again against the walk's sum
  // does not.
  std::vector<float> row(256, std::log(9e-8f));
  for (int t = 0; t < 4; ++t) row[static_cast<size_t>(t)] = 0.0f;
  row.back() = -80.0f;
  std::vector<float> weights = row;
  const double lanes = exp_weights(weights, 0.0f, 1.0f);
  double walked = 0.0;
  for (const float w : weights) walked += w;
  ASSERT_GT(lanes, walked * (1 + 1e-6)) << "the lanes no longer round up";
  uint64_t seed = 0;
  while (Sampler::uniform(seed, 0) * lanes < walked) ++seed;  // about one seed in 550,000
  SamplingParams p;
  p.temperature = 1.0f;
  p.seed = seed;
  Sampler sampler;
  std::vector<float> scratch = row;
  const int32_t token = sampler.sample(scratch, p, 0);
  EXPECT_GT(row[static_cast<size_t>(token)], -30.0f) << "token " << token << ", seed " << seed;
}

TEST(Sampler, TheDrawIsExactWhereTheWeightsAreOneOrZero) {
  // Kept tokens of weight exactly 1 (logit 0) and others of weight 0 (-inf): every sum is exact,
  // so the draw must be the kept token at floor(u * kept), whichever blocks it skips on the way.
  // Vocabularies below, at and past a block of 256 and of 4 floats, and Llama 3's.
  std::mt19937 rng(21);
  Sampler sampler;
  for (const size_t vocab : {1u, 3u, 255u, 256u, 257u, 300u, 513u, 1003u, 4096u, 128256u}) {
    std::vector<float> row(vocab);
    std::vector<int32_t> kept;
    for (size_t t = 0; t < vocab; ++t) {
      const bool keep = t == 0 || rng() % 3 != 0;
      row[t] = keep ? 0.0f : -std::numeric_limits<float>::infinity();
      if (keep) kept.push_back(static_cast<int32_t>(t));
    }
    for (uint64_t seed = 0; seed < 300; ++seed) {
      SamplingParams p;
      p.temperature = 1.0f;
      p.seed = seed;
      const auto expected = kept[static_cast<size_t>(
          std::floor(Sampler::uniform(seed, 3) * static_cast<double>(kept.size())))];
      std::vector<float> scratch = row;
      ASSERT_EQ(sampler.sample(scratch, p, 3), expected) << "vocab " << vocab << ", seed " << seed;
    }
  }
}

TEST(Sampler, LowTemperatureSharpensHighTemperatureFlattens) {
  SamplingParams p;
  p.temperature = 0.05f;  // p(1) = 1 / (1 + 0.75^20 + ...) = 0.997
  EXPECT_GT(histogram(logits_of(kWeights), p)[1], 3950);
  p.temperature = 100.0f;
  const auto flat = histogram(logits_of(kWeights), p);
  for (int t = 0; t < 5; ++t) EXPECT_NEAR(flat.at(t) / 4000.0, 0.2, 0.04) << t;
}

TEST(Sampler, TopKKeepsOnlyTheKMostLikely) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 2;
  const auto counts = histogram(logits_of(kWeights), p);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_NEAR(counts.at(1) / 4000.0, 0.4 / 0.7, 0.03);
  EXPECT_NEAR(counts.at(3) / 4000.0, 0.3 / 0.7, 0.03);
}

TEST(Sampler, TopPKeepsTheSmallestNucleus) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.8f;  // 0.4 + 0.3 = 0.7 < 0.8, + 0.15 reaches it
  const auto counts = histogram(logits_of(kWeights), p);
  EXPECT_EQ(counts.size(), 3u);
  EXPECT_EQ(counts.count(0) + counts.count(2), 0u);
  EXPECT_NEAR(counts.at(4) / 4000.0, 0.15 / 0.85, 0.03);
}

TEST(Sampler, TokensTiedAtACutAreAllKept) {
  // 1000 equally likely tokens: a nucleus of 0.5 cuts at their one weight, so all 1000 stay, as
  // do all of them under a top-k of 10 (the device sampler keeps the same).
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.5f;
  EXPECT_GT(histogram(std::vector<float>(1000, 0.0f), p, 20000).size(), 990u);
  p.top_p = 1.0f;
  p.top_k = 10;
  EXPECT_GT(histogram(std::vector<float>(1000, 0.0f), p, 20000).size(), 990u);
}

TEST(Sampler, TopPOverALargeFlatVocabularyKeepsTheHeaviestPart) {
  // 100,000 tokens whose weights fall linearly from 1 to 0: the nucleus of 0.5 is the heaviest
  // 1 - sqrt(0.5) = 29.3% of them (tokens below 29,290).
  std::vector<float> logits(100000);
  for (size_t t = 0; t < logits.size(); ++t) {
    logits[t] = std::log(1.0f - static_cast<float>(t) / static_cast<float>(logits.size()));
  }
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_p = 0.5f;
  const auto counts = histogram(logits, p, 4000);
  EXPECT_LT(counts.rbegin()->first, 29300);
  EXPECT_GT(counts.rbegin()->first, 28000) << "the nucleus reaches its lightest tokens";
}

TEST(Sampler, TheDrawWalksTheKeptTokensInTokenOrder) {
  // Heaviest first the tokens are 4, 2, 1, 0, 3. Top-p 0.8 and top-k 3 both keep 4 (0.4), 2 (0.3)
  // and 1 (0.15). For each seed the token is the first, in token order, at which the kept weight
  // so far passes u * 0.85, as on the device (a walk heaviest first would pick 4 for small u).
  const std::vector<double> weights = {0.1, 0.15, 0.3, 0.05, 0.4};
  const std::vector<std::pair<int32_t, double>> kept = {{1, 0.15}, {2, 0.3}, {4, 0.4}};
  Sampler sampler;
  for (const bool by_top_k : {false, true}) {
    SamplingParams p;
    p.temperature = 1.0f;
    if (by_top_k) {
      p.top_k = 3;
    } else {
      p.top_p = 0.8f;
    }
    for (uint64_t seed = 0; seed < 200; ++seed) {
      p.seed = seed;
      const double target = Sampler::uniform(seed, 0) * 0.85;
      double cumulative = 0.0;
      int32_t expected = -1;
      for (const auto& [token, weight] : kept) {
        cumulative += weight;
        if (target < cumulative) {
          expected = token;
          break;
        }
      }
      std::vector<float> scratch = logits_of(weights);
      EXPECT_EQ(sampler.sample(scratch, p, 0), expected)
          << (by_top_k ? "top-k" : "top-p") << ", seed " << seed;
    }
  }
}

TEST(Sampler, MinPDropsTokensBelowAFractionOfTheBest) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.5f;  // keeps p >= 0.2: tokens 1 (0.4) and 3 (0.3)
  const auto counts = histogram(logits_of(kWeights), p);
  EXPECT_EQ(counts.size(), 2u);
  EXPECT_TRUE(counts.count(1) && counts.count(3));
}

TEST(Sampler, FiltersCombine) {
  SamplingParams p;
  p.temperature = 1.0f;
  p.top_k = 3;     // 1, 3, 4
  p.top_p = 0.9f;  // of 0.85 total: 1 + 3 = 0.7 < 0.765, + 4: all three
  p.min_p = 0.3f;  // >= 0.12: 1, 3, 4 survive
  EXPECT_EQ(histogram(logits_of(kWeights), p).size(), 3u);
  p.min_p = 0.5f;  // >= 0.2: 1, 3
  EXPECT_EQ(histogram(logits_of(kWeights), p).size(), 2u);
}

// vLLM V1 applies min-p (a logits processor, after temperature) before its top-k/top-p step, so
// top-p weighs what min-p kept. Tokens 0 (0.4), 1 (0.3), 2 (0.2) and ten of 0.01: min-p 0.1 keeps
// 0, 1 and 2 (>= 0.04), 0.9 of the mass; top-p 0.75 of that is 0.675, which 0 and 1 reach (0.7).
// Top-p over the whole row first (Hugging Face's order) would need 0.75 and keep 2 as well.
TEST(Sampler, TopPWeighsWhatMinPKeptAsInVllm) {
  std::vector<double> weights = {0.4, 0.3, 0.2};
  weights.resize(13, 0.01);
  SamplingParams p;
  p.temperature = 1.0f;
  p.min_p = 0.1f;
  p.top_p = 0.75f;
  std::set<int32_t> drawn;
  for (const auto& [token, count] : histogram(logits_of(weights), p)) drawn.insert(token);
  EXPECT_EQ(drawn, (std::set<int32_t>{0, 1}));
  // Min-p is a fraction of the best token's temperature-scaled probability: at temperature 0.5
  // the weights square (0.16, 0.09, 0.04, 0.0001), and min-p 0.3 keeps 0 and 1 only (>= 0.048).
  p.top_p = 1.0f;
  p.min_p = 0.3f;
  p.temperature = 0.5f;
  drawn.clear();
  for (const auto& [token, count] : histogram(logits_of(weights), p)) drawn.insert(token);
  EXPECT_EQ(drawn, (std::set<int32_t>{0, 1}));
}

TEST(Sampler, RejectsInvalidParameters) {
  Sampler s;
  std::vector<float> l = {1.0f, 2.0f};
  SamplingParams p;
  p.temperature = -1.0f;
  EXPECT_THROW(s.sample(l, p, 0), Error);
  p = {};
  p.top_p = 0.0f;
  EXPECT_THROW(s.sample(l, p, 0), Error);
  p = {};
  p.min_p = 2.0f;
  EXPECT_THROW(s.sample(l, p, 0), Error);
  std::vector<float> empty;
  EXPECT_THROW(s.sample(empty, SamplingParams{}, 0), Error);
  p = {};
  p.repetition_penalty = 0.0f;
  EXPECT_THROW(s.sample(l, p, 0), Error);
  p = {};
  p.presence_penalty = NAN;
  EXPECT_THROW(s.sample(l, p, 0), Error);
}

// The greedy choice among `logits` for `p` and a history.
int32_t greedy(std::vector<float> logits, const SamplingParams& p, uint32_t output_index,
               const std::vector<int32_t>& prompt = {}, const std::vector<int32_t>& outputs = {},
               uint32_t eos = UINT32_MAX) {
  Sampler s;
  return s.sample(logits, p, output_index, SamplingHistory{prompt, outputs, eos});
}

TEST(Sampler, MinTokensKeepsEosAndStopTokenIdsOutUntilReached) {
  const std::vector<float> l = {0.0f, 1.0f, 5.0f, 4.0f};  // eos = 2, stop id = 3
  SamplingParams p;
  p.min_tokens = 2;
  p.stop_token_ids = {3};
  EXPECT_EQ(greedy(l, p, 0, {}, {}, 2), 1);
  EXPECT_EQ(greedy(l, p, 1, {}, {}, 2), 1);
  EXPECT_EQ(greedy(l, p, 2, {}, {}, 2), 2);  // the third token may end the request
  p.ignore_eos = true;                       // EOS is then no end token: not masked
  EXPECT_EQ(greedy(l, p, 0, {}, {}, 2), 2);
  // Sampled too: no seed draws a masked token.
  p.ignore_eos = false;
  p.temperature = 1.0f;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    p.seed = seed;
    std::vector<float> scratch = l;
    Sampler s;
    const int32_t t = s.sample(scratch, p, 1, SamplingHistory{{}, {}, 2});
    ASSERT_TRUE(t == 0 || t == 1) << "seed " << seed << " drew " << t;
  }
}

TEST(Sampler, LogitBiasIsAddedBeforeTheChoice) {
  const std::vector<float> l = {1.0f, 3.0f, 2.0f};
  SamplingParams p;
  p.logit_bias = {{0, 2.5f}};
  EXPECT_EQ(greedy(l, p, 0), 0);
  p.logit_bias = {{1, -100.0f}, {7, 100.0f}};  // an id outside the vocabulary is ignored
  EXPECT_EQ(greedy(l, p, 0), 2);
}

// allowed_token_ids: greedy takes the likeliest of them, and no seed draws another, even with a
// bias that would make another the likeliest; an id outside the vocabulary allows nothing.
TEST(Sampler, OnlyAllowedTokensAreChosen) {
  const std::vector<float> l = {1.0f, 3.0f, 2.0f, 0.5f, 2.5f};
  SamplingParams p;
  p.allowed_token_ids = {0, 3, 9};
  EXPECT_EQ(greedy(l, p, 0), 0);
  p.allowed_token_ids = {2, 3};
  p.logit_bias = {{1, 50.0f}};
  EXPECT_EQ(greedy(l, p, 0), 2);
  p.temperature = 1.0f;
  std::set<int32_t> drawn;
  for (uint64_t seed = 0; seed < 200; ++seed) {
    p.seed = seed;
    std::vector<float> scratch = l;
    Sampler s;
    drawn.insert(s.sample(scratch, p, 0));
  }
  EXPECT_EQ(drawn, (std::set<int32_t>{2, 3}));
  // min_tokens masks the end tokens: another allowed one is taken, unless only end tokens are
  // allowed, when the list wins.
  p.temperature = 0.0f;
  p.logit_bias.clear();
  p.allowed_token_ids = {1, 4};
  p.min_tokens = 2;
  p.stop_token_ids = {1};
  EXPECT_EQ(greedy(l, p, 0), 4);
  p.allowed_token_ids = {1};
  EXPECT_EQ(greedy(l, p, 0), 1);
}

// bad_words: a one-token word is never chosen; a longer word's last token only right after the
// rest of it was generated (the outputs, not the prompt).
TEST(Sampler, BadWordsBanTheTokenThatWouldCompleteOne) {
  const std::vector<float> l = {1.0f, 3.0f, 2.0f, 0.5f, 2.5f};
  SamplingParams p;
  p.bad_words_ids = {{1}};
  EXPECT_EQ(greedy(l, p, 0), 4);
  p.bad_words_ids = {{2, 3, 1}, {0, 4}};
  EXPECT_EQ(greedy(l, p, 2, {}, {2, 3}), 4);     // outputs end with 2 3: 1 is banned
  EXPECT_EQ(greedy(l, p, 2, {}, {3, 2}), 1);     // they do not
  EXPECT_EQ(greedy(l, p, 1, {2}, {3}), 1);       // 2 is in the prompt, not the outputs
  EXPECT_EQ(greedy(l, p, 3, {}, {2, 3, 0}), 1);  // ends with 0: 4 is banned, 1 is not
  p.bad_words_ids = {{2, 3, 1}, {3, 4}, {3, 1}};
  EXPECT_EQ(greedy(l, p, 2, {}, {2, 3}), 2);  // both ways of completing are banned
  p.bad_words_ids = {{9}, {1, 7}};            // ids outside the vocabulary ban nothing
  EXPECT_EQ(greedy(l, p, 1, {}, {1}), 1);
  // min_tokens' fallback to the allowed list (all of it end tokens but the banned one) does not
  // bring a banned token back.
  p.bad_words_ids = {{1}};
  p.allowed_token_ids = {1, 2};
  p.stop_token_ids = {2};
  p.min_tokens = 3;
  EXPECT_EQ(greedy(l, p, 0), 2);
}

TEST(Sampler, RepetitionPenaltyDividesPositiveLogitsAndMultipliesNegativeOnesOnce) {
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  EXPECT_EQ(greedy({2.0f, 1.5f}, p, 0), 0);             // no history: no penalty
  EXPECT_EQ(greedy({2.0f, 1.5f}, p, 0, {0}), 1);        // 2 / 2 = 1 < 1.5
  EXPECT_EQ(greedy({-1.0f, -1.5f}, p, 1, {}, {0}), 1);  // -1 * 2 = -2 < -1.5
  // Once per token, however often it appears: 2 / 2 = 1 > 0.9 (not 2 / 8).
  EXPECT_EQ(greedy({2.0f, 0.9f}, p, 2, {0, 0}, {0}), 0);
  p.repetition_penalty = 0.5f;  // below 1 it rewards repeats
  EXPECT_EQ(greedy({1.0f, 1.5f}, p, 0, {0}), 0);
}

TEST(Sampler, FrequencyPenaltyCountsEachOutputAndPresencePenaltyOnlyOnce) {
  SamplingParams p;
  p.frequency_penalty = 0.4f;
  EXPECT_EQ(greedy({3.0f, 2.0f}, p, 2, {}, {0, 0}), 0);     // 3 - 0.8 = 2.2
  EXPECT_EQ(greedy({3.0f, 2.0f}, p, 3, {}, {0, 0, 0}), 1);  // 3 - 1.2 = 1.8
  // The prompt does not count for these two.
  EXPECT_EQ(greedy({3.0f, 2.0f}, p, 0, {0, 0, 0, 0}), 0);
  p = {};
  p.presence_penalty = 0.9f;
  EXPECT_EQ(greedy({3.0f, 2.0f}, p, 3, {}, {0, 0, 0}), 0);  // 3 - 0.9 = 2.1
  p.presence_penalty = 1.1f;
  EXPECT_EQ(greedy({3.0f, 2.0f}, p, 3, {}, {0, 0, 0}), 1);  // 3 - 1.1 = 1.9
  p.presence_penalty = -1.5f;                               // negative: repeats are encouraged
  EXPECT_EQ(greedy({2.0f, 3.0f}, p, 1, {}, {0}), 0);
}

TEST(Sampler, PenaltyMarksDoNotCarryIntoTheNextCall) {
  // The same call twice on one Sampler (which keeps its scratch) gives the same token: a token
  // marked "already penalised" by the first call must be penalised again by the second.
  SamplingParams p;
  p.repetition_penalty = 2.0f;
  p.presence_penalty = 1.0f;
  Sampler s;
  for (int call = 0; call < 3; ++call) {
    std::vector<float> l = {2.0f, 1.5f, 0.5f};
    const std::vector<int32_t> prompt = {0, -4, 99};  // ids outside the vocabulary are ignored
    const std::vector<int32_t> outputs = {0, 1};
    EXPECT_EQ(s.sample(l, p, 2, SamplingHistory{prompt, outputs}), 2) << "call " << call;
  }
}

TEST(Sampler, UniformDrawsAreSpread) {
  double sum = 0.0;
  for (uint32_t i = 0; i < 10000; ++i) {
    const double u = Sampler::uniform(7, i);
    ASSERT_GE(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.01);
}

}  // namespace
}  // namespace headway::core
