#include "openai_tools.h"

#include <headway/serving/echoed_input.h>
#include <headway/serving/json_text.h>
#include <headway/serving/service_error.h>

#include <optional>

#include "api_error.h"
#include "json_schema.h"

namespace headway::serving::http {
namespace {

std::string indexed(const std::string& path, size_t i) {
  return path + "[" + std::to_string(i) + "]";
}

const nlohmann::json& object_at(const nlohmann::json& value, const std::string& name) {
  if (!value.is_object()) {
    throw invalid_field(name, name + " must be an object, not " + json_kind(value));
  }
  return value;
}

// A "type" that may be absent (vLLM's default) but otherwise must be "function".
void check_function_type(const FieldReader& fields) {
  if (auto type = fields.string("type"); type && *type != "function") {
    throw not_supported(fields.name("type"),
                        "tool type " + quote_input(*type) + " (only \"function\")");
  }
}

std::string required_name(const FieldReader& function) {
  const auto name = function.string("name");
  if (!name || name->empty()) {
    throw invalid_field(function.name("name"), function.name("name") + " is required");
  }
  return *name;
}

void check_tool(const nlohmann::json& tool, const std::string& path) {
  const FieldReader fields(object_at(tool, path), path);
  check_function_type(fields);
  const nlohmann::json* function = fields.find("function");
  if (function == nullptr) {
    throw invalid_field(fields.name("function"), fields.name("function") + " is required");
  }
  const FieldReader function_fields(object_at(*function, fields.name("function")),
                                    fields.name("function"));
  required_name(function_fields);
  function_fields.string("description");
  if (const nlohmann::json* parameters = function_fields.find("parameters")) {
    object_at(*parameters, function_fields.name("parameters"));  // a JSON Schema object
  }
  function_fields.boolean("strict");
}

// A tool's parameters schema as JSON text in the client's key order; a tool without one takes
// any object.
std::string parameters_schema(const nlohmann::ordered_json& tool) {
  const auto& function = tool.at("function");
  const auto parameters = function.find("parameters");
  // null reads as absent, as check_tool read it (clients send explicit nulls); {} as any object,
  // not any value.
  const bool none = parameters == function.end() || parameters->is_null() ||
                    (parameters->is_object() && parameters->empty());
  return none ? std::string(R"({"type": "object"})") : parameters->dump();
}

// A tool's schema moved to `base` (a JSON pointer) inside a larger one: its local $refs ("#",
// "#/$defs/...") made to point where it now is. The values of enum, const, default and examples are
// data and stay as they are; the members of properties and $defs are schemas whatever their names.
void rebase_refs(nlohmann::ordered_json& schema, const std::string& base, bool named_schemas) {
  if (schema.is_array()) {
    for (auto& item : schema) rebase_refs(item, base, false);
    return;
  }
  if (!schema.is_object()) return;
  for (auto& [key, value] : schema.items()) {
    if (named_schemas) {
      rebase_refs(value, base, false);
    } else if (key == "$ref" && value.is_string()) {
      const std::string ref = value.get<std::string>();
      if (ref.starts_with("#")) value = "#" + base + ref.substr(1);
    } else if (key != "enum" && key != "const" && key != "default" && key != "examples") {
      rebase_refs(value, base,
                  key == "properties" || key == "$defs" || key == "definitions" ||
                      key == "patternProperties" || key == "dependentSchemas");
    }
  }
}

// tool_choice "required" or naming a function: the guided output that forces the calls, as vLLM
// builds it (the named function's parameters; for "required", an array of {"name",
// "parameters"} objects, one per call). Each tool's schema is compiled here once so that a
// refusal names the tool and the part of its schema.
void force_calls(const nlohmann::json& tools, const nlohmann::ordered_json& ordered_tools,
                 const std::optional<std::string>& named, ToolRequest& out) {
  out.guided.kind = GuidedOutput::Kind::kJsonSchema;
  if (named) {
    for (size_t i = 0; i < tools.size(); ++i) {
      if (tools[i].at("function").at("name") != *named) continue;
      out.forced_format = ToolCallFormat::kNamedArguments;
      out.function = *named;
      out.guided.schema_json = parameters_schema(ordered_tools.at(i));
      out.guided.field = indexed("tools", i) + ".function.parameters";
      return;
    }
    throw invalid_field(
        "tool_choice.function.name",
        "tool_choice names the function " + quote_input(*named) + ", which is not among the tools");
  }
  nlohmann::ordered_json calls = nlohmann::ordered_json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string schema = parameters_schema(ordered_tools.at(i));
    const std::string field = indexed("tools", i) + ".function.parameters";
    try {
      guided::compile_json_schema(schema, field);
    } catch (const ServiceError& e) {
      throw invalid_field(e.param(), e.what());
    }
    nlohmann::ordered_json call = nlohmann::ordered_json::object();
    call["type"] = "object";
    call["properties"]["name"]["enum"] =
        nlohmann::ordered_json::array({tools[i]["function"]["name"]});
    nlohmann::ordered_json parameters = parse_json_keeping_order(schema);
    rebase_refs(parameters, "/items/anyOf/" + std::to_string(i) + "/properties/parameters", false);
    call["properties"]["parameters"] = std::move(parameters);
    call["required"] = nlohmann::ordered_json::array({"name", "parameters"});
    calls.push_back(std::move(call));
  }
  nlohmann::ordered_json list = nlohmann::ordered_json::object();
  list["type"] = "array";
  list["minItems"] = 1;
  if (!out.parallel_calls) list["maxItems"] = 1;
  list["items"]["anyOf"] = std::move(calls);
  out.forced_format = ToolCallFormat::kCallList;
  out.guided.schema_json = list.dump();
  out.guided.field = "tool_choice";
  try {
    guided::compile_json_schema(out.guided.schema_json, out.guided.field);  // the whole, once more
  } catch (const ServiceError& e) {
    throw invalid_field(e.param(), e.what());
  }
}

// An assistant turn's tool_calls as the template reads them: arguments as objects.
nlohmann::ordered_json template_tool_calls(const nlohmann::json& calls,
                                           const nlohmann::ordered_json& ordered_calls,
                                           const std::string& path) {
  if (!calls.is_array()) {
    throw invalid_field(path, path + " must be an array, not " + json_kind(calls));
  }
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t j = 0; j < calls.size(); ++j) {
    const std::string call_path = indexed(path, j);
    const FieldReader call(object_at(calls[j], call_path), call_path);
    check_function_type(call);
    call.string("id");
    const nlohmann::json* function = call.find("function");
    if (function == nullptr) {
      throw invalid_field(call.name("function"), call.name("function") + " is required");
    }
    const std::string function_path = call.name("function");
    const FieldReader function_fields(object_at(*function, function_path), function_path);
    required_name(function_fields);
    const std::string arguments_path = function_fields.name("arguments");
    const nlohmann::json* arguments = function_fields.find("arguments");  // null: none

    nlohmann::ordered_json entry = ordered_calls.at(j);
    nlohmann::ordered_json& entry_arguments = entry["function"]["arguments"];
    if (arguments == nullptr || (arguments->is_string() && arguments->get<std::string>().empty())) {
      entry_arguments = nlohmann::ordered_json::object();  // a call without arguments, as vLLM
    } else if (arguments->is_string()) {
      // OpenAI sends the arguments as JSON text; templates index into them (vLLM parses them).
      entry_arguments = parse_json_keeping_order(arguments->get<std::string>());
      if (entry_arguments.is_discarded() || !entry_arguments.is_object()) {
        throw invalid_field(arguments_path, arguments_path +
                                                " must be the JSON text of an object, as the "
                                                "model's tool call gave it");
      }
    } else if (!arguments->is_object()) {
      throw invalid_field(arguments_path, arguments_path + " must be a string of JSON, not " +
                                              json_kind(*arguments));
    }
    out.push_back(std::move(entry));
  }
  return out;
}

}  // namespace

ToolRequest parse_tool_request(const FieldReader& fields, const nlohmann::ordered_json& body) {
  for (const char* legacy : {"functions", "function_call"}) {
    if (is_set(fields.find(legacy))) {
      throw not_supported(legacy, std::string(legacy) + " (OpenAI's older form; send tools)");
    }
  }
  ToolRequest out;
  const nlohmann::json* tools = fields.find("tools");
  if (tools != nullptr) {
    if (!tools->is_array()) {
      throw invalid_field("tools", std::string("tools must be an array, not ") + json_kind(*tools));
    }
    for (size_t i = 0; i < tools->size(); ++i) check_tool((*tools)[i], indexed("tools", i));
    if (!tools->empty()) out.tools_json = body.at("tools").dump();
  }
  const bool has_tools = !out.tools_json.empty();

  std::string choice = has_tools ? "auto" : "none";
  if (const nlohmann::json* given = fields.find("tool_choice")) {
    if (given->is_string()) {
      choice = given->get<std::string>();
      if (choice != "none" && choice != "auto" && choice != "required") {
        throw invalid_field("tool_choice", "tool_choice " + quote_input(choice) +
                                               " is not one of \"none\", \"auto\", \"required\" "
                                               "or {\"type\": \"function\", \"function\": "
                                               "{\"name\": ...}}");
      }
    } else {
      const FieldReader named(object_at(*given, "tool_choice"), "tool_choice");
      check_function_type(named);
      const nlohmann::json* function = named.find("function");
      if (function == nullptr) {
        throw invalid_field("tool_choice.function", "tool_choice.function is required");
      }
      required_name(
          FieldReader(object_at(*function, "tool_choice.function"), "tool_choice.function"));
      choice = "named";
    }
  }
  out.parallel_calls = fields.boolean("parallel_tool_calls").value_or(true);
  if (choice == "required" || choice == "named") {
    const std::string what =
        choice == "required" ? "tool_choice \"required\"" : "tool_choice naming a function";
    // OpenAI refuses a forced call without tools; with them, vLLM forces it by guided decoding.
    if (!has_tools) throw invalid_field("tool_choice", what + " needs tools");
    force_calls(*tools, body.at("tools"),
                choice == "named"
                    ? std::optional<std::string>(
                          fields.find("tool_choice")->at("function").at("name").get<std::string>())
                    : std::nullopt,
                out);
  }
  out.parse_calls = has_tools && choice != "none";
  return out;
}

std::string parse_message_fields(const nlohmann::json& message,
                                 const nlohmann::ordered_json& ordered_message,
                                 const std::string& path, const std::string& role) {
  const FieldReader fields(message, path);
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  if (const nlohmann::json* calls = fields.find("tool_calls"); is_set(calls)) {
    if (role != "assistant") {
      throw invalid_field(fields.name("tool_calls"),
                          fields.name("tool_calls") + " is only for assistant messages");
    }
    out["tool_calls"] =
        template_tool_calls(*calls, ordered_message.at("tool_calls"), fields.name("tool_calls"));
  }
  const auto call_id = fields.string("tool_call_id");
  if (role == "tool") {
    if (!call_id || call_id->empty()) {
      throw invalid_field(fields.name("tool_call_id"),
                          fields.name("tool_call_id") +
                              " is required: the id of the tool call this message answers");
    }
    out["tool_call_id"] = *call_id;
  }
  if (auto name = fields.string("name")) out["name"] = *name;
  // An earlier answer's thinking, for templates that render it (Qwen3's reads reasoning_content):
  // under both names, whichever the client used (vLLM's current "reasoning" or the older one).
  // Both given: vLLM's current name wins.
  if (role == "assistant") {
    std::optional<std::string> reasoning = fields.string("reasoning");
    if (!reasoning) reasoning = fields.string("reasoning_content");
    if (reasoning) {
      out["reasoning"] = *reasoning;
      out["reasoning_content"] = *reasoning;
    }
  }
  return out.empty() ? std::string() : out.dump();
}

}  // namespace headway::serving::http
