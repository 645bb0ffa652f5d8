#include "string_formats.h"

#include <array>
#include <utility>

namespace headway::serving::guided {

namespace {

#define HW_DATE "[0-9]{4}-(0[1-9]|1[0-2])-(0[1-9]|[12][0-9]|3[01])"
#define HW_TIME                                                                                   \
  "([01][0-9]|2[0-3]):[0-5][0-9]:([0-5][0-9]|60)(\\.[0-9]+)?(Z|z|[+-]([01][0-9]|2[0-3]):[0-5][0-" \
  "9])"
#define HW_LABEL "[A-Za-z0-9]([A-Za-z0-9-]{0,61}[A-Za-z0-9])?"
#define HW_HEX4 "[0-9A-Fa-f]{1,4}"
#define HW_OCTET "(25[0-5]|2[0-4][0-9]|1[0-9][0-9]|[1-9]?[0-9])"

constexpr std::array<std::pair<std::string_view, std::string_view>, 10> kFormats = {{
    {"date", HW_DATE},
    {"time", HW_TIME},
    {"date-time", HW_DATE "[Tt]" HW_TIME},
    // P, then years/months/weeks/days, then T and hours/minutes/seconds; at least one part.
    {"duration",
     "P(([0-9]+Y([0-9]+M)?([0-9]+D)?|[0-9]+M([0-9]+D)?|[0-9]+D)(T([0-9]+H([0-9]+M)?([0-9]+S)?|"
     "[0-9]+M([0-9]+S)?|[0-9]+S))?|T([0-9]+H([0-9]+M)?([0-9]+S)?|[0-9]+M([0-9]+S)?|[0-9]+S)|"
     "[0-9]+W)"},
    {"email", "[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+(\\.[A-Za-z0-9!#$%&'*+/=?^_`{|}~-]+)*@" HW_LABEL
              "(\\." HW_LABEL ")+"},
    {"hostname", HW_LABEL "(\\." HW_LABEL ")*"},
    {"ipv4", "(" HW_OCTET "\\.){3}" HW_OCTET},
    // Eight groups, or fewer around one "::".
    {"ipv6", "(" HW_HEX4 ":){7}" HW_HEX4 "|(" HW_HEX4 ":){1,7}:|(" HW_HEX4 ":){1,6}:" HW_HEX4
             "|(" HW_HEX4 ":){1,5}(:" HW_HEX4 "){1,2}|(" HW_HEX4 ":){1,4}(:" HW_HEX4
             "){1,3}|(" HW_HEX4 ":){1,3}(:" HW_HEX4 "){1,4}|(" HW_HEX4 ":){1,2}(:" HW_HEX4
             "){1,5}|" HW_HEX4 ":(:" HW_HEX4 "){1,6}|:((:" HW_HEX4 "){1,7}|:)"},
    {"uuid", "[0-9A-Fa-f]{8}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{4}-[0-9A-Fa-f]{12}"},
    {"uri", "[A-Za-z][A-Za-z0-9+.-]*:([A-Za-z0-9._~:/?#\\[\\]@!$&'()*+,;=-]|%[0-9A-Fa-f]{2})*"},
}};

#undef HW_DATE
#undef HW_TIME
#undef HW_LABEL
#undef HW_HEX4
#undef HW_OCTET

}  // namespace

std::string_view format_pattern(std::string_view format) {
  for (const auto& [name, pattern] : kFormats) {
    if (name == format) return pattern;
  }
  return {};
}

std::string_view known_formats() {
  return "date, time, date-time, duration, email, hostname, ipv4, ipv6, uuid, uri";
}

}  // namespace headway::serving::guided
