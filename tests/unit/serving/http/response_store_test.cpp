// The store of kept responses: what it hands back, how it forgets (deleted, or the oldest pushed
// out past its size), and the conversation a continuation starts from.
#include "response_store.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <string>
#include <thread>
#include <vector>

#include "openai_response.h"

namespace headway::serving::http {
namespace {

using nlohmann::ordered_json;

ordered_json user_items() { return ordered_json::array({{{"type", "message"}, {"role", "user"}}}); }

// A response whose JSON is about `text_bytes` long, with one output message.
ordered_json response_json(const std::string& id, size_t text_bytes) {
  return {{"id", id},
          {"output", ordered_json::array({{{"type", "message"},
                                           {"role", "assistant"},
                                           {"content", std::string(text_bytes, 'a')}}})}};
}

StoredResponse response_of(const std::string& id, size_t text_bytes = 10) {
  return StoredResponse(response_json(id, text_bytes), user_items());
}

size_t size_of(const StoredResponse& stored) {
  return stored.response().dump().size() + stored.input_items().dump().size();
}

TEST(ResponseStore, KeepsFindsAndForgets) {
  ResponseStore store(1 << 20);
  EXPECT_TRUE(store.keeps_responses());
  EXPECT_TRUE(store.put("resp_a", response_of("resp_a")));
  const auto found = store.find("resp_a");
  ASSERT_NE(found, nullptr);
  EXPECT_EQ(found->response()["id"], "resp_a");
  EXPECT_EQ(store.bytes(), size_of(response_of("resp_a")));
  EXPECT_EQ(store.find("resp_b"), nullptr);
  EXPECT_TRUE(store.erase("resp_a"));
  EXPECT_FALSE(store.erase("resp_a"));
  EXPECT_EQ(store.find("resp_a"), nullptr);
  EXPECT_EQ(store.size(), 0u);
  EXPECT_EQ(store.bytes(), 0u);
  // What a reader holds stays whole after the store forgot it.
  EXPECT_EQ(found->response()["output"][0]["role"], "assistant");
}

TEST(ResponseStore, TheOldestGoFirstPastItsSize) {
  const size_t one = size_of(response_of("resp_0"));
  ResponseStore store(3 * one);
  for (int i = 0; i < 3; ++i)
    EXPECT_TRUE(store.put("resp_" + std::to_string(i), response_of("resp_" + std::to_string(i))));
  EXPECT_EQ(store.size(), 3u);
  EXPECT_TRUE(store.put("resp_3", response_of("resp_3")));
  EXPECT_EQ(store.size(), 3u);
  EXPECT_EQ(store.find("resp_0"), nullptr);
  EXPECT_NE(store.find("resp_1"), nullptr);
  EXPECT_NE(store.find("resp_3"), nullptr);
  // A deleted one leaves room: nothing more is pushed out.
  EXPECT_TRUE(store.erase("resp_2"));
  EXPECT_TRUE(store.put("resp_4", response_of("resp_4")));
  EXPECT_NE(store.find("resp_1"), nullptr);
  // One that needs the room of two pushes out two.
  EXPECT_TRUE(store.put("resp_big", response_of("resp_big", one)));
  EXPECT_EQ(store.find("resp_1"), nullptr);
  EXPECT_EQ(store.find("resp_3"), nullptr);
  EXPECT_NE(store.find("resp_4"), nullptr);
  EXPECT_LE(store.bytes(), store.max_bytes());
  EXPECT_EQ(store.pushed_out(), 3u);  // resp_0, resp_1 and resp_3; a deletion is not counted
}

TEST(ResponseStore, OneLargerThanAllIsNotKept) {
  const size_t one = size_of(response_of("resp_0"));
  ResponseStore store(2 * one);
  EXPECT_TRUE(store.put("resp_0", response_of("resp_0")));
  EXPECT_FALSE(store.put("resp_huge", response_of("resp_huge", 3 * one)));
  EXPECT_EQ(store.find("resp_huge"), nullptr);
  EXPECT_NE(store.find("resp_0"), nullptr);  // and nothing was pushed out for it
}

TEST(ResponseStore, TheSameIdIsReplaced) {
  ResponseStore store(1 << 20);
  EXPECT_TRUE(store.put("resp_a", response_of("resp_a", 10)));
  EXPECT_TRUE(store.put("resp_a", response_of("resp_a", 20)));
  EXPECT_EQ(store.size(), 1u);
  EXPECT_EQ(store.bytes(), size_of(response_of("resp_a", 20)));
  // An id a client chose is not taken from the response that holds it.
  EXPECT_FALSE(store.put("resp_a", response_of("resp_a", 30), /*replace=*/false));
  EXPECT_EQ(store.bytes(), size_of(response_of("resp_a", 20)));
  EXPECT_TRUE(store.put("resp_b", response_of("resp_b", 30), /*replace=*/false));
  EXPECT_EQ(store.size(), 2u);
}

TEST(ResponseStore, ASizeOfZeroKeepsNothing) {
  ResponseStore store(0);
  EXPECT_FALSE(store.keeps_responses());
  EXPECT_FALSE(store.put("resp_a", response_of("resp_a")));
  EXPECT_EQ(store.find("resp_a"), nullptr);
  EXPECT_NE(store.why_not_found().find("responses_store_mb = 0"), std::string::npos);
}

TEST(ResponseStore, ThreadsKeepReadAndForgetTogether) {
  // Handlers keep, read and delete from cpp-httplib's worker threads at once: the accounting
  // stays whole, and what a reader holds stays readable (run under ASan, and TSan in
  // scripts/tsan.sh).
  const size_t one = size_of(response_of("resp_0_0"));
  ResponseStore store(8 * one);
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&store, t] {
      for (int i = 0; i < 200; ++i) {
        const std::string id = "resp_" + std::to_string(t) + "_" + std::to_string(i % 10);
        store.put(id, response_of(id));
        if (const auto found = store.find(id)) EXPECT_EQ(found->response()["id"], id);
        if (i % 3 == 0) store.erase(id);
      }
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_LE(store.bytes(), store.max_bytes());
  size_t kept_bytes = 0;
  size_t kept = 0;
  for (int t = 0; t < 4; ++t) {
    for (int i = 0; i < 10; ++i) {
      if (const auto found = store.find("resp_" + std::to_string(t) + "_" + std::to_string(i))) {
        kept_bytes += size_of(*found);
        ++kept;
      }
    }
  }
  EXPECT_EQ(store.size(), kept);
  EXPECT_EQ(store.bytes(), kept_bytes);
}

TEST(ResponseStore, AConversationIsTheInputThenTheOutput) {
  ordered_json items = user_items();
  items.push_back({{"type", "function_call_output"}, {"call_id", "c"}});
  const StoredResponse stored(response_json("resp_a", 10), items);
  const ordered_json conversation = stored.conversation();
  ASSERT_EQ(conversation.size(), 3u);
  EXPECT_EQ(conversation[0]["role"], "user");
  EXPECT_EQ(conversation[1]["type"], "function_call_output");
  EXPECT_EQ(conversation[2]["role"], "assistant");
}

// Kept as the text GET writes, which is what the bound counts, and read back as it was.
TEST(ResponseStore, KeepsTheJsonTextItCountsAndReadsItBack) {
  const ordered_json response = response_json("resp_a", 100);
  const StoredResponse stored(response, user_items());
  EXPECT_EQ(stored.response_text(), dump_json(response));
  EXPECT_EQ(stored.response(), response);
  EXPECT_EQ(stored.input_items(), user_items());
  EXPECT_EQ(stored.bytes(), dump_json(response).size() + dump_json(user_items()).size());
}

}  // namespace
}  // namespace headway::serving::http
