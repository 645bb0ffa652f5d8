#include "responses_request.h"

#include <fmt/format.h>
#include <headway/core/sampling_params.h>
#include <headway/core/utf8.h>

#include <algorithm>
#include <cctype>
#include <optional>
#include <unordered_set>

#include "client_request_id.h"
#include "headway/serving/echoed_input.h"
#include "headway/serving/json_text.h"
#include "headway/serving/random_bits.h"
#include "json_fields.h"

namespace headway::serving::http {
namespace {

// What include asks for to have each output_text's logprobs.
constexpr std::string_view kLogprobsInclude = "message.output_text.logprobs";

// Fields that mean the same in both APIs (OpenAI's and vLLM's extensions): they go to the chat
// request as written, and the chat parser checks them under their own names.
constexpr const char* kSharedFields[] = {
    "model", "temperature", "top_p", "top_k", "min_p", "seed", "stop", "presence_penalty",
    "frequency_penalty", "repetition_penalty", "logit_bias", "min_tokens", "ignore_eos",
    "stop_token_ids", "allowed_token_ids", "bad_words", "include_stop_str_in_output",
    "skip_special_tokens", "priority", "request_class", "truncate_prompt_tokens", "chat_template",
    "chat_template_kwargs", "logits_processors", "parallel_tool_calls", "stream",
    "structured_outputs",
    // vLLM's older names for it, which a chat request takes
    "guided_json", "guided_choice", "guided_regex", "guided_grammar"};

std::string indexed(std::string_view name, size_t index) {
  return fmt::format("{}[{}]", name, index);
}

ApiError missing(const std::string& name) { return invalid_field(name, name + " is required"); }

// A string field that must be there.
std::string required_string(const FieldReader& fields, std::string_view key) {
  std::optional<std::string> value = fields.string(key);
  if (!value) throw missing(fields.name(key));
  return std::move(*value);
}

// The texts of `parts` (an array of typed parts at `name`), joined by newlines as the chat API
// joins a message's parts. `text_key(type)`: the field that holds a part's text, or null for a
// type that is refused, as "<kind> <type> (<taken>)".
std::string joined_parts(const nlohmann::json& parts, const std::string& name,
                         const char* (*text_key)(std::string_view type), std::string_view kind,
                         std::string_view taken) {
  std::string text;
  for (size_t j = 0; j < parts.size(); ++j) {
    const nlohmann::json& part = parts[j];
    const std::string part_name = indexed(name, j);
    if (!part.is_object()) {
      throw invalid_field(part_name, part_name + " must be an object, not " + json_kind(part));
    }
    const FieldReader part_fields(part, part_name);
    const std::string type = required_string(part_fields, "type");
    const char* key = text_key(type);
    if (key == nullptr) {
      throw not_supported(part_fields.name("type"),
                          fmt::format("{} {} ({})", kind, quote_input(type), taken));
    }
    if (j > 0) text += '\n';
    text += required_string(part_fields, key);
  }
  return text;
}

// The object without its "type" (a flat tool or text.format, nested the chat API's way).
nlohmann::ordered_json all_but_type(const nlohmann::ordered_json& object) {
  nlohmann::ordered_json out = nlohmann::ordered_json::object();
  for (const auto& [key, value] : object.items()) {
    if (key != "type") out[key] = value;
  }
  return out;
}

bool name_char(char c) { return std::isalnum(static_cast<unsigned char>(c)) != 0 || c == '_'; }

// The name that starts at text[at] (its letters, digits and underscores).
std::string_view name_at(std::string_view text, size_t at) {
  size_t end = at;
  while (end < text.size() && name_char(text[end])) ++end;
  return text.substr(at, end - at);
}

// Builds the chat messages from the input items, recording where each came from.
class InputMessages {
 public:
  explicit InputMessages(FieldRenames& renames) : renames_(renames) {}

  void add_instructions(const std::string& text) {
    renames_.add(indexed("messages", messages_.size()) + ".content", "instructions");
    add({{"role", "system"}, {"content", text}}, "instructions");
  }

  // input as one string: a user message.
  void add_text(const std::string& text) {
    renames_.add(indexed("messages", messages_.size()) + ".content", "input");
    add({{"role", "user"}, {"content", text}}, "input");
  }

  // The item at `path` (input[i], or an item of the conversation previous_response_id
  // continues): a message, a function call, its output or an earlier answer's reasoning.
  void add_item(const nlohmann::json& item, const nlohmann::ordered_json& ordered,
                const std::string& path) {
    if (!item.is_object()) {
      throw invalid_field(path, path + " must be an object, not " + json_kind(item));
    }
    const FieldReader fields(item, path);
    // An item without a type is a message (EasyInputMessage: role and content).
    const std::string type = fields.string("type").value_or("message");
    if (type == "message") {
      add_message(fields, ordered, path);
    } else if (type == "function_call") {
      add_call(fields, path);
    } else if (type == "function_call_output") {
      add_call_output(fields, path);
    } else if (type == "reasoning") {
      take_reasoning(item, path);
    } else if (type == "item_reference") {
      throw not_supported(fields.name("type"),
                          "input item type \"item_reference\" (items are not looked up by id; "
                          "send the item itself, or continue a kept response with "
                          "previous_response_id)");
    } else {
      throw not_supported(fields.name("type"),
                          "input item type " + quote_input(type) +
                              " (only message, function_call, function_call_output and "
                              "reasoning)");
    }
  }

  nlohmann::ordered_json take() { return std::move(messages_); }
  // The last item is an assistant message still being written (status in_progress or
  // incomplete): the answer continues it, as vLLM does. Its status's path.
  bool continues_final_message() const { return continues_final_; }
  const std::string& last_item_path() const { return last_item_path_; }

 private:
  void add(nlohmann::ordered_json message, const std::string& path) {
    continues_final_ = false;
    last_item_path_ = path;
    renames_.add(indexed("messages", messages_.size()), path);
    messages_.push_back(std::move(message));
  }

  void add_message(const FieldReader& fields, const nlohmann::ordered_json& ordered,
                   const std::string& path) {
    const std::string role = required_string(fields, "role");
    if (role != "user" && role != "system" && role != "developer" && role != "assistant") {
      throw invalid_field(fields.name("role"),
                          fields.name("role") + " " + quote_input(role) +
                              " is not supported; use user, system, developer or assistant (a "
                              "tool's result is a function_call_output item)");
    }
    nlohmann::ordered_json message = {{"role", role}, {"content", content_text(fields, ordered)}};
    if (role == "assistant") {
      take_pending_reasoning(message);
      add(std::move(message), path);
      calls_join_last_ = true;
      const std::string status = fields.string("status").value_or("completed");
      continues_final_ = status == "in_progress" || status == "incomplete";
      return;
    }
    pending_reasoning_.reset();
    add(std::move(message), path);
    calls_join_last_ = false;
  }

  // A message's content: its text, or its parts' joined as the chat parser joins its own.
  static nlohmann::ordered_json content_text(const FieldReader& fields,
                                             const nlohmann::ordered_json& ordered) {
    const nlohmann::json* content = fields.find("content");
    const std::string name = fields.name("content");
    if (content == nullptr) throw missing(name);
    if (content->is_string()) return ordered.at("content");
    if (!content->is_array()) {
      throw invalid_field(name, name + " must be a string or an array of content parts, not " +
                                    json_kind(*content));
    }
    const auto text_key = [](std::string_view type) -> const char* {
      if (type == "input_text" || type == "output_text" || type == "text") return "text";
      // An earlier answer's refusal is its text, as the model wrote it.
      return type == "refusal" ? "refusal" : nullptr;
    };
    return joined_parts(*content, name, text_key, "content part type",
                        "only input_text, output_text, text and refusal: the models this server "
                        "runs read text");
  }

  void add_call(const FieldReader& fields, const std::string& path) {
    nlohmann::ordered_json call = {{"id", required_string(fields, "call_id")},
                                   {"type", "function"},
                                   {"function",
                                    {{"name", required_string(fields, "name")},
                                     {"arguments", required_string(fields, "arguments")}}}};
    // Calls made together (and the text before them) are one assistant turn, as in a chat
    // request.
    if (!calls_join_last_) {
      nlohmann::ordered_json message = {{"role", "assistant"}, {"content", nullptr}};
      take_pending_reasoning(message);
      add(std::move(message), path);
      calls_join_last_ = true;
    }
    nlohmann::ordered_json& message = messages_.back();
    if (!message.contains("tool_calls")) message["tool_calls"] = nlohmann::ordered_json::array();
    const std::string chat_call = fmt::format("messages[{}].tool_calls[{}]", messages_.size() - 1,
                                              message["tool_calls"].size());
    renames_.add(chat_call, path);
    renames_.add(chat_call + ".id", path + ".call_id");
    renames_.add(chat_call + ".function", path);
    message["tool_calls"].push_back(std::move(call));
    continues_final_ = false;
  }

  void add_call_output(const FieldReader& fields, const std::string& path) {
    const std::string call_id = required_string(fields, "call_id");
    const nlohmann::json* output = fields.find("output");
    if (output == nullptr) throw missing(fields.name("output"));
    std::string text;
    if (output->is_string()) {
      text = output->get<std::string>();
    } else if (output->is_array()) {
      // A list of input_text parts, joined as a message's are.
      const auto text_key = [](std::string_view type) -> const char* {
        return type == "input_text" ? "text" : nullptr;
      };
      text = joined_parts(*output, fields.name("output"), text_key,
                          "function_call_output part type", "only input_text");
    } else {
      throw invalid_field(fields.name("output"), fields.name("output") +
                                                     " must be a string or an array of input_text "
                                                     "parts, not " +
                                                     json_kind(*output));
    }
    const std::string chat_path = indexed("messages", messages_.size());
    renames_.add(chat_path + ".tool_call_id", path + ".call_id");
    renames_.add(chat_path + ".content", path + ".output");
    pending_reasoning_.reset();
    add({{"role", "tool"}, {"tool_call_id", call_id}, {"content", std::move(text)}}, path);
    calls_join_last_ = false;
  }

  // An earlier answer's thinking: its text goes with the assistant turn that follows it (the
  // template may render it, as Qwen3's does for the current turn); otherwise it is dropped, as a
  // chat request has no place for it.
  void take_reasoning(const nlohmann::json& item, const std::string& path) {
    std::string text;
    for (const char* key : {"content", "summary"}) {
      const auto parts = item.find(key);
      if (parts == item.end() || parts->is_null()) continue;
      if (!parts->is_array()) {
        const std::string name = path + "." + key;
        throw invalid_field(name, name + " must be an array, not " + json_kind(*parts));
      }
      for (size_t j = 0; j < parts->size(); ++j) {
        const nlohmann::json& part = (*parts)[j];
        const std::string part_name = indexed(path + "." + key, j);
        if (!part.is_object()) {
          throw invalid_field(part_name, part_name + " must be an object, not " + json_kind(part));
        }
        const std::string piece = required_string(FieldReader(part, part_name), "text");
        if (!text.empty()) text += '\n';
        text += piece;
      }
      if (!text.empty()) break;  // the reasoning itself when given, else its summary
    }
    pending_reasoning_ = std::move(text);
    calls_join_last_ = false;
    continues_final_ = false;
  }

  void take_pending_reasoning(nlohmann::ordered_json& message) {
    if (pending_reasoning_ && !pending_reasoning_->empty()) {
      message["reasoning"] = std::move(*pending_reasoning_);
    }
    pending_reasoning_.reset();
  }

  FieldRenames& renames_;
  nlohmann::ordered_json messages_ = nlohmann::ordered_json::array();
  std::optional<std::string> pending_reasoning_;
  bool calls_join_last_ = false;  // the last message is an assistant turn a call joins
  bool continues_final_ = false;
  std::string last_item_path_;  // of the last message added
};

// Responses' flat function tools ({"type": "function", "name", "parameters", ...}) as the chat
// API's ({"type": "function", "function": {...}}).
nlohmann::ordered_json chat_tools(const nlohmann::json& tools,
                                  const nlohmann::ordered_json& ordered, FieldRenames& renames) {
  if (!tools.is_array()) {
    throw invalid_field("tools", std::string("tools must be an array, not ") + json_kind(tools));
  }
  nlohmann::ordered_json out = nlohmann::ordered_json::array();
  for (size_t i = 0; i < tools.size(); ++i) {
    const std::string path = indexed("tools", i);
    if (!tools[i].is_object()) {
      throw invalid_field(path, path + " must be an object, not " + json_kind(tools[i]));
    }
    const FieldReader fields(tools[i], path);
    const std::string type = required_string(fields, "type");
    if (type != "function") {
      throw not_supported(fields.name("type"),
                          "tool type " + quote_input(type) +
                              " (only function tools: this server runs no built-in tools)");
    }
    renames.add(path + ".function", path);
    out.push_back({{"type", "function"}, {"function", all_but_type(ordered.at(i))}});
  }
  return out;
}

// "none", "auto", "required", or {"type": "function", "name": ...} as the chat API's.
nlohmann::ordered_json chat_tool_choice(const nlohmann::json& choice, FieldRenames& renames) {
  if (choice.is_string()) return choice.get<std::string>();
  if (!choice.is_object()) {
    throw invalid_field("tool_choice", std::string("tool_choice must be a string or an object, "
                                                   "not ") +
                                           json_kind(choice));
  }
  const FieldReader fields(choice, "tool_choice");
  const std::string type = required_string(fields, "type");
  if (type != "function") {
    throw not_supported("tool_choice.type",
                        "tool_choice type " + quote_input(type) +
                            " (only \"function\", or the strings none, auto and required)");
  }
  renames.add("tool_choice.function", "tool_choice");
  return {{"type", "function"}, {"function", {{"name", required_string(fields, "name")}}}};
}

// text.format as the chat API's response_format; null for plain text.
nlohmann::ordered_json chat_response_format(const nlohmann::json& text,
                                            const nlohmann::ordered_json& ordered,
                                            FieldRenames& renames) {
  if (!text.is_object()) {
    throw invalid_field("text", std::string("text must be an object, not ") + json_kind(text));
  }
  const FieldReader fields(text, "text");
  const nlohmann::json* format = fields.find("format");
  if (format == nullptr) return nullptr;
  if (!format->is_object()) {
    throw invalid_field("text.format",
                        std::string("text.format must be an object, not ") + json_kind(*format));
  }
  const FieldReader format_fields(*format, "text.format");
  const std::string type = required_string(format_fields, "type");
  if (type == "text") return nullptr;
  renames.add("response_format.json_schema", "text.format");
  renames.add("response_format", "text.format");
  if (type == "json_object") return {{"type", "json_object"}};
  if (type != "json_schema") {
    throw invalid_field("text.format.type", "text.format.type " + quote_input(type) +
                                                " is not one of text, json_object, json_schema");
  }
  return {{"type", "json_schema"}, {"json_schema", all_but_type(ordered.at("format"))}};
}

// Fields of OpenAI's that need what Headway does not keep or run: refused by name while set.
void refuse_unkept(const FieldReader& fields) {
  if (is_set(fields.find("conversation"))) {
    throw not_supported("conversation",
                        "conversation (this server keeps no conversations: send the whole "
                        "conversation in input)");
  }
  if (fields.boolean("background").value_or(false)) {
    throw not_supported("background",
                        "background (responses are not kept to be fetched later; stream the "
                        "response instead)");
  }
  if (is_set(fields.find("prompt"))) {
    throw not_supported("prompt", "prompt (stored prompt templates)");
  }
  if (is_set(fields.find("max_tool_calls"))) {
    throw not_supported("max_tool_calls",
                        "max_tool_calls (it bounds built-in tools, which this "
                        "server does not run)");
  }
  if (const auto truncation = fields.string("truncation")) {
    if (*truncation == "auto") {
      throw not_supported("truncation",
                          "truncation \"auto\" (dropping input items to fit the context; "
                          "truncate_prompt_tokens keeps the last tokens of the prompt)");
    }
    if (*truncation != "disabled") {
      throw invalid_field(
          "truncation", "truncation " + quote_input(*truncation) + " is not one of disabled, auto");
    }
  }
}

// The id prefix of an input item kept without one, as OpenAI's ids start.
std::string_view kept_id_prefix(std::string_view type) {
  if (type == "function_call") return "fc_";
  if (type == "function_call_output") return "fco_";
  if (type == "reasoning") return "rs_";
  return "msg_";
}

// An input item (checked) as a kept response lists it: its type first, an id, and a message's
// text as a part, as the output items are written. `ids`: those the kept conversation has so far;
// an item without an id, or with one already there (a client's placeholder, as the Agents SDK's
// "__fake_id__"), gets a fresh one, so that each kept item is found by its id.
nlohmann::ordered_json kept_item(const nlohmann::ordered_json& item,
                                 std::unordered_set<std::string>& ids) {
  // Null reads as absent (a message), as the checks before read it: value() would throw on it.
  const auto written_type = item.find("type");
  const std::string type = written_type != item.end() && written_type->is_string()
                               ? written_type->get<std::string>()
                               : "message";
  nlohmann::ordered_json kept = {{"type", type}};
  const auto id = item.find("id");
  std::string kept_id = id != item.end() && id->is_string() ? id->get<std::string>() : "";
  if (kept_id.empty() || ids.contains(kept_id)) kept_id = random_request_id(kept_id_prefix(type));
  ids.insert(kept_id);
  kept["id"] = std::move(kept_id);
  for (const auto& [key, value] : item.items()) {
    if (key != "type" && key != "id") kept[key] = value;
  }
  if (type == "message" && kept["content"].is_string()) {
    const bool assistant = kept.value("role", "") == "assistant";
    nlohmann::ordered_json part = {{"type", assistant ? "output_text" : "input_text"},
                                   {"text", kept["content"]}};
    if (assistant) part["annotations"] = nlohmann::ordered_json::array();
    kept["content"] = nlohmann::ordered_json::array({std::move(part)});
  }
  return kept;
}

// The ids of a conversation's items.
std::unordered_set<std::string> item_ids(const nlohmann::ordered_json& items) {
  std::unordered_set<std::string> ids;
  for (const auto& item : items) {
    if (const auto id = item.find("id"); id != item.end() && id->is_string()) {
      ids.insert(id->get<std::string>());
    }
  }
  return ids;
}

// An input item that previous_response_id's conversation already has (by id), as OpenAI refuses
// it: a client that continues a response and sends its output again would have the model read it
// twice. (Ids repeated within the input alone are placeholders of some clients: kept_item gives
// them fresh ones.)
void refuse_repeated_items(const nlohmann::json& input, const nlohmann::ordered_json& previous) {
  const std::unordered_set<std::string> ids = item_ids(previous);
  for (size_t i = 0; i < input.size(); ++i) {
    const auto id = input[i].find("id");
    if (id == input[i].end() || !id->is_string() || !ids.contains(id->get<std::string>())) {
      continue;
    }
    const std::string name = indexed("input", i) + ".id";
    throw invalid_field(name, name + " " + quote_input(id->get<std::string>()) +
                                  " is an item of the conversation previous_response_id "
                                  "continues: send only the new items");
  }
}

// The conversation previous_response_id continues, from `store`; 400 when the server keeps no
// responses, or does not keep this one (previous_response_not_found).
nlohmann::ordered_json previous_conversation(const std::string& id, const ResponseStore* store) {
  if (store == nullptr || !store->keeps_responses()) {
    throw not_supported("previous_response_id",
                        "previous_response_id (this server keeps no responses: [server] "
                        "responses_store_mb = 0; send the whole conversation in input)");
  }
  const std::shared_ptr<const StoredResponse> previous = store->find(id);
  if (previous == nullptr) {
    // OpenAI's answer, which clients act on (they send the whole conversation again).
    throw ApiError(400,
                   "previous response with id " + quote_input(id) + " not found (" +
                       store->why_not_found() + "); send the whole conversation in input",
                   "previous_response_id")
        .with_code("previous_response_not_found");
  }
  return previous->conversation();
}

// include: an array of strings; whether it asks for the output text's logprobs. The others ask
// for the outputs of built-in tools and for encrypted reasoning, which this server has none of.
bool includes_logprobs(const FieldReader& fields) {
  const nlohmann::json* include = fields.find("include");
  if (include == nullptr) return false;
  if (!include->is_array()) {
    throw invalid_field(
        "include", std::string("include must be an array of strings, not ") + json_kind(*include));
  }
  bool logprobs = false;
  for (size_t i = 0; i < include->size(); ++i) {
    const nlohmann::json& item = (*include)[i];
    if (!item.is_string()) {
      const std::string name = indexed("include", i);
      throw invalid_field(name, name + " must be a string, not " + json_kind(item));
    }
    logprobs = logprobs || item.get<std::string>() == kLogprobsInclude;
  }
  return logprobs;
}

// OpenAI's bounds on `metadata`: at most 16 pairs, keys of at most 64 characters (code points of
// the valid UTF-8 the JSON parser read), string values of at most 512. Beyond them a field nobody
// reads was copied into the response, each stream event and the kept response: a 0.9 MB object took
// 85 MB to serve (helper-132).
constexpr size_t kMaxMetadataPairs = 16;
constexpr size_t kMaxMetadataKeyCharacters = 64;
constexpr size_t kMaxMetadataValueCharacters = 512;

void check_metadata(const nlohmann::json& metadata) {
  if (!metadata.is_object()) {
    throw invalid_field("metadata",
                        std::string("metadata must be an object, not ") + json_kind(metadata));
  }
  if (metadata.size() > kMaxMetadataPairs) {
    throw invalid_field("metadata", fmt::format("metadata has {} keys; at most {} are accepted",
                                                metadata.size(), kMaxMetadataPairs));
  }
  for (const auto& [key, value] : metadata.items()) {
    if (const size_t n = core::utf8::code_points(key); n > kMaxMetadataKeyCharacters) {
      throw invalid_field("metadata",
                          fmt::format("a metadata key is {} characters long; at most {}", n,
                                      kMaxMetadataKeyCharacters));
    }
    if (!value.is_string()) {
      throw invalid_field("metadata", fmt::format("metadata[{}] must be a string, not {}",
                                                  quote_input(key), json_kind(value)));
    }
    if (const size_t n = core::utf8::code_points(value.get_ref<const std::string&>());
        n > kMaxMetadataValueCharacters) {
      throw invalid_field("metadata",
                          fmt::format("metadata[{}] is {} characters long; at most {}",
                                      quote_input(key), n, kMaxMetadataValueCharacters));
    }
  }
}

// The request fields the response repeats, checked where only the response reads them.
ResponsesEcho echo_of(const FieldReader& fields, const nlohmann::ordered_json& ordered) {
  ResponsesEcho echo;
  const auto copied = [&](const char* key, nlohmann::ordered_json& into) {
    if (is_set(fields.find(key))) into = ordered.at(key);
  };
  if (const auto instructions = fields.string("instructions")) echo.instructions = *instructions;
  copied("max_output_tokens", echo.max_output_tokens);
  if (const nlohmann::json* metadata = fields.find("metadata")) {
    check_metadata(*metadata);
    echo.metadata = ordered.at("metadata");
  }
  echo.parallel_tool_calls = fields.boolean("parallel_tool_calls").value_or(true);
  if (const nlohmann::json* reasoning = fields.find("reasoning")) {
    if (!reasoning->is_object()) {
      throw invalid_field("reasoning",
                          std::string("reasoning must be an object, not ") + json_kind(*reasoning));
    }
    for (const auto& [key, value] : ordered.at("reasoning").items()) echo.reasoning[key] = value;
  }
  copied("temperature", echo.temperature);
  copied("text", echo.text);
  copied("tool_choice", echo.tool_choice);
  copied("tools", echo.tools);
  echo.top_logprobs =
      static_cast<int32_t>(fields.integer("top_logprobs", 0, core::kMaxLogprobs).value_or(0));
  copied("top_p", echo.top_p);
  if (const auto user = fields.string("user")) echo.user = *user;
  if (const auto previous = fields.string("previous_response_id")) {
    echo.previous_response_id = *previous;
  }
  echo.store = fields.boolean("store").value_or(true);  // then false when the server keeps none
  return echo;
}

}  // namespace

void FieldRenames::add(std::string chat_path, std::string responses_path) {
  std::string name(name_at(chat_path, 0));
  if (name.empty()) return;  // not a path (and it would never advance the renaming)
  by_name_[std::move(name)].push_back({std::move(chat_path), std::move(responses_path)});
}

const FieldRenames::Rename* FieldRenames::longest_at(std::string_view text, size_t at,
                                                     bool in_message) const {
  // A path starts a word ("messages[1]" in "x.messages[1]" is not one).
  if (at > 0 && (name_char(text[at - 1]) || text[at - 1] == '.')) return nullptr;
  const auto bucket = by_name_.find(std::string(name_at(text, at)));
  if (bucket == by_name_.end()) return nullptr;
  const Rename* best = nullptr;
  for (const Rename& rename : bucket->second) {
    if (text.substr(at, rename.from.size()) != rename.from) continue;
    // ...and ends a step: "tools" is not the start of "tools_x" (while "messages[1]" never
    // matches "messages[10]", its bracket differing).
    const size_t end = at + rename.from.size();
    if (end < text.size() && name_char(text[end])) continue;
    if (in_message && name_at(rename.from, 0).size() == rename.from.size() &&
        rename.from.find('_') == std::string::npos) {
      continue;  // a plain word
    }
    if (best == nullptr || rename.from.size() > best->from.size()) best = &rename;
  }
  return best;
}

std::string FieldRenames::rename_all(std::string_view text, bool in_message) const {
  std::string out;
  for (size_t at = 0; at < text.size();) {
    if (const Rename* rename = longest_at(text, at, in_message)) {
      out += rename->to;
      at += rename->from.size();
      continue;
    }
    // Past the whole name: no path starts inside it.
    const size_t length = std::max<size_t>(1, name_at(text, at).size());
    out += text.substr(at, length);
    at += length;
  }
  return out;
}

ApiError FieldRenames::apply(const ApiError& error) const {
  return ApiError(error.status(), rename_all(error.what(), /*in_message=*/true),
                  rename_all(error.param(), /*in_message=*/false))
      .with_code(error.code());
}

ResponsesRequest parse_responses_request(std::string_view body, const ResponseStore* store) {
  const nlohmann::json json = parse_body(body);
  const nlohmann::ordered_json ordered = parse_json_keeping_order(body);
  const FieldReader fields(json, "");
  refuse_unkept(fields);

  ResponsesRequest out;
  out.echo = echo_of(fields, ordered);
  out.echo.store = out.echo.store && store != nullptr && store->keeps_responses();
  out.logprobs = includes_logprobs(fields);
  FieldRenames& renames = out.renames;

  nlohmann::ordered_json chat = nlohmann::ordered_json::object();
  for (const char* key : kSharedFields) {
    if (ordered.contains(key)) chat[key] = ordered.at(key);
  }

  renames.add("messages", "input");  // the conversation as a whole (the chat template's errors)
  InputMessages messages(renames);
  if (const auto instructions = fields.string("instructions");
      instructions && !instructions->empty()) {
    messages.add_instructions(*instructions);
  }
  // The conversation continued: its items are named previous_response_id[i] (the i-th of its
  // input items, then of its output).
  nlohmann::ordered_json previous = nlohmann::ordered_json::array();
  if (out.echo.previous_response_id.is_string()) {
    previous = previous_conversation(out.echo.previous_response_id.get<std::string>(), store);
    for (size_t i = 0; i < previous.size(); ++i) {
      messages.add_item(nlohmann::json(previous[i]), previous[i],
                        indexed("previous_response_id", i));
    }
  }
  const nlohmann::json* input = fields.find("input");
  if (input == nullptr) throw missing("input");
  if (input->is_string()) {
    messages.add_text(input->get<std::string>());
  } else if (input->is_array()) {
    if (input->empty()) throw invalid_field("input", "input must not be an empty array");
    for (size_t i = 0; i < input->size(); ++i) {
      messages.add_item((*input)[i], ordered.at("input").at(i), indexed("input", i));
    }
    refuse_repeated_items(*input, previous);
  } else {
    throw invalid_field("input", std::string("input must be a string or an array of items, not ") +
                                     json_kind(*input));
  }
  if (out.echo.store) {
    std::unordered_set<std::string> ids = item_ids(previous);
    out.input_items = std::move(previous);
    if (input->is_string()) {
      out.input_items.push_back(
          kept_item({{"role", "user"}, {"content", ordered.at("input")}}, ids));
    } else {
      for (const auto& item : ordered.at("input")) out.input_items.push_back(kept_item(item, ids));
    }
  }
  if (messages.continues_final_message()) {
    chat["add_generation_prompt"] = false;
    chat["continue_final_message"] = true;
    renames.add("continue_final_message", messages.last_item_path() + ".status");
  }
  chat["messages"] = messages.take();
  if (chat["messages"].empty()) {
    throw invalid_field("input", "input has no message to answer (only reasoning items)");
  }

  if (const nlohmann::json* tools = fields.find("tools")) {
    chat["tools"] = chat_tools(*tools, ordered.at("tools"), renames);
  }
  if (const nlohmann::json* choice = fields.find("tool_choice")) {
    chat["tool_choice"] = chat_tool_choice(*choice, renames);
  }
  if (const nlohmann::json* text = fields.find("text")) {
    nlohmann::ordered_json format = chat_response_format(*text, ordered.at("text"), renames);
    if (!format.is_null()) chat["response_format"] = std::move(format);
  }
  if (ordered.contains("max_output_tokens")) {
    chat["max_completion_tokens"] = ordered.at("max_output_tokens");
    renames.add("max_completion_tokens", "max_output_tokens");
  }
  // As vLLM gives it: reasoning.effort is the template's reasoning_effort (gpt-oss reads it; other
  // templates ignore it), unless chat_template_kwargs names it.
  if (const nlohmann::json* reasoning = fields.find("reasoning"); reasoning != nullptr) {
    if (const auto effort = FieldReader(*reasoning, "reasoning").string("effort")) {
      nlohmann::ordered_json& kwargs = chat["chat_template_kwargs"];
      if (kwargs.is_null()) kwargs = nlohmann::ordered_json::object();
      if (kwargs.is_object() && !kwargs.contains("reasoning_effort")) {
        kwargs["reasoning_effort"] = *effort;
        renames.add("chat_template_kwargs.reasoning_effort", "reasoning.effort");
      }
    }
  }
  if (out.logprobs) {
    renames.add("logprobs", "include");
    chat["logprobs"] = true;
    chat["top_logprobs"] = out.echo.top_logprobs;
  }

  try {
    out.chat = parse_chat_request(chat.dump());
  } catch (const ApiError& error) {
    throw renames.apply(error);
  }
  // vLLM's request_id field is the response's id as it is (its default holds the prefix).
  out.chat.input.request_id = random_request_id("resp_");
  if (auto id = fields.string("request_id")) {
    check_client_request_id(*id, "request_id");
    out.chat.name_answer(*id, "request_id");
  }
  // Whether it was given or not: a refusal about the length names the Responses field.
  out.chat.input.max_tokens_field = "max_output_tokens";
  return out;
}

}  // namespace headway::serving::http
