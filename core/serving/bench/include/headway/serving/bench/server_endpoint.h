// Where `headway bench` sends its requests: the server's origin and path prefix from --url, the
// API key from --api-key-file, and what GET /v1/models says the server serves.
//
// Thread-safety: the functions touch no shared state; list_models blocks on the network.
#pragma once

#include <cstdint>
#include <filesystem>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace headway::serving::bench {

struct ServerEndpoint {
  std::string origin;  // "http://host:port", what httplib::Client takes
  std::string
      base_path;  // "" or "/prefix" without a trailing "/"; requests go to base_path + "/v1/..."
  std::string api_key;  // empty: no Authorization header
  double connect_timeout_s = 10;
  double read_timeout_s = 600;  // longest silence inside a stream before the request fails
};

// Accepts http:// and https:// URLs with an optional port and path prefix. A trailing "/v1" is
// dropped, since OpenAI clients are usually given ".../v1" as their base URL. Throws core::Error
// naming the URL and what is wrong (scheme, missing host, bad port, a query or fragment).
ServerEndpoint parse_server_url(std::string_view url);

struct ServedModel {
  std::string id;
  std::optional<uint32_t> vocab_size;     // "vocab_size" or "vocab", when the server says
  std::optional<uint32_t> max_model_len;  // vLLM's and Headway's "max_model_len"
};

// Seconds list_models waits for the answer (or read_timeout_s when shorter).
inline constexpr double kModelListTimeoutS = 30;

// GET /v1/models. Throws core::Error naming the URL when the server cannot be reached, answers
// with another status than 200, sends nothing for kModelListTimeoutS, or answers with something
// that is not an OpenAI model list.
std::vector<ServedModel> list_models(const ServerEndpoint& endpoint);

}  // namespace headway::serving::bench
