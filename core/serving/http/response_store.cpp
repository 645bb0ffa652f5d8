#include "response_store.h"

#include <string>
#include <utility>
#include <vector>

#include "openai_response.h"

namespace headway::serving::http {

StoredResponse::StoredResponse(const nlohmann::ordered_json& response,
                               const nlohmann::ordered_json& input_items)
    : response_(dump_json(response)), input_items_(dump_json(input_items)) {
  // A dumped string grows by doubling: up to twice its length held, which the bound does not see.
  response_.shrink_to_fit();
  input_items_.shrink_to_fit();
}

// Written by dump_json from a tree: parses back to it.
nlohmann::ordered_json StoredResponse::response() const {
  return nlohmann::ordered_json::parse(response_);
}

nlohmann::ordered_json StoredResponse::input_items() const {
  return nlohmann::ordered_json::parse(input_items_);
}

nlohmann::ordered_json StoredResponse::conversation() const {
  nlohmann::ordered_json items = input_items();
  const nlohmann::ordered_json ended = response();
  if (const auto output = ended.find("output"); output != ended.end()) {
    for (const auto& item : *output) items.push_back(item);
  }
  return items;
}

bool ResponseStore::put(const std::string& id, StoredResponse stored, bool replace) {
  if (max_bytes_ == 0) return false;
  const size_t bytes = stored.bytes();  // the JSON as GET writes it
  if (bytes > max_bytes_) return false;
  auto shared = std::make_shared<const StoredResponse>(std::move(stored));
  std::vector<std::shared_ptr<const StoredResponse>> released;  // freed after the lock
  std::lock_guard lock(mutex_);
  if (auto same = by_id_.find(id); same != by_id_.end()) {
    if (!replace) return false;
    released.push_back(remove(same));
  }
  while (bytes_ + bytes > max_bytes_ && !oldest_first_.empty()) {
    released.push_back(remove(by_id_.find(oldest_first_.front())));
    ++pushed_out_;
  }
  oldest_first_.push_back(id);
  try {
    by_id_.emplace(id, Entry{std::move(shared), bytes, std::prev(oldest_first_.end())});
  } catch (...) {
    oldest_first_.pop_back();  // no id in the list without its entry
    throw;
  }
  bytes_ += bytes;
  return true;
}

std::shared_ptr<const StoredResponse> ResponseStore::find(const std::string& id) const {
  std::lock_guard lock(mutex_);
  const auto found = by_id_.find(id);
  return found == by_id_.end() ? nullptr : found->second.stored;
}

bool ResponseStore::erase(const std::string& id) {
  std::shared_ptr<const StoredResponse> erased;  // freed after the lock
  std::lock_guard lock(mutex_);
  const auto found = by_id_.find(id);
  if (found == by_id_.end()) return false;
  erased = remove(found);
  return true;
}

std::shared_ptr<const StoredResponse> ResponseStore::remove(
    std::unordered_map<std::string, Entry>::iterator entry) {
  std::shared_ptr<const StoredResponse> stored = std::move(entry->second.stored);
  bytes_ -= entry->second.bytes;
  oldest_first_.erase(entry->second.age);
  by_id_.erase(entry);
  return stored;
}

std::string ResponseStore::why_not_found() const {
  if (max_bytes_ == 0) return "this server keeps no responses: [server] responses_store_mb = 0";
  // A response is kept once it ended, in the memory of the process that answered it.
  const std::string size = max_bytes_ % (size_t{1} << 20) == 0
                               ? std::to_string(max_bytes_ >> 20) + " MiB"
                               : std::to_string(max_bytes_) + " bytes";
  return "it is still being written, failed, was made with store false, was deleted, was pushed "
         "out by newer ones (the server keeps the newest responses, up to " +
         size +
         " of JSON: [server] responses_store_mb), or was answered before a restart or by "
         "another server";
}

size_t ResponseStore::size() const {
  std::lock_guard lock(mutex_);
  return by_id_.size();
}

size_t ResponseStore::bytes() const {
  std::lock_guard lock(mutex_);
  return bytes_;
}

uint64_t ResponseStore::pushed_out() const {
  std::lock_guard lock(mutex_);
  return pushed_out_;
}

}  // namespace headway::serving::http
