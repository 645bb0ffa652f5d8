#include <headway/core/option_values.h>

#include <headway/sdk/status.hpp>
#include <nlohmann/json.hpp>
#include <string>

namespace headway::core {

nlohmann::json options_to_json(const hw_options& options) {
  nlohmann::json out = nlohmann::json::object();
  for (uint32_t i = 0; i < options.count; ++i) {
    const hw_option_value& v = options.values[i];
    const std::string key(sdk::view(v.key));
    switch (v.type) {
      case HW_OPTION_BOOL:
        out[key] = v.int_value != 0;
        break;
      case HW_OPTION_INT:
        out[key] = v.int_value;
        break;
      case HW_OPTION_DOUBLE:
        out[key] = v.double_value;
        break;
      default:
        out[key] = std::string(sdk::view(v.string_value));
    }
  }
  return out;
}

}  // namespace headway::core
