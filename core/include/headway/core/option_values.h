// A plugin's options as they took effect (the schema's defaults filled in), for reports that must
// say what ran: the JSON of every value, and the TOML text of the ones that say what it is.
//
// Threading: pure functions of their arguments.
#pragma once

#include <headway/abi.h>

#include <nlohmann/json_fwd.hpp>
#include <string>

namespace headway::core {

// Every option of `options` (as PluginOptions::view() holds them, defaults included) by key:
// booleans, integers, numbers and strings as JSON's.
nlohmann::json options_to_json(const hw_options& options);

// "gpu = \"h100\", model = \"llama-3.3-70b\", tensor_parallel = 4": every option that picks from
// a list (a preset: default or not), and the others whose value differs from the default
// `descriptor`'s schema gives, in the schema's order, as a TOML inline table's body; "" when there
// is none.
std::string options_summary_text(const hw_plugin_descriptor& descriptor, const hw_options& options);

}  // namespace headway::core
