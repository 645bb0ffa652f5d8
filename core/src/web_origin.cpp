#include <headway/core/web_origin.h>

#include <algorithm>
#include <cctype>

namespace headway::core {
namespace {

bool is_scheme(std::string_view scheme) {
  if (scheme.empty() || std::isalpha(static_cast<unsigned char>(scheme[0])) == 0) return false;
  for (char c : scheme) {
    if (std::isalnum(static_cast<unsigned char>(c)) == 0 && c != '+' && c != '-' && c != '.') {
      return false;
    }
  }
  return true;
}

bool has_upper_case(std::string_view text) {
  for (char c : text) {
    if (c >= 'A' && c <= 'Z') return true;
  }
  return false;
}

}  // namespace

std::string why_not_web_origin(std::string_view origin) {
  const std::string quoted = "\"" + std::string(origin) + "\"";
  if (origin == "*") return "";
  if (origin.empty()) return "an origin must not be empty (\"*\" allows every origin)";
  if (origin == "null") {
    return "\"null\" is the origin of sandboxed pages and file:// documents, which any page can "
           "give itself, so allowing it would allow every page; write \"*\" if that is meant";
  }
  const size_t separator = origin.find("://");
  if (separator == std::string_view::npos) {
    return quoted + " is not an origin: write scheme://host[:port], e.g. \"https://" +
           std::string(origin.substr(0, origin.find('/'))) + "\"";
  }
  if (!is_scheme(origin.substr(0, separator))) {
    return quoted + " is not an origin: its scheme \"" + std::string(origin.substr(0, separator)) +
           "\" is not a letter followed by letters, digits, '+', '-' or '.'";
  }
  const std::string_view scheme = origin.substr(0, separator);
  const std::string_view authority = origin.substr(separator + 3);
  for (char c : authority) {
    if (c == '/' || c == '?' || c == '#') {
      const std::string_view bare = origin.substr(0, separator + 3 + authority.find(c));
      return quoted + " has " +
             (c == '/' && authority.back() == '/' && authority.find('/') + 1 == authority.size()
                  ? std::string("a trailing slash")
                  : std::string("a path, query or fragment")) +
             ", which browsers never send in Origin: write \"" + std::string(bare) + "\"";
    }
    if (static_cast<unsigned char>(c) >= 0x80) {
      return quoted +
             " has a host that is not ASCII; browsers send an international name in "
             "its punycode form (\"xn--...\"): write that";
    }
    if (c == '@' || c == '*' || std::isspace(static_cast<unsigned char>(c)) != 0 ||
        std::iscntrl(static_cast<unsigned char>(c)) != 0) {
      return quoted + " is not an origin: its host may not hold '" +
             (std::isspace(static_cast<unsigned char>(c)) != 0 ? std::string("whitespace")
                                                               : std::string(1, c)) +
             "' (one entry per origin; \"*\" alone allows every origin)";
    }
  }
  // The host ends at the port's colon; an IPv6 address is bracketed and holds colons itself.
  const bool bracketed = !authority.empty() && authority[0] == '[';
  size_t host_end =
      bracketed ? authority.find(']') : std::min(authority.find(':'), authority.size());
  if (bracketed) {
    if (host_end == std::string_view::npos) return quoted + " has an unclosed '[' in its host";
    ++host_end;
  }
  if (host_end == 0) return quoted + " has no host";
  if (host_end < authority.size()) {
    if (authority[host_end] != ':') return quoted + " has text after its host's ']'";
    const std::string_view port = authority.substr(host_end + 1);
    bool digits = !port.empty() && port.size() <= 5;
    for (char c : port) digits = digits && c >= '0' && c <= '9';
    const unsigned long number = digits ? std::stoul(std::string(port)) : 0;
    if (number == 0 || number > 65535) {
      return quoted + " has an invalid port \"" + std::string(port) + "\" (1 to 65535)";
    }
    if ((scheme == "https" && number == 443) || (scheme == "http" && number == 80)) {
      return quoted +
             " names its scheme's default port, which browsers leave out of Origin: write \"" +
             std::string(origin.substr(0, separator + 3 + host_end)) + "\"";
    }
    if (port[0] == '0') {
      return quoted + " has a port with a leading zero, which browsers never write: write \"" +
             std::string(origin.substr(0, separator + 3 + host_end + 1)) + std::to_string(number) +
             "\"";
    }
  }
  // Browsers lower-case every scheme, and the host of the web's own schemes; another scheme's host
  // (a browser extension's id) is sent as it is.
  const bool special =
      scheme == "http" || scheme == "https" || scheme == "ws" || scheme == "wss" || scheme == "ftp";
  if (has_upper_case(scheme) || (special && has_upper_case(authority))) {
    return quoted + " has upper-case letters; browsers write " +
           (has_upper_case(scheme) ? "a scheme" : "a web origin's host") + " in lower case";
  }
  return "";
}

std::string why_no_credentials_with(const std::vector<std::string>& allowed_origins) {
  if (allowed_origins.empty()) {
    return "credentials need cors_allowed_origins: with no origin listed, no browser request is "
           "allowed";
  }
  if (std::find(allowed_origins.begin(), allowed_origins.end(), "*") != allowed_origins.end()) {
    return "not with cors_allowed_origins = [\"*\"], which would let every web page send its "
           "visitors' cookies and HTTP credentials here and read the answers; list the origins";
  }
  return "";
}

}  // namespace headway::core
