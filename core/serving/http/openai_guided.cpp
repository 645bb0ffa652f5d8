#include "openai_guided.h"

#include <headway/serving/json_text.h>

#include <string>
#include <vector>

#include "api_error.h"
#include "json_fields.h"

namespace headway::serving::http {

namespace {

// The schema at `path` of the body, as JSON text in the client's key order.
std::string schema_text(const nlohmann::json& schema, std::string_view body,
                        const nlohmann::json::json_pointer& path) {
  if (!schema.is_object()) return schema.dump();  // a boolean schema, or a string (see below)
  const nlohmann::ordered_json ordered = parse_json_keeping_order(body);
  const auto ordered_path = nlohmann::ordered_json::json_pointer(path.to_string());
  return ordered.at(ordered_path).dump();
}

GuidedOutput from_response_format(const nlohmann::json& format, std::string_view body) {
  GuidedOutput out;
  if (!format.is_object()) {
    throw invalid_field("response_format",
                        std::string("response_format must be an object, not ") + json_kind(format));
  }
  const FieldReader fields(format, "response_format");
  const std::string type = fields.string("type").value_or("");
  if (type == "text") return out;
  if (type == "json_object") {
    out.kind = GuidedOutput::Kind::kJsonObject;
    out.field = "response_format";
    return out;
  }
  if (type != "json_schema") {
    throw invalid_field(
        "response_format.type",
        "response_format.type must be \"text\", \"json_object\" or \"json_schema\"");
  }
  const nlohmann::json* spec = fields.find("json_schema");
  if (spec == nullptr || !spec->is_object()) {
    throw invalid_field("response_format.json_schema",
                        "response_format.json_schema must be an object with the schema");
  }
  const auto schema = spec->find("schema");
  if (schema == spec->end() || schema->is_null()) {
    throw invalid_field("response_format.json_schema.schema",
                        "response_format.json_schema.schema is required");
  }
  if (!schema->is_object() && !schema->is_boolean()) {
    throw invalid_field("response_format.json_schema.schema",
                        std::string("response_format.json_schema.schema must be an object, not ") +
                            json_kind(*schema));
  }
  out.kind = GuidedOutput::Kind::kJsonSchema;
  out.field = "response_format.json_schema.schema";
  out.schema_json = schema_text(
      *schema, body, nlohmann::json::json_pointer("/response_format/json_schema/schema"));
  return out;
}

GuidedOutput from_guided_json(const nlohmann::json& schema, std::string_view body) {
  GuidedOutput out;
  out.kind = GuidedOutput::Kind::kJsonSchema;
  out.field = "guided_json";
  if (schema.is_string()) {
    out.schema_json = schema.get<std::string>();  // vLLM takes the schema as JSON text too
  } else if (schema.is_object() || schema.is_boolean()) {
    out.schema_json = schema_text(schema, body, nlohmann::json::json_pointer("/guided_json"));
  } else {
    throw invalid_field("guided_json", std::string("guided_json must be a JSON schema (an object "
                                                   "or its text), not ") +
                                           json_kind(schema));
  }
  return out;
}

GuidedOutput from_guided_choice(const nlohmann::json& choices) {
  if (!choices.is_array()) {
    throw invalid_field("guided_choice", std::string("guided_choice must be an array of strings, "
                                                     "not ") +
                                             json_kind(choices));
  }
  GuidedOutput out;
  out.kind = GuidedOutput::Kind::kChoice;
  out.field = "guided_choice";
  for (size_t i = 0; i < choices.size(); ++i) {
    const std::string name = "guided_choice[" + std::to_string(i) + "]";
    if (!choices[i].is_string()) {
      throw invalid_field(name, name + " must be a string, not " + json_kind(choices[i]));
    }
    out.choices.push_back(choices[i].get<std::string>());
  }
  return out;
}

}  // namespace

GuidedOutput parse_guided_output(const nlohmann::json& json, std::string_view body) {
  const FieldReader fields(json, "");
  std::vector<GuidedOutput> asked;
  if (const nlohmann::json* format = fields.find("response_format")) {
    GuidedOutput guided = from_response_format(*format, body);
    if (guided.kind != GuidedOutput::Kind::kNone) asked.push_back(std::move(guided));
  }
  if (const nlohmann::json* schema = fields.find("guided_json")) {
    asked.push_back(from_guided_json(*schema, body));
  }
  if (const nlohmann::json* choices = fields.find("guided_choice"); is_set(choices)) {
    asked.push_back(from_guided_choice(*choices));
  }
  if (asked.size() > 1) {
    throw invalid_field(asked[1].field,
                        "only one of response_format (json_object or "
                        "json_schema), guided_json and guided_choice may be set");
  }
  return asked.empty() ? GuidedOutput{} : std::move(asked.front());
}

}  // namespace headway::serving::http
