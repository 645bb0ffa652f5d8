// The responses the server keeps (OpenAI's Responses API with store true): each for GET
// /v1/responses/{id} and its input_items, and for a later request that continues the conversation
// with previous_response_id. They are kept in memory, in this process, up to a size: the oldest
// go first when a new one would pass it, as a cache would, since a client can always send the
// whole conversation again. Nothing survives a restart.
//
// Ownership: the store owns what it keeps; find() hands out shared references, so that a response
// deleted or pushed out while a request reads it stays whole for that reader.
// Threading: every method is safe from any thread (one mutex, held for map updates only: no JSON
// is copied, measured or written under it).
#pragma once

#include <cstddef>
#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <nlohmann/json.hpp>
#include <string>
#include <unordered_map>

namespace headway::serving::http {

// A kept response, as the JSON text GET writes, parsed again when read: the parsed trees took
// about five times the bytes that responses_store_mb counts (helper-173: 21 MB of heap for 4.2 MB
// of JSON), so the bound did not bound the memory; the texts take 1.31 times
// (docs/serving_http.md).
class StoredResponse {
 public:
  // `response`: the response object as it ended (completed or incomplete). `input_items`: the
  // conversation it answered, oldest first, each item with an id: the items of the responses it
  // continued, their outputs, then its own input. Its instructions are not among them: they are
  // not carried into a continuation (as OpenAI does it).
  StoredResponse(const nlohmann::ordered_json& response, const nlohmann::ordered_json& input_items);

  const std::string& response_text() const { return response_; }
  nlohmann::ordered_json response() const;
  nlohmann::ordered_json input_items() const;
  // What a continuation starts from: the input items, then the response's output.
  nlohmann::ordered_json conversation() const;
  // What the store counts against its bound: the two texts.
  size_t bytes() const { return response_.size() + input_items_.size(); }

 private:
  std::string response_;
  std::string input_items_;
};

class ResponseStore {
 public:
  // `max_bytes`: the size of the JSON of every response and its items together; 0 keeps none.
  explicit ResponseStore(size_t max_bytes) : max_bytes_(max_bytes) {}
  ResponseStore(const ResponseStore&) = delete;
  ResponseStore& operator=(const ResponseStore&) = delete;

  bool keeps_responses() const { return max_bytes_ > 0; }
  size_t max_bytes() const { return max_bytes_; }

  // Keeps `stored` as `id` (the response's id), pushing out the oldest responses while the total
  // would pass max_bytes. One that alone is larger than max_bytes is not kept: false. A response
  // already kept as `id` is replaced, unless `replace` is false (an id a client chose, which
  // another request may hold): then `stored` is not kept, false.
  bool put(const std::string& id, StoredResponse stored, bool replace = true);
  // The response kept as `id`, or null (never kept, deleted or pushed out).
  std::shared_ptr<const StoredResponse> find(const std::string& id) const;
  // Forgets `id`; false when it was not kept.
  bool erase(const std::string& id);

  size_t size() const;          // responses kept
  size_t bytes() const;         // their size, as max_bytes counts it
  uint64_t pushed_out() const;  // responses forgotten to make room for newer ones, in all

  // Why a response asked for by id may not be found, for the client's message.
  std::string why_not_found() const;

 private:
  struct Entry {
    std::shared_ptr<const StoredResponse> stored;
    size_t bytes = 0;
    std::list<std::string>::iterator age;  // its place in oldest_first_
  };

  // Takes `entry` out of the map, the age list and the byte count; its response, for the caller
  // to free after the lock. Caller holds mutex_.
  std::shared_ptr<const StoredResponse> remove(
      std::unordered_map<std::string, Entry>::iterator entry);

  const size_t max_bytes_;
  mutable std::mutex mutex_;
  std::unordered_map<std::string, Entry> by_id_;
  std::list<std::string> oldest_first_;
  size_t bytes_ = 0;
  uint64_t pushed_out_ = 0;
};

}  // namespace headway::serving::http
