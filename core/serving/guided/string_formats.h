// JSON Schema's "format" values guided decoding enforces, as regular expressions (regex_syntax.h)
// that a string's characters must match whole. They are the formats OpenAI's structured outputs
// list (date-time, time, date, duration, email, hostname, ipv4, ipv6, uuid) and uri, which
// pydantic's URL types ask for; the expressions follow RFC 3339 (dates, times), ISO 8601
// (durations), RFC 5321's common form (email: no quoted local parts or IP literals), RFC 1123
// (hostnames), RFC 4291 (IPv6, without zone ids or embedded IPv4), RFC 4122 (uuid) and RFC 3986
// (uri: a scheme, ':', then the characters a URI may hold, percent-escapes whole; the parts after
// the scheme are not parsed).
//
// Threading: constant data.
#pragma once

#include <string_view>

namespace headway::serving::guided {

// The expression for `format`, or an empty view when guided decoding does not enforce it.
std::string_view format_pattern(std::string_view format);

// The formats format_pattern() knows, comma-separated, for refusals.
std::string_view known_formats();

}  // namespace headway::serving::guided
