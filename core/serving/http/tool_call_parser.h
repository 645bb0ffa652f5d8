// Tool calls out of a chat model's text, as vLLM's tool parsers find them (`--tool-call-parser`):
// the operator names the format its model writes ([server] tool_call_parser), and each choice of a
// chat request with tools and tool_choice "auto" runs its generated text through a parser. What is
// not a call goes out as the message's content; each call becomes an OpenAI tool call.
//
// Formats:
// - hermes (Hermes, Qwen 2.5/3, many fine-tunes): `<tool_call>{"name": ..., "arguments": {...}}
//   </tool_call>`, any number, with text around them.
// - llama3_json (Llama 3.1/3.2/3.3): the whole answer is one or more JSON objects `{"name": ...,
//   "parameters": {...}}` separated by ";", optionally after "<|python_tag|>"; an answer that does
//   not start with "{" is text.
// - pythonic (Llama 3.2, Llama 4): the whole answer is a Python list of calls with keyword
//   arguments, `[get_weather(city="Paris")]`, optionally between "<|python_start|>" and
//   "<|python_end|>" (pythonic_calls.h); an answer that does not start with "[" is text.
// - mistral (Mistral 7B Instruct v0.3, Mistral Small, Ministral, Devstral): text, then the
//   special token "[TOOL_CALLS]" and either a JSON array of {"name": ..., "arguments": {...}}
//   (tokenizers before v11) or one call written `name{...}` or `name[ARGS]{...}` (v11 and later,
//   each call after a "[TOOL_CALLS]" of its own). The marker is a special token, so the service
//   must keep special tokens in the text (GenerateInput::skip_special_tokens = false). Each call's
//   id is 9 letters and digits, the only form Mistral's chat templates take back.
// - Forced calls (tool_choice "required" or naming a function), whose answers guided decoding
//   shapes, whatever the server's parser: named_arguments, the whole answer is the named
//   function's arguments object; call_list, the whole answer is a JSON array of {"name": ...,
//   "parameters": {...}} (vLLM's shape for "required"). Both are held to the end.
//
// Streams: feed() takes the text as it comes and gives back the content that can go out now and
// every call that has ended. Text that may still turn out to be part of a call is held back (a
// partial "<tool_call>" or "[TOOL_CALLS]" tag, a mistral call until its JSON closes; for
// llama3_json and pythonic, the whole answer once it starts like
// calls, "{" or "["). The same
// text gives the same content and calls however it is cut into pieces.
//
// Nothing the model wrote is lost: a call that is not JSON with a string "name" (or one the answer
// ended inside) is given back as content, as written. Whitespace between calls and after the last
// one is dropped.
//
// Threading: one thread at a time (one parser per choice).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace headway::serving::http {

enum class ToolCallFormat { kHermes, kLlama3Json, kPythonic, kMistral, kNamedArguments, kCallList };

// "hermes", "llama3_json", "pythonic" or "mistral" (the formats an operator names); nullopt for
// any other.
std::optional<ToolCallFormat> tool_call_format_named(std::string_view name);

struct ToolCall {
  std::string id;         // "chatcmpl-tool-" and 32 random hex digits, as vLLM's (mistral: 9
                          // random letters and digits)
  std::string name;       // the function's, as the model wrote it
  std::string arguments;  // JSON text of the arguments (an object, as the model wrote it)
};

class ToolCallParser {
 public:
  // `single_call`: OpenAI's parallel_tool_calls = false; calls after the first are dropped.
  // `function`: kNamedArguments' function name. `mistral_ids`: the server's parser is mistral, so
  // forced calls (kNamedArguments, kCallList) get Mistral's ids too: its chat templates refuse any
  // other id when the call comes back in the next turn.
  explicit ToolCallParser(ToolCallFormat format, bool single_call = false,
                          std::string function = {}, bool mistral_ids = false)
      : format_(format),
        single_call_(single_call),
        mistral_ids_(mistral_ids),
        function_(std::move(function)) {}

  // More generated text: content that may go out now is appended to `content`, and each call that
  // this text completed to `calls`.
  void feed(std::string_view text, std::string& content, std::vector<ToolCall>& calls);
  // The answer ended: whatever was held back, as content or calls.
  void finish(std::string& content, std::vector<ToolCall>& calls);

  // Whether any call was found so far (finish_reason "tool_calls").
  bool called() const { return called_; }

 private:
  void feed_hermes(std::string& content, std::vector<ToolCall>& calls);
  // `final`: the answer ended; a call it ended inside is given back as content.
  void feed_mistral(std::string& content, std::vector<ToolCall>& calls, bool final);
  // llama3_json and pythonic: the answer is calls or text as a whole.
  void feed_whole_answer(std::string& content);
  // Content outside calls: after the first call, whitespace waits until something else follows.
  void emit_text(std::string_view text, std::string& content);
  void add_call(ToolCall call, std::vector<ToolCall>& calls);

  enum class State {
    kText,       // hermes, mistral: outside a call. llama3_json: the answer is text
    kInCall,     // hermes: after "<tool_call>", waiting for "</tool_call>". mistral: after
                 // "[TOOL_CALLS]", waiting for the end of its JSON
    kUndecided,  // llama3_json, pythonic: only whitespace (or part of the leading tag) so far
    kHeld,       // llama3_json, pythonic: the answer started like calls: held to the end
  };
  // hermes and mistral read calls among text; the others decide on the whole answer.
  State initial_state() const {
    return format_ == ToolCallFormat::kHermes || format_ == ToolCallFormat::kMistral
               ? State::kText
               : State::kUndecided;
  }
  ToolCallFormat format_;
  bool single_call_;
  bool mistral_ids_;
  std::string function_;
  State state_ = initial_state();
  std::string pending_;      // text not yet given out
  size_t call_scanned_ = 0;  // kInCall: bytes of pending_ searched for the call's end
  std::string whitespace_;   // right after a call: whitespace that goes out only before more text
  bool after_call_ = false;  // no text but whitespace since the last call
  bool called_ = false;
};

}  // namespace headway::serving::http
