// Client input repeated in an error message ("model \"x\" is not served here"). A client may send
// megabytes in any string field; the message stays short: a gRPC status must fit the client's
// metadata limit (8 KiB by default, else the client sees RESOURCE_EXHAUSTED instead of the
// refusal), and a log line should stay one line.
//
// Threading: pure function.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>

namespace headway::serving {

// How much of a client's string an error message repeats.
inline constexpr size_t kMaxEchoedBytes = 64;

// `input` in double quotes: at most kMaxEchoedBytes of it, cut between UTF-8 characters, with
// quotes, backslashes, control bytes and bytes that are not UTF-8 escaped (\", \\, \xNN), so
// the result is valid UTF-8 on one line. A longer input is followed by its size:
// "abc…" (5242880 bytes).
std::string quote_input(std::string_view input);

// `message` cut to at most `max_bytes` (between UTF-8 characters) and followed by
// "… (N bytes)" when longer: for a message that may carry more than anyone reads, such as one
// built from another process's error.
std::string shortened(std::string message, size_t max_bytes);

}  // namespace headway::serving
