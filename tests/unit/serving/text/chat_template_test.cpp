// ChatTemplate with real chat templates (Llama 3, Llama 3.1, Mistral, ChatML, Zephyr) written out
// here as their checkpoints ship them, where a template comes from, and how failures surface.
#include "headway/serving/chat_template.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <headway/core/byte_tokenizer.h>
#include <headway/core/error.h>

#include "tiny_bpe.h"

namespace headway::serving {
namespace {

using ::testing::HasSubstr;
using ::testing::StartsWith;
using testing::TempDir;
using testing::write_text;

// Mistral-7B-Instruct-v0.1.
const std::string kMistral =
    "{{ bos_token }}{% for message in messages %}{% if (message['role'] == 'user') != "
    "(loop.index0 % 2 == 0) %}{{ raise_exception('Conversation roles must alternate "
    "user/assistant/user/assistant/...') }}{% endif %}{% if message['role'] == 'user' %}{{ "
    "'[INST] ' + message['content'] + ' [/INST]' }}{% elif message['role'] == 'assistant' %}{{ "
    "message['content'] + eos_token}}{% else %}{{ raise_exception('Only user and assistant roles "
    "are supported!') }}{% endif %}{% endfor %}";

// ChatML (OpenHermes, Qwen-style).
const std::string kChatMl =
    "{% for message in messages %}{{'<|im_start|>' + message['role'] + '\\n' + message['content'] "
    "+ '<|im_end|>' + '\\n'}}{% endfor %}{% if add_generation_prompt %}{{ "
    "'<|im_start|>assistant\\n' "
    "}}{% endif %}";

// zephyr-7b-beta: newlines between tags, which trim_blocks must remove.
const std::string kZephyr =
    "{% for message in messages %}\n{% if message['role'] == 'user' %}\n{{ '<|user|>\n' + "
    "message['content'] + eos_token }}\n{% elif message['role'] == 'system' %}\n{{ '<|system|>\n' "
    "+ "
    "message['content'] + eos_token }}\n{% elif message['role'] == 'assistant' %}\n{{ "
    "'<|assistant|>\n'  + message['content'] + eos_token }}\n{% endif %}\n{% if loop.last and "
    "add_generation_prompt %}\n{{ '<|assistant|>' }}\n{% endif %}\n{% endfor %}";

// Llama 3.1 Instruct (system-message extraction, tools, namespace-free state via set/slices).
const std::string kLlama31 = R"JINJA({{- bos_token }}
{%- if custom_tools is defined %}
    {%- set tools = custom_tools %}
{%- endif %}
{%- if not tools_in_user_message is defined %}
    {%- set tools_in_user_message = true %}
{%- endif %}
{%- if not date_string is defined %}
    {%- set date_string = "26 Jul 2024" %}
{%- endif %}
{%- if not tools is defined %}
    {%- set tools = none %}
{%- endif %}

{#- This block extracts the system message, so we can slot it into the right place. #}
{%- if messages[0]['role'] == 'system' %}
    {%- set system_message = messages[0]['content']|trim %}
    {%- set messages = messages[1:] %}
{%- else %}
    {%- set system_message = "" %}
{%- endif %}

{#- System message + builtin tools #}
{{- "<|start_header_id|>system<|end_header_id|>\n\n" }}
{%- if builtin_tools is defined or tools is not none %}
    {{- "Environment: ipython\n" }}
{%- endif %}
{%- if builtin_tools is defined %}
    {{- "Tools: " + builtin_tools | reject('equalto', 'code_interpreter') | join(", ") + "\n\n"}}
{%- endif %}
{{- "Cutting Knowledge Date: December 2023\n" }}
{{- "Today Date: " + date_string + "\n\n" }}
{%- if tools is not none and not tools_in_user_message %}
    {{- "You have access to the following functions. To call a function, please respond with JSON for a function call." }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
{%- endif %}
{{- system_message }}
{{- "<|eot_id|>" }}

{#- Custom tools are passed in a user message with some extra guidance #}
{%- if tools_in_user_message and not tools is none %}
    {#- Extract the first user message so we can plug it in here #}
    {%- if messages | length != 0 %}
        {%- set first_user_message = messages[0]['content']|trim %}
        {%- set messages = messages[1:] %}
    {%- else %}
        {{- raise_exception("Cannot put tools in the first user message when there's no first user message!") }}
{%- endif %}
    {{- '<|start_header_id|>user<|end_header_id|>\n\n' -}}
    {{- "Given the following functions, please respond with a JSON for a function call " }}
    {{- "with its proper arguments that best answers the given prompt.\n\n" }}
    {{- 'Respond in the format {"name": function name, "parameters": dictionary of argument name and its value}.' }}
    {{- "Do not use variables.\n\n" }}
    {%- for t in tools %}
        {{- t | tojson(indent=4) }}
        {{- "\n\n" }}
    {%- endfor %}
    {{- first_user_message + "<|eot_id|>"}}
{%- endif %}

{%- for message in messages %}
    {%- if not (message.role == 'ipython' or message.role == 'tool' or 'tool_calls' in message) %}
        {{- '<|start_header_id|>' + message['role'] + '<|end_header_id|>\n\n'+ message['content'] | trim + '<|eot_id|>' }}
    {%- elif 'tool_calls' in message %}
        {%- if not message.tool_calls|length == 1 %}
            {{- raise_exception("This model only supports single tool-calls at once!") }}
        {%- endif %}
        {%- set tool_call = message.tool_calls[0].function %}
        {%- if builtin_tools is defined and tool_call.name in builtin_tools %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- "<|python_tag|>" + tool_call.name + ".call(" }}
            {%- for arg_name, arg_val in tool_call.arguments | items %}
                {{- arg_name + '="' + arg_val + '"' }}
                {%- if not loop.last %}
                    {{- ", " }}
                {%- endif %}
                {%- endfor %}
            {{- ")" }}
        {%- else  %}
            {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' -}}
            {{- '{"name": "' + tool_call.name + '", ' }}
            {{- '"parameters": ' }}
            {{- tool_call.arguments | tojson }}
            {{- "}" }}
        {%- endif %}
        {%- if builtin_tools is defined %}
            {#- This means we're in ipython mode #}
            {{- "<|eom_id|>" }}
        {%- else %}
            {{- "<|eot_id|>" }}
        {%- endif %}
    {%- elif message.role == "tool" or message.role == "ipython" %}
        {{- "<|start_header_id|>ipython<|end_header_id|>\n\n" }}
        {%- if message.content is mapping or message.content is iterable %}
            {{- message.content | tojson }}
        {%- else %}
            {{- message.content }}
        {%- endif %}
        {{- "<|eot_id|>" }}
    {%- endif %}
{%- endfor %}
{%- if add_generation_prompt %}
    {{- '<|start_header_id|>assistant<|end_header_id|>\n\n' }}
{%- endif %}
)JINJA";

class ChatTemplateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    testing::write_tiny_bpe(dir_.path(), {});
    tokenizer_ = core::Tokenizer::load(dir_.path());
  }
  std::unique_ptr<ChatTemplate> from(const std::string& source) {
    return ChatTemplate::from_string(source, "test.jinja", *tokenizer_);
  }

  TempDir dir_{"chat_template"};
  std::unique_ptr<core::Tokenizer> tokenizer_;
  const std::vector<ChatMessage> conversation_ = {{"system", "You are helpful."},
                                                  {"user", "  Hi!  "},
                                                  {"assistant", "Hello."},
                                                  {"user", "Bye"}};
};

TEST_F(ChatTemplateTest, BuiltinLlama3) {
  const auto t = from(ChatTemplate::builtin_llama3_source());
  EXPECT_EQ(t->render(conversation_, true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful."
            "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\nHello.<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nBye<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_EQ(t->render(std::span(conversation_).first(2), false),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\nYou are helpful."
            "<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>");
  // The rendered prompt encodes to the special ids, starting with BOS.
  const auto ids = tokenizer_->encode(t->render(std::span(conversation_).first(2), true));
  ASSERT_GT(ids.size(), 3u);
  EXPECT_EQ(ids[0], tokenizer_->bos());
  EXPECT_EQ(ids[1], testing::kStartHeader);
  EXPECT_EQ(ids.back(), '\n');
}

TEST_F(ChatTemplateTest, Llama31) {
  const auto t = from(kLlama31);
  EXPECT_EQ(t->render(std::span(conversation_).first(2), true),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n"
            "You are helpful.<|eot_id|><|start_header_id|>user<|end_header_id|>\n\nHi!<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // Without a system message, and with a tool result (its string content is JSON-quoted).
  const std::vector<ChatMessage> with_tool = {{"user", "Weather?"}, {"tool", "21C"}};
  EXPECT_EQ(t->render(with_tool, false),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Cutting Knowledge Date: December 2023\nToday Date: 26 Jul 2024\n\n<|eot_id|>"
            "<|start_header_id|>user<|end_header_id|>\n\nWeather?<|eot_id|>"
            "<|start_header_id|>ipython<|end_header_id|>\n\n\"21C\"<|eot_id|>");
}

// OpenAI tool calling through Llama 3.1's template: the tools in the first user message, an
// earlier call as its JSON, the result as an ipython turn.
TEST_F(ChatTemplateTest, Llama31WithToolsCallsAndResults) {
  const auto t = from(kLlama31);
  const std::vector<ChatMessage> conversation = {
      {"user", "Weather in Paris?", ""},
      {"assistant", "",
       R"({"tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather",)"
       R"( "arguments": {"city": "Paris", "days": 2}}}]})"},
      {"tool", "21C", R"({"tool_call_id": "c1"})"}};
  const std::string tools =
      R"([{"type": "function", "function": {"name": "get_weather", "parameters": {}}}])";
  EXPECT_EQ(t->render(conversation, true, tools),
            "<|begin_of_text|><|start_header_id|>system<|end_header_id|>\n\n"
            "Environment: ipython\nCutting Knowledge Date: December 2023\n"
            "Today Date: 26 Jul 2024\n\n<|eot_id|><|start_header_id|>user<|end_header_id|>\n\n"
            "Given the following functions, please respond with a JSON for a function call with "
            "its proper arguments that best answers the given prompt.\n\n"
            "Respond in the format {\"name\": function name, \"parameters\": dictionary of "
            "argument name and its value}.Do not use variables.\n\n"
            "{\n    \"type\": \"function\",\n    \"function\": {\n        \"name\": "
            "\"get_weather\",\n        \"parameters\": {}\n    }\n}\n\n"
            "Weather in Paris?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n"
            "{\"name\": \"get_weather\", \"parameters\": {\"city\": \"Paris\", \"days\": 2}}"
            "<|eot_id|><|start_header_id|>ipython<|end_header_id|>\n\n\"21C\"<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  // Without tools the template says nothing of them.
  EXPECT_EQ(t->render(std::span(conversation).first(1), true).find("Environment"),
            std::string::npos);
}

// vLLM's chat_template_kwargs: Qwen3's enable_thinking switch, as its template reads it; a
// keyword that names a variable the request sets is refused naming it.
TEST_F(ChatTemplateTest, TemplateKwargsAreMoreVariables) {
  const auto t = from(
      "{% for m in messages %}{{ m.content }}{% endfor %}{% if add_generation_prompt %}A:"
      "{% if enable_thinking is defined and enable_thinking is false %}<think>\n\n</think>\n\n"
      "{% endif %}{% endif %}");
  EXPECT_EQ(t->render(std::span(conversation_).first(1), true), "You are helpful.A:");
  EXPECT_EQ(t->render(std::span(conversation_).first(1), true, "", R"({"enable_thinking": false})"),
            "You are helpful.A:<think>\n\n</think>\n\n");
  EXPECT_EQ(t->render(std::span(conversation_).first(1), true, "", R"({"enable_thinking": true})"),
            "You are helpful.A:");
  try {
    t->render(std::span(conversation_).first(1), true, "",
              R"({"x": 1, "add_generation_prompt": false})");
    FAIL() << "rendered";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.param(), "chat_template_kwargs.add_generation_prompt");
  }
  try {
    t->render(std::span(conversation_).first(1), true, "", "[]");
    FAIL() << "rendered";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.param(), "chat_template_kwargs");
  }
}

// Fields and tools that are not the JSON the template needs are refused naming them (gRPC clients
// send them as text).
TEST_F(ChatTemplateTest, MalformedToolJsonIsRefusedNamingTheField) {
  const auto t = from(kLlama31);
  const std::vector<ChatMessage> bad_fields = {{"user", "x", "[1]"}};
  try {
    t->render(bad_fields, true);
    FAIL() << "rendered";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.param(), "messages[0].fields_json");
  }
  try {
    t->render(std::span(conversation_).first(2), true, R"({"type": "function"})");
    FAIL() << "rendered";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.param(), "tools");
    EXPECT_THAT(e.what(), HasSubstr("must be a JSON array"));
  }
  // Nested past the limit (rendering recurses once per level): refused, not rendered.
  const std::string deep = std::string(100000, '[') + std::string(100000, ']');
  try {
    t->render(std::span(conversation_).first(2), true, deep);
    FAIL() << "rendered";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.param(), "tools");
    EXPECT_THAT(e.what(), HasSubstr("levels deep"));
  }
}

TEST_F(ChatTemplateTest, MistralAndItsRoleCheck) {
  const auto t = from(kMistral);
  const std::vector<ChatMessage> ok = {{"user", "Hi"}, {"assistant", "Hello"}, {"user", "Bye"}};
  EXPECT_EQ(t->render(ok, true),
            "<|begin_of_text|>[INST] Hi [/INST]Hello<|eot_id|>[INST] Bye [/INST]");
  try {
    t->render(conversation_, true);  // starts with a system message
    FAIL() << "no error";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.param(), "messages");
    EXPECT_STREQ(e.what(), "Conversation roles must alternate user/assistant/user/assistant/...");
  }
}

TEST_F(ChatTemplateTest, ChatMl) {
  const auto t = from(kChatMl);
  EXPECT_EQ(t->render(std::span(conversation_).first(2), true),
            "<|im_start|>system\nYou are helpful.<|im_end|>\n<|im_start|>user\n  Hi!  <|im_end|>\n"
            "<|im_start|>assistant\n");
}

TEST_F(ChatTemplateTest, ZephyrNeedsTrimBlocks) {
  const auto t = from(kZephyr);
  EXPECT_EQ(t->render(std::span(conversation_).first(2), true),
            "<|system|>\nYou are helpful.<|eot_id|>\n<|user|>\n  Hi!  <|eot_id|>\n<|assistant|>\n");
}

TEST_F(ChatTemplateTest, LoadPrefersTheCheckpointsTemplate) {
  // None shipped: the built-in Llama 3 template.
  auto t = ChatTemplate::load(dir_.path(), *tokenizer_);
  EXPECT_EQ(t->origin(), "built-in Llama 3 template");
  EXPECT_THAT(t->render(conversation_, false), StartsWith("<|begin_of_text|><|start_header_id|>"));

  // tokenizer_config.json's chat_template.
  testing::write_tiny_bpe(dir_.path(), {.chat_template = kChatMl});
  t = ChatTemplate::load(dir_.path(), *tokenizer_);
  EXPECT_THAT(t->origin(), HasSubstr("tokenizer_config.json (chat_template)"));
  EXPECT_THAT(t->render(conversation_, false), StartsWith("<|im_start|>system\n"));

  // The list form: the "default" entry.
  testing::write_tiny_bpe(
      dir_.path(),
      {.chat_template = nlohmann::json::array({{{"name", "tool_use"}, {"template", "tools!"}},
                                               {{"name", "default"}, {"template", kMistral}}})});
  t = ChatTemplate::load(dir_.path(), *tokenizer_);
  EXPECT_EQ(t->render(std::span(conversation_).subspan(1, 1), false),
            "<|begin_of_text|>[INST]   Hi!   [/INST]");

  // chat_template.jinja beside it wins.
  write_text(dir_.path() / "chat_template.jinja", kZephyr + "\n");
  t = ChatTemplate::load(dir_.path(), *tokenizer_);
  EXPECT_THAT(t->origin(), HasSubstr("chat_template.jinja"));
  EXPECT_THAT(t->render(conversation_, false), StartsWith("<|system|>\n"));
}

// From helper-207's review: without a template of its own, a model whose tokenizer lacks Llama 3's
// role markers got the built-in Llama 3 template anyway, its markup encoded as plain text ("hi"
// became 63 tokens). As vLLM, chat is refused then, naming the checkpoint and what is missing.
TEST(ChatTemplate, TheBuiltInTemplateNeedsItsMarkersInTheTokenizer) {
  testing::TempDir dir("chat_template_no_markers");
  write_text(dir.path() / "tokenizer.json", testing::tiny_sentencepiece_bpe_json().dump());
  const auto tokenizer = core::Tokenizer::load(dir.path());
  try {
    ChatTemplate::load(dir.path(), *tokenizer);
    ADD_FAILURE() << "the built-in Llama 3 template was taken without its special tokens";
  } catch (const core::Error& e) {
    EXPECT_THAT(e.what(), HasSubstr(dir.path().string()));
    EXPECT_THAT(e.what(), HasSubstr("no chat template"));
    EXPECT_THAT(e.what(), HasSubstr("<|start_header_id|>"));
  }
  // Given a template, the same checkpoint chats.
  write_text(dir.path() / "chat_template.jinja", kChatMl);
  EXPECT_THAT(ChatTemplate::load(dir.path(), *tokenizer)->origin(),
              HasSubstr("chat_template.jinja"));
}

TEST_F(ChatTemplateTest, MalformedTemplatesAreRefusedAtLoadNamingFileAndLine) {
  testing::write_tiny_bpe(
      dir_.path(),
      {.chat_template = "{% for m in messages %}\n{{ m.content | shout }}{% endfor %}"});
  try {
    ChatTemplate::load(dir_.path(), *tokenizer_);
    FAIL() << "no error";
  } catch (const core::Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("tokenizer_config.json (chat_template): line 2: unknown "
                                    "filter 'shout'"));
  }
  testing::write_tiny_bpe(
      dir_.path(),
      {.chat_template = nlohmann::json::array({{{"name", "tool_use"}, {"template", "x"}}})});
  EXPECT_THROW(ChatTemplate::load(dir_.path(), *tokenizer_), core::Error);
  write_text(dir_.path() / "bad.jinja", "line one\n{% for m in messages %}{{ m }}");
  try {
    ChatTemplate::from_file(dir_.path() / "bad.jinja", *tokenizer_);
    FAIL() << "no error";
  } catch (const core::Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("bad.jinja: line 2: '{% for %}' is never closed"));
  }
  EXPECT_THROW(ChatTemplate::from_file(dir_.path() / "missing.jinja", *tokenizer_), core::Error);
}

TEST_F(ChatTemplateTest, RenderFailuresAreInvalidArgumentWithTheLine) {
  const auto t = from("{% for m in messages %}\n{{ m.content + m.name.first }}{% endfor %}");
  try {
    t->render(conversation_, false);
    FAIL() << "no error";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_THAT(e.what(), HasSubstr("test.jinja, line 2"));
    EXPECT_THAT(e.what(), HasSubstr("'m.name' is undefined"));
  }
}

TEST(ChatTemplate, ByteTokenizerHasNoSpecialTokenText) {
  const core::ByteTokenizer bytes(0, 256, 257, 300);
  const auto t = ChatTemplate::from_string(ChatTemplate::builtin_llama3_source(), "builtin", bytes);
  const std::vector<ChatMessage> one = {{"user", "hi"}};
  EXPECT_EQ(t->render(one, true),
            "<|start_header_id|>user<|end_header_id|>\n\nhi<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
}

}  // namespace
}  // namespace headway::serving

namespace headway::serving {
namespace {

// Hugging Face's continue_final_message cut, which vLLM's follows (expected texts from
// transformers' apply_chat_template logic).
TEST(ContinueFinalMessage, CutsRightAfterTheLastCopyOfTheFinalContent) {
  // The template kept the trailing space: it stays.
  EXPECT_EQ(ChatTemplate::cut_after_final_message("U: x\nA: x The answer is \n", "The answer is "),
            "U: x\nA: x The answer is ");
  // The template trimmed it (Llama 3's `| trim`): cut after the text.
  EXPECT_EQ(ChatTemplate::cut_after_final_message("A: The answer is<|eot_id|>", "The answer is "),
            "A: The answer is");
  // Leading whitespace: cut after the stripped content.
  EXPECT_EQ(ChatTemplate::cut_after_final_message("A: lead\n", "  lead"), "A: lead");
  // The last copy, not an earlier one.
  EXPECT_EQ(ChatTemplate::cut_after_final_message("U: ok\nA: ok!", "ok"), "U: ok\nA: ok");
  try {
    ChatTemplate::cut_after_final_message("A: rewritten", "original");
    FAIL() << "no refusal";
  } catch (const ServiceError& e) {
    EXPECT_EQ(e.code(), ErrorCode::kInvalidArgument);
    EXPECT_EQ(e.param(), "messages");
    EXPECT_THAT(e.what(), ::testing::HasSubstr("does not write the final message's content"));
  }
}

}  // namespace
}  // namespace headway::serving
