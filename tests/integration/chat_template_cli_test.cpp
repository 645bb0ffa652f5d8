// `headway chat-template` as a user runs it: the prompt a chat request makes, from a template file
// or a checkpoint, and one clear stderr line for each thing that cannot be rendered.
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "cli_runner.h"

namespace {

namespace fs = std::filesystem;
using headway::test::CliRun;
using headway::test::run_cli;

// A fresh directory for one test's files, removed with the object.
struct Scratch {
  Scratch()
      : dir(fs::temp_directory_path() /
            ("chat_template_cli_test_" + std::to_string(::getpid()) + "_" +
             ::testing::UnitTest::GetInstance()->current_test_info()->name())) {
    fs::remove_all(dir);
    fs::create_directories(dir);
  }
  ~Scratch() { fs::remove_all(dir); }
  std::string write(const std::string& name, const std::string& text) const {
    std::ofstream(dir / name) << text;
    return (dir / name).string();
  }
  fs::path dir;
};

// A template in the shape of Qwen3-Coder's: a macro that renders a tool's extra keys, tools,
// tool calls with their arguments, and a chat_template_kwargs variable.
constexpr const char* kTemplate = R"JINJA({% macro extra(d, handled) %}
{%- for k in d if k not in handled %}<{{ k }}>{{ d[k] | tojson }}</{{ k }}>{% endfor %}
{%- endmacro %}
{%- for tool in tools or [] %}[tool {{ tool.function.name }}{{ extra(tool.function, ['name']) }}]
{% endfor %}
{%- for m in messages %}<{{ m.role }}>{{ m.content }}
{%- for call in m.tool_calls or [] %}{call {{ call.function.name }} {{ call.function.arguments | tojson }}}{% endfor %}
</{{ m.role }}>
{% endfor %}
{%- if add_generation_prompt %}<assistant{{ ' think' if thinking }}>{% endif %})JINJA";

constexpr const char* kRequest = R"({
  "model": "m",
  "messages": [
    {"role": "user", "content": "Weather?"},
    {"role": "assistant", "content": "",
     "tool_calls": [{"id": "c1", "type": "function",
                     "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
    {"role": "tool", "content": "sunny", "tool_call_id": "c1"}
  ],
  "tools": [{"type": "function",
             "function": {"name": "get_weather", "parameters": {"type": "object"},
                          "description": "Weather."}}],
  "chat_template_kwargs": {"thinking": true}
})";

TEST(ChatTemplateCli, PrintsThePromptARequestMakes) {
  const Scratch scratch;
  const std::string template_file = scratch.write("t.jinja", kTemplate);
  const std::string request = scratch.write("request.json", kRequest);
  const CliRun r = run_cli("chat-template --template " + template_file + " --request " + request);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  // The arguments the client sent as a JSON string reach the template as an object, as serving
  // gives them; the tool's keys keep the client's order.
  EXPECT_EQ(r.out,
            "[tool get_weather<parameters>{\"type\": \"object\"}</parameters>"
            "<description>\"Weather.\"</description>]\n"
            "<user>Weather?</user>\n"
            "<assistant>{call get_weather {\"city\": \"Paris\"}}</assistant>\n"
            "<tool>sunny</tool>\n"
            "<assistant think>");
  EXPECT_EQ(r.err, "");
}

TEST(ChatTemplateCli, UsesTheCheckpointsTemplate) {
  const Scratch scratch;
  const std::string checkpoint = (scratch.dir / "tiny").string();
  ASSERT_EQ(run_cli("model make-tiny --quiet --out " + checkpoint).exit_code, 0);
  std::ofstream(scratch.dir / "tiny" / "chat_template.jinja")
      << "{% for m in messages %}{{ m.role | upper }}: {{ m.content }}\n{% endfor %}ASSISTANT:";
  const std::string request =
      scratch.write("request.json", R"({"messages": [{"role": "user", "content": "Hi"}]})");
  const CliRun r = run_cli("chat-template --model " + checkpoint + " --request " + request);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "USER: Hi\nASSISTANT:");
}

TEST(ChatTemplateCli, EachFailureIsOneLineNamingWhatIsWrong) {
  const Scratch scratch;
  const std::string good = scratch.write("good.jinja", "{{ messages[0].content }}");
  const std::string request =
      scratch.write("request.json", R"({"messages": [{"role": "user", "content": "Hi"}]})");

  CliRun r = run_cli("chat-template --request " + request);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "headway: error: chat-template needs --model, --template or both\n");

  const std::string not_chat = scratch.write("bad.json", R"({"messages": [{"content": "x"}]})");
  r = run_cli("chat-template --template " + good + " --request " + not_chat);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "headway: error: --request " + not_chat + ": messages[0].role is required\n");

  r = run_cli("chat-template --template " + good + " --request " + scratch.dir.string() +
              "/missing.json");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("headway: error: --request: "), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("missing.json: cannot open: no such file"), std::string::npos) << r.err;

  // Each path's error names the flag that gave it (a bare "1: no such directory" did not).
  r = run_cli("chat-template --model " + scratch.dir.string() + "/nowhere --request " + request);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("headway: error: --model: "), std::string::npos) << r.err;
  r = run_cli("chat-template --template " + scratch.dir.string() + "/none.jinja --request " +
              request);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("headway: error: --template: "), std::string::npos) << r.err;

  const std::string broken = scratch.write("broken.jinja", "x\n{% if %}");
  r = run_cli("chat-template --template " + broken + " --request " + request);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_NE(r.err.find("broken.jinja"), std::string::npos) << r.err;
  EXPECT_NE(r.err.find("line 2"), std::string::npos) << r.err;

  const std::string refusing =
      scratch.write("refusing.jinja", "{{ raise_exception('Only user turns, please') }}");
  r = run_cli("chat-template --template " + refusing + " --request " + request);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "headway: error: Only user turns, please\n");
  EXPECT_EQ(r.out, "");
}

}  // namespace
