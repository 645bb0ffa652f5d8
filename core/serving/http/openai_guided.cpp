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

GuidedOutput from_guided_choice(const nlohmann::json& choices, const std::string& field) {
  if (!choices.is_array()) {
    throw invalid_field(field, field + " must be an array of strings, not " + json_kind(choices));
  }
  if (choices.empty()) throw invalid_field(field, field + " needs at least one choice");
  GuidedOutput out;
  out.kind = GuidedOutput::Kind::kChoice;
  out.field = field;
  for (size_t i = 0; i < choices.size(); ++i) {
    const std::string name = field + "[" + std::to_string(i) + "]";
    if (!choices[i].is_string()) {
      throw invalid_field(name, name + " must be a string, not " + json_kind(choices[i]));
    }
    out.choices.push_back(choices[i].get<std::string>());
  }
  return out;
}

GuidedOutput from_guided_regex(const nlohmann::json& regex, const std::string& field) {
  if (!regex.is_string()) {
    throw invalid_field(
        field, field + " must be a regular expression (a string), not " + json_kind(regex));
  }
  if (regex.get<std::string>().empty()) {
    throw invalid_field(field, field + " must not be empty (it would allow only an empty answer)");
  }
  GuidedOutput out;
  out.kind = GuidedOutput::Kind::kRegex;
  out.field = field;
  out.regex = regex.get<std::string>();
  return out;
}

GuidedOutput from_guided_grammar(const nlohmann::json& grammar, const std::string& field) {
  if (!grammar.is_string()) {
    throw invalid_field(field,
                        field + " must be a GBNF grammar (a string), not " + json_kind(grammar));
  }
  GuidedOutput out;
  out.kind = GuidedOutput::Kind::kGrammar;
  out.field = field;
  out.grammar = grammar.get<std::string>();
  return out;
}

// vLLM's structured_outputs: one of json, regex, choice, grammar or json_object, and options. The
// options that ask for what Headway already does (no free whitespace, no undeclared keys, no
// fallback to another engine) are taken; those that ask for something else are refused.
GuidedOutput from_structured_outputs(const nlohmann::json& spec, std::string_view body) {
  if (!spec.is_object()) {
    throw invalid_field(
        "structured_outputs",
        std::string("structured_outputs must be an object, not ") + json_kind(spec));
  }
  std::vector<GuidedOutput> asked;
  for (const auto& [key, value] : spec.items()) {
    const std::string field = "structured_outputs." + key;
    if (value.is_null()) continue;
    if (key == "json") {
      GuidedOutput out;
      out.kind = GuidedOutput::Kind::kJsonSchema;
      out.field = field;
      if (value.is_string()) {
        out.schema_json = value.get<std::string>();
      } else if (value.is_object() || value.is_boolean()) {
        out.schema_json =
            schema_text(value, body, nlohmann::json::json_pointer("/structured_outputs/json"));
      } else {
        throw invalid_field(field, field + " must be a JSON schema (an object or its text), not " +
                                       json_kind(value));
      }
      asked.push_back(std::move(out));
    } else if (key == "regex") {
      asked.push_back(from_guided_regex(value, field));
    } else if (key == "choice") {
      asked.push_back(from_guided_choice(value, field));
    } else if (key == "grammar") {
      asked.push_back(from_guided_grammar(value, field));
    } else if (key == "json_object") {
      if (!value.is_boolean()) throw invalid_field(field, field + " must be a boolean");
      if (!value.get<bool>()) continue;
      GuidedOutput out;
      out.kind = GuidedOutput::Kind::kJsonObject;
      out.field = field;
      asked.push_back(std::move(out));
    } else if (key == "disable_any_whitespace" || key == "disable_additional_properties" ||
               key == "disable_fallback") {
      if (!value.is_boolean()) throw invalid_field(field, field + " must be a boolean");
    } else if (key == "structural_tag" || key == "whitespace_pattern") {
      throw invalid_field(field, field +
                                     " is not supported by this server (guided decoding "
                                     "takes json, regex, choice, grammar and json_object)");
    } else {
      throw invalid_field(field, field +
                                     " is not a structured_outputs field (json, regex, "
                                     "choice, grammar, json_object, disable_any_whitespace, "
                                     "disable_additional_properties, disable_fallback)");
    }
  }
  if (asked.empty()) {
    throw invalid_field(
        "structured_outputs",
        "structured_outputs needs one of json, regex, choice, grammar or json_object");
  }
  if (asked.size() > 1) {
    throw invalid_field("structured_outputs",
                        "structured_outputs takes only one of json, regex, choice, grammar and "
                        "json_object, not both " +
                            asked[0].field + " and " + asked[1].field);
  }
  return std::move(asked.front());
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
  // Any value but null asks for these: an empty list, pattern or object is refused, not ignored
  // (an empty guided_choice served unconstrained text: helper-130's walk).
  if (const nlohmann::json* choices = fields.find("guided_choice");
      choices && !choices->is_null()) {
    asked.push_back(from_guided_choice(*choices, "guided_choice"));
  }
  if (const nlohmann::json* regex = fields.find("guided_regex"); regex && !regex->is_null()) {
    asked.push_back(from_guided_regex(*regex, "guided_regex"));
  }
  if (const nlohmann::json* grammar = fields.find("guided_grammar");
      grammar && !grammar->is_null()) {
    asked.push_back(from_guided_grammar(*grammar, "guided_grammar"));
  }
  if (const nlohmann::json* spec = fields.find("structured_outputs"); spec && !spec->is_null()) {
    asked.push_back(from_structured_outputs(*spec, body));
  }
  if (asked.size() > 1) {
    throw invalid_field(asked[1].field,
                        "only one of response_format (json_object or json_schema), guided_json, "
                        "guided_choice, guided_regex, guided_grammar and structured_outputs may "
                        "be set");
  }
  return asked.empty() ? GuidedOutput{} : std::move(asked.front());
}

}  // namespace headway::serving::http
