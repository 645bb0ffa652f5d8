#include "headway/serving/bench/server_endpoint.h"

#include <fmt/format.h>
#include <headway/core/error.h>
#include <httplib.h>

#include <algorithm>
#include <charconv>
#include <chrono>
#include <fstream>
#include <nlohmann/json.hpp>

#include "http_client_setup.h"
#include "http_error_text.h"

namespace headway::serving::bench {

namespace {

std::optional<uint32_t> optional_count(const nlohmann::json& model, const char* key) {
  auto it = model.find(key);
  if (it == model.end() || !it->is_number_unsigned()) return std::nullopt;
  return it->get<uint32_t>();
}

}  // namespace

ServerEndpoint parse_server_url(std::string_view url) {
  const auto bad = [&](std::string_view why) {
    return core::Error(fmt::format(
        "--url '{}': {} (expected http://host[:port][/prefix] or https://...)", url, why));
  };
  const size_t scheme_end = url.find("://");
  if (scheme_end == std::string_view::npos) throw bad("no scheme");
  const std::string_view scheme = url.substr(0, scheme_end);
  if (scheme != "http" && scheme != "https")
    throw bad(fmt::format("unsupported scheme '{}'", scheme));
  std::string_view rest = url.substr(scheme_end + 3);
  if (rest.find_first_of("?#") != std::string_view::npos) throw bad("a query or fragment");
  const size_t slash = rest.find('/');
  const std::string_view authority = rest.substr(0, slash);
  std::string_view path = slash == std::string_view::npos ? std::string_view{} : rest.substr(slash);
  if (authority.empty()) throw bad("no host");
  if (authority.find('@') != std::string_view::npos)
    throw bad("credentials in the URL (use --api-key-file)");
  // The port is what follows the last ':' outside an IPv6 literal's brackets.
  const size_t colon = authority.rfind(':');
  const size_t bracket = authority.rfind(']');
  if (colon != std::string_view::npos && (bracket == std::string_view::npos || colon > bracket)) {
    const std::string_view port = authority.substr(colon + 1);
    unsigned value = 0;
    auto [end, ec] = std::from_chars(port.data(), port.data() + port.size(), value);
    if (port.empty() || ec != std::errc() || end != port.data() + port.size() || value == 0 ||
        value > 65535) {
      throw bad(fmt::format("bad port '{}'", port));
    }
    if (colon == 0) throw bad("no host");
  }
  while (!path.empty() && path.back() == '/') path.remove_suffix(1);
  if (path.size() >= 3 && path.substr(path.size() - 3) == "/v1") path.remove_suffix(3);
  ServerEndpoint endpoint;
  endpoint.origin = fmt::format("{}://{}", scheme, authority);
  endpoint.base_path = std::string(path);
  return endpoint;
}

std::vector<ServedModel> list_models(const ServerEndpoint& endpoint) {
  httplib::Client client(endpoint.origin);
  configure_client(client, endpoint);
  // A model list is one small answer, not a stream that may rightly stay silent for minutes: a
  // server that accepted the connection and says nothing is named after kModelListTimeoutS,
  // not after --timeout's 600 s of no output at all.
  const double wait_s = std::min(endpoint.read_timeout_s, kModelListTimeoutS);
  client.set_read_timeout(
      std::chrono::duration_cast<std::chrono::microseconds>(std::chrono::duration<double>(wait_s)));
  const std::string url = endpoint.origin + endpoint.base_path + "/v1/models";
  const auto asked = std::chrono::steady_clock::now();
  httplib::Result result = client.Get(endpoint.base_path + "/v1/models");
  const double waited =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - asked).count();
  // A read that failed at once is a closed connection (another protocol on that port), not silence.
  if (!result && result.error() == httplib::Error::Read && waited >= 0.99 * wait_s) {
    throw core::Error(fmt::format("GET {}: the server accepted the connection but sent no answer "
                                  "in {:g} s",
                                  url, wait_s),
                      HW_UNAVAILABLE);
  }
  if (!result) {
    throw core::Error(fmt::format("GET {}: {}", url, transport_failure(result.error(), endpoint)),
                      HW_UNAVAILABLE);
  }
  if (result->status == 401 || result->status == 403) {
    // Every request of the run would be refused the same way: say how to send a key.
    throw core::Error(
        fmt::format("GET {}: {}; {}", url, http_error_text(result->status, result->body),
                    endpoint.api_key.empty()
                        ? "the server wants an API key: give it with --api-key-file"
                        : "the server refused the key given with --api-key-file"),
        HW_FAILED_PRECONDITION);
  }
  if (result->status != 200) {
    // The server is there but lists no models: with --model a run can still go ahead.
    throw core::Error(fmt::format("GET {}: {}", url, http_error_text(result->status, result->body)),
                      result->status == 404 ? HW_NOT_FOUND : HW_INTERNAL);
  }
  const nlohmann::json doc = nlohmann::json::parse(result->body, nullptr, false);
  if (doc.is_discarded() || !doc.is_object() || !doc.contains("data") || !doc["data"].is_array()) {
    throw core::Error(fmt::format("GET {}: the answer is not an OpenAI model list", url));
  }
  std::vector<ServedModel> models;
  for (const nlohmann::json& entry : doc["data"]) {
    if (!entry.is_object() || !entry.contains("id") || !entry["id"].is_string()) {
      throw core::Error(fmt::format("GET {}: a model entry has no string 'id'", url));
    }
    ServedModel& m = models.emplace_back();
    m.id = entry["id"].get<std::string>();
    m.vocab_size = optional_count(entry, "vocab_size");
    if (!m.vocab_size) m.vocab_size = optional_count(entry, "vocab");
    m.max_model_len = optional_count(entry, "max_model_len");
  }
  return models;
}

}  // namespace headway::serving::bench
