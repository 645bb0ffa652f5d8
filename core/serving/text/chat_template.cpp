#include "headway/serving/chat_template.h"

#include <headway/core/error.h>
#include <headway/core/input_file.h>
#include <headway/serving/json_text.h>

#include <algorithm>
#include <nlohmann/json.hpp>
#include <string>
#include <vector>

#include "jinja_evaluator.h"
#include "jinja_lexer.h"
#include "jinja_parser.h"

namespace headway::serving {

struct ChatTemplate::Parsed {
  std::string origin;
  std::vector<jinja::Node> nodes;
  std::string bos_token;
  std::string eos_token;
};

namespace {

std::string special_text(const core::Tokenizer& tokenizer, int32_t id) {
  return id >= 0 ? tokenizer.special_token_text(id) : std::string();
}

// tokenizer_config.json's chat_template, or nullopt when it has none.
std::optional<std::string> config_template(const std::filesystem::path& file) {
  const nlohmann::json j = core::read_json_file(file);
  if (!j.is_object() || !j.contains("chat_template") || j["chat_template"].is_null()) {
    return std::nullopt;
  }
  const nlohmann::json& t = j["chat_template"];
  if (t.is_string()) return t.get<std::string>();
  if (t.is_array()) {
    // Several named templates (e.g. "default" and "tool_use"): the default one serves chat.
    for (const nlohmann::json& entry : t) {
      if (entry.is_object() && entry.value("name", nlohmann::json()) == "default" &&
          entry.contains("template") && entry["template"].is_string()) {
        return entry["template"].get<std::string>();
      }
    }
    throw core::Error(file.string() +
                      ": field 'chat_template' lists templates but none named \"default\"");
  }
  throw core::Error(file.string() + ": field 'chat_template' must be a string or a list");
}

// A JSON value as the template sees it (Python's json.loads): objects keep their key order.
jinja::Value value_of(const nlohmann::ordered_json& json) {
  switch (json.type()) {
    case nlohmann::ordered_json::value_t::null:
    case nlohmann::ordered_json::value_t::discarded:
      return jinja::Value::none();
    case nlohmann::ordered_json::value_t::boolean:
      return jinja::Value::boolean(json.get<bool>());
    case nlohmann::ordered_json::value_t::number_integer:
      return jinja::Value::integer(json.get<int64_t>());
    case nlohmann::ordered_json::value_t::number_unsigned: {
      const auto u = json.get<uint64_t>();
      // Past int64 (Python's int is unbounded): as a float, close enough for a prompt.
      return u <= static_cast<uint64_t>(INT64_MAX) ? jinja::Value::integer(static_cast<int64_t>(u))
                                                   : jinja::Value::floating(static_cast<double>(u));
    }
    case nlohmann::ordered_json::value_t::number_float:
      return jinja::Value::floating(json.get<double>());
    case nlohmann::ordered_json::value_t::string:
      return jinja::Value::string(json.get<std::string>());
    case nlohmann::ordered_json::value_t::array: {
      jinja::List items;
      items.reserve(json.size());
      for (const auto& item : json) items.push_back(value_of(item));
      return jinja::Value::list(std::move(items));
    }
    case nlohmann::ordered_json::value_t::object: {
      jinja::Names items;
      items.reserve(json.size());
      for (const auto& [key, item] : json.items()) items.emplace_back(key, value_of(item));
      return jinja::Value::dict(std::move(items));
    }
    default:  // binary: JSON text never holds it
      return jinja::Value::none();
  }
}

// `text` parsed, which must be JSON of kind `is_kind`; ServiceError naming `field` otherwise.
nlohmann::ordered_json parse_field(std::string_view text, const std::string& field,
                                   const char* kind,
                                   bool (nlohmann::ordered_json::*is_kind)() const noexcept) {
  // A gRPC client's text: too deep to render safely is refused as not JSON.
  nlohmann::ordered_json json = parse_json_keeping_order(text);
  if (json.is_discarded() || !(json.*is_kind)()) {
    throw ServiceError(ErrorCode::kInvalidArgument,
                       field + " must be a JSON " + kind + " nested at most " +
                           std::to_string(kMaxJsonDepth) + " levels deep",
                       field);
  }
  return json;
}

// True when `text` encodes to one token that the tokenizer writes as `text` (a special token).
bool has_special_token(const core::Tokenizer& tokenizer, const std::string& text) {
  const std::vector<int32_t> ids = tokenizer.encode(text);
  return ids.size() == 1 && tokenizer.special_token_text(ids[0]) == text;
}

}  // namespace

ChatTemplate::ChatTemplate(std::unique_ptr<const Parsed> parsed) : parsed_(std::move(parsed)) {}
ChatTemplate::~ChatTemplate() = default;

std::unique_ptr<ChatTemplate> ChatTemplate::from_string(const std::string& source,
                                                        const std::string& origin,
                                                        const core::Tokenizer& tokenizer) {
  auto parsed = std::make_unique<Parsed>();
  parsed->origin = origin;
  try {
    parsed->nodes = jinja::parse(jinja::tokenize(source));
  } catch (const jinja::SyntaxError& e) {
    throw core::Error(origin + ": line " + std::to_string(e.line) + ": " + e.what());
  }
  parsed->bos_token = special_text(tokenizer, tokenizer.bos());
  parsed->eos_token = special_text(tokenizer, tokenizer.eos());
  return std::unique_ptr<ChatTemplate>(new ChatTemplate(std::move(parsed)));
}

std::unique_ptr<ChatTemplate> ChatTemplate::from_file(const std::filesystem::path& jinja_file,
                                                      const core::Tokenizer& tokenizer) {
  return from_string(core::read_text_file(jinja_file), jinja_file.string(), tokenizer);
}

std::unique_ptr<ChatTemplate> ChatTemplate::load(const std::filesystem::path& checkpoint_dir,
                                                 const core::Tokenizer& tokenizer) {
  if (const auto file = checkpoint_dir / "chat_template.jinja"; std::filesystem::exists(file)) {
    return from_file(file, tokenizer);
  }
  if (const auto file = checkpoint_dir / "tokenizer_config.json"; std::filesystem::exists(file)) {
    if (std::optional<std::string> source = config_template(file)) {
      return from_string(*source, file.string() + " (chat_template)", tokenizer);
    }
  }
  // vLLM refuses chat to a model without a template. The built-in one is Llama 3's, taken only
  // where its role markers mean something: a tokenizer that has them as special tokens (a Llama 3
  // checkpoint without its template), or the byte tokenizer of made-up checkpoints, which has no
  // special tokens at all. Elsewhere the markup would reach the model as plain text it never saw
  // (helper-207: "hi" became 63 tokens of it), so chat is refused, naming what is missing.
  if (tokenizer.kind() != "byte" && !has_special_token(tokenizer, "<|start_header_id|>")) {
    throw core::Error(checkpoint_dir.string() +
                      ": no chat template (neither chat_template.jinja nor tokenizer_config.json's "
                      "chat_template), and the tokenizer lacks the built-in Llama 3 template's "
                      "special tokens (<|start_header_id|>)");
  }
  return from_string(builtin_llama3_source(), "built-in Llama 3 template", tokenizer);
}

const std::string& ChatTemplate::origin() const { return parsed_->origin; }

std::string ChatTemplate::render(const GenerateInput& input) const {
  std::string rendered = render(input.messages, input.add_generation_prompt, input.tools_json,
                                input.template_kwargs_json);
  if (!input.continue_final_message || input.messages.empty()) return rendered;
  return cut_after_final_message(rendered, input.messages.back().content);
}

std::string ChatTemplate::cut_after_final_message(std::string_view rendered,
                                                  std::string_view final_content) {
  constexpr std::string_view kSpace = " \t\n\r\f\v";
  std::string_view stripped = final_content;
  stripped.remove_prefix(std::min(stripped.find_first_not_of(kSpace), stripped.size()));
  const std::string_view left_stripped = stripped;
  const size_t last = stripped.find_last_not_of(kSpace);
  stripped = last == std::string_view::npos ? std::string_view() : stripped.substr(0, last + 1);
  const size_t at = rendered.rfind(stripped);
  if (at == std::string_view::npos) {
    throw ServiceError(ErrorCode::kInvalidArgument,
                       "continue_final_message: the chat template does not write the final "
                       "message's content, so the prompt cannot end inside it",
                       "messages");
  }
  // As Hugging Face does: the content's trailing whitespace stays when the template wrote it.
  const bool kept_as_sent = rendered.substr(at, left_stripped.size()) == final_content;
  return std::string(
      rendered.substr(0, at + (kept_as_sent ? left_stripped.size() : stripped.size())));
}

std::string ChatTemplate::render(std::span<const ChatMessage> messages, bool add_generation_prompt,
                                 std::string_view tools_json,
                                 std::string_view template_kwargs_json) const {
  jinja::List list;
  list.reserve(messages.size());
  for (size_t i = 0; i < messages.size(); ++i) {
    const ChatMessage& m = messages[i];
    jinja::Names message = {{"role", jinja::Value::string(m.role)},
                            {"content", jinja::Value::string(m.content)}};
    if (!m.fields_json.empty()) {
      const std::string field = "messages[" + std::to_string(i) + "].fields_json";
      const nlohmann::ordered_json fields =
          parse_field(m.fields_json, field, "object", &nlohmann::ordered_json::is_object);
      for (const auto& [key, value] : fields.items()) {
        if (key == "role" || key == "content") continue;  // the message's own
        message.emplace_back(key, value_of(value));
      }
    }
    list.push_back(jinja::Value::dict(std::move(message)));
  }
  jinja::Value tools = jinja::Value::none();
  if (!tools_json.empty()) {
    tools = value_of(parse_field(tools_json, "tools", "array", &nlohmann::ordered_json::is_array));
  }
  jinja::Names globals = {
      {"messages", jinja::Value::list(std::move(list))},
      {"add_generation_prompt", jinja::Value::boolean(add_generation_prompt)},
      {"bos_token", jinja::Value::string(parsed_->bos_token)},
      {"eos_token", jinja::Value::string(parsed_->eos_token)},
      {"tools", std::move(tools)},
      {"documents", jinja::Value::none()},
  };
  if (!template_kwargs_json.empty()) {
    // vLLM's chat_template_kwargs (Qwen3's enable_thinking, ...): more variables, never one of
    // those above, which the request's own fields set.
    const nlohmann::ordered_json kwargs = parse_field(template_kwargs_json, "chat_template_kwargs",
                                                      "object", &nlohmann::ordered_json::is_object);
    const size_t fixed = globals.size();
    for (const auto& item : kwargs.items()) {
      const std::string& key = item.key();
      const auto end = globals.begin() + static_cast<std::ptrdiff_t>(fixed);
      if (std::find_if(globals.begin(), end, [&](const auto& g) { return g.first == key; }) !=
          end) {
        throw ServiceError(ErrorCode::kInvalidArgument,
                           "chat_template_kwargs." + key +
                               ": the request sets this template variable itself; it cannot be "
                               "given as a keyword argument",
                           "chat_template_kwargs." + key);
      }
      globals.emplace_back(key, value_of(item.value()));
    }
  }
  try {
    return jinja::render(parsed_->nodes, globals);
  } catch (const jinja::TemplateException& e) {
    throw ServiceError(ErrorCode::kInvalidArgument, e.what(), "messages");
  } catch (const jinja::RenderError& e) {
    // The template ran into something this conversation makes impossible (a missing key, a type
    // it cannot combine): the request is refused, with where the template failed.
    throw ServiceError(ErrorCode::kInvalidArgument,
                       "the chat template (" + parsed_->origin + ", line " +
                           std::to_string(e.line) + ") failed on these messages: " + e.what(),
                       "messages");
  }
}

}  // namespace headway::serving
