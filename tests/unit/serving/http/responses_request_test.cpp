// POST /v1/responses bodies turned into the chat request that runs them: input items into
// messages, flat function tools, text.format into guided output, and refusals that name the field
// the client wrote.
#include "responses_request.h"

#include <gtest/gtest.h>

#include <nlohmann/json.hpp>
#include <set>
#include <string>

#include "api_error.h"

namespace headway::serving::http {
namespace {

using nlohmann::json;

// The ApiError a body is refused with; fails the test when it is accepted.
ApiError refusal(const std::string& body) {
  try {
    parse_responses_request(body);
  } catch (const ApiError& error) {
    return error;
  }
  ADD_FAILURE() << "accepted: " << body;
  return ApiError(0, "");
}

TEST(ResponsesRequest, TextInputIsOneUserMessageAfterTheInstructions) {
  const ResponsesRequest request = parse_responses_request(
      R"({"model": "m", "input": "Hello", "instructions": "Be brief.", "max_output_tokens": 9,
          "temperature": 0.5, "metadata": {"k": "v"}, "user": "u1"})");
  const GenerateInput& input = request.chat.input;
  EXPECT_TRUE(input.request_id.starts_with("resp_")) << input.request_id;
  EXPECT_EQ(input.model, "m");
  ASSERT_EQ(input.messages.size(), 2u);
  EXPECT_EQ(input.messages[0].role, "system");
  EXPECT_EQ(input.messages[0].content, "Be brief.");
  EXPECT_EQ(input.messages[1].role, "user");
  EXPECT_EQ(input.messages[1].content, "Hello");
  EXPECT_EQ(input.max_tokens, 9u);
  EXPECT_EQ(input.max_tokens_field, "max_output_tokens");
  EXPECT_EQ(parse_responses_request(R"({"input": "x"})").chat.input.max_tokens_field,
            "max_output_tokens");
  EXPECT_FLOAT_EQ(input.sampling.temperature, 0.5f);
  EXPECT_EQ(input.sampling.logprobs, -1);
  EXPECT_FALSE(request.chat.stream);
  // What the response repeats.
  EXPECT_EQ(request.echo.instructions, "Be brief.");
  EXPECT_EQ(request.echo.max_output_tokens, 9);
  EXPECT_EQ(request.echo.temperature, 0.5);
  EXPECT_EQ(request.echo.metadata, nlohmann::ordered_json({{"k", "v"}}));
  EXPECT_EQ(request.echo.user, "u1");
  EXPECT_EQ(request.echo.top_p, 1.0);

  // Without max_output_tokens the answer may run to the end of the context, as a chat one.
  EXPECT_TRUE(parse_responses_request(R"({"input": "x"})").chat.input.max_tokens_to_context_end);
}

TEST(ResponsesRequest, ItemsBecomeTheConversation) {
  const ResponsesRequest request = parse_responses_request(R"({"input": [
      {"role": "developer", "content": [{"type": "input_text", "text": "a"},
                                        {"type": "input_text", "text": "b"}]},
      {"type": "message", "role": "user", "content": "Weather in Paris and Rome?"},
      {"type": "reasoning", "id": "rs_1", "summary": [],
       "content": [{"type": "reasoning_text", "text": "Two calls."}]},
      {"type": "message", "role": "assistant",
       "content": [{"type": "output_text", "text": "Looking.", "annotations": []}]},
      {"type": "function_call", "call_id": "c1", "name": "weather", "arguments": "{\"city\": \"Paris\"}"},
      {"type": "function_call", "call_id": "c2", "name": "weather", "arguments": "{\"city\": \"Rome\"}"},
      {"type": "function_call_output", "call_id": "c1", "output": "sunny"},
      {"type": "function_call_output", "call_id": "c2",
       "output": [{"type": "input_text", "text": "rain"}]},
      {"type": "function_call", "call_id": "c3", "name": "weather", "arguments": "{}"}]})");
  const std::vector<ChatMessage>& messages = request.chat.input.messages;
  ASSERT_EQ(messages.size(), 6u);
  EXPECT_EQ(messages[0].role, "system");
  EXPECT_EQ(messages[0].content, "a\nb");
  EXPECT_EQ(messages[1].role, "user");
  // The text and the two calls after it are one assistant turn, with the thinking before it.
  EXPECT_EQ(messages[2].role, "assistant");
  EXPECT_EQ(messages[2].content, "Looking.");
  const json turn = json::parse(messages[2].fields_json);
  EXPECT_EQ(turn["reasoning"], "Two calls.");
  ASSERT_EQ(turn["tool_calls"].size(), 2u);
  EXPECT_EQ(turn["tool_calls"][0]["id"], "c1");
  EXPECT_EQ(turn["tool_calls"][1]["function"]["name"], "weather");
  EXPECT_EQ(turn["tool_calls"][1]["function"]["arguments"], json({{"city", "Rome"}}));
  EXPECT_EQ(messages[3].role, "tool");
  EXPECT_EQ(messages[3].content, "sunny");
  EXPECT_EQ(json::parse(messages[3].fields_json)["tool_call_id"], "c1");
  EXPECT_EQ(messages[4].content, "rain");
  // A call after the results is a turn of its own.
  EXPECT_EQ(messages[5].role, "assistant");
  EXPECT_EQ(json::parse(messages[5].fields_json)["tool_calls"][0]["id"], "c3");
  EXPECT_TRUE(request.chat.input.add_generation_prompt);
  EXPECT_FALSE(request.chat.input.continue_final_message);
}

TEST(ResponsesRequest, AnUnfinishedAssistantMessageIsContinued) {
  const ResponsesRequest request = parse_responses_request(R"({"input": [
      {"role": "user", "content": "Count."},
      {"role": "assistant", "status": "incomplete", "content": "1, 2,"}]})");
  EXPECT_FALSE(request.chat.input.add_generation_prompt);
  EXPECT_TRUE(request.chat.input.continue_final_message);
  // A refusal of the continuation names the status that asked for it.
  EXPECT_EQ(request.renames.apply(ApiError(400, "m", "continue_final_message")).param(),
            "input[1].status");
  // A finished one is answered after.
  EXPECT_TRUE(parse_responses_request(R"({"input": [{"role": "assistant", "content": "Hi."}]})")
                  .chat.input.add_generation_prompt);
}

TEST(ResponsesRequest, FunctionToolsAndTheirChoice) {
  const ResponsesRequest request = parse_responses_request(R"({"input": "x",
      "tools": [{"type": "function", "name": "weather", "description": "d", "strict": true,
                 "parameters": {"type": "object", "properties": {"city": {"type": "string"}}}}],
      "tool_choice": {"type": "function", "name": "weather"}, "parallel_tool_calls": false})");
  const json tools = json::parse(request.chat.input.tools_json);
  ASSERT_EQ(tools.size(), 1u);
  EXPECT_EQ(tools[0]["type"], "function");
  EXPECT_EQ(tools[0]["function"]["name"], "weather");
  EXPECT_EQ(tools[0]["function"]["description"], "d");
  EXPECT_EQ(tools[0]["function"]["parameters"]["properties"]["city"]["type"], "string");
  EXPECT_EQ(request.chat.forced_function, "weather");
  EXPECT_EQ(request.chat.input.guided.kind, GuidedOutput::Kind::kJsonSchema);
  EXPECT_FALSE(request.chat.parallel_tool_calls);
  // The response repeats them as the client wrote them.
  EXPECT_EQ(request.echo.tools[0]["name"], "weather");
  EXPECT_EQ(request.echo.tool_choice["type"], "function");
  EXPECT_FALSE(request.echo.parallel_tool_calls);

  const ResponsesRequest automatic = parse_responses_request(
      R"({"input": "x", "tools": [{"type": "function", "name": "weather"}]})");
  EXPECT_TRUE(automatic.chat.parse_tool_calls);
  EXPECT_EQ(automatic.chat.input.guided.kind, GuidedOutput::Kind::kNone);
}

TEST(ResponsesRequest, TextFormatShapesTheAnswer) {
  const ResponsesRequest schema = parse_responses_request(R"({"input": "x", "text": {"format":
      {"type": "json_schema", "name": "n", "strict": true,
       "schema": {"type": "object", "properties": {"b": {}, "a": {}}}}}})");
  EXPECT_EQ(schema.chat.input.guided.kind, GuidedOutput::Kind::kJsonSchema);
  // The client's key order is kept: properties are generated in it.
  EXPECT_NE(schema.chat.input.guided.schema_json.find(R"("b":{},"a":{})"), std::string::npos)
      << schema.chat.input.guided.schema_json;
  EXPECT_EQ(schema.echo.text["format"]["name"], "n");
  EXPECT_EQ(
      parse_responses_request(R"({"input": "x", "text": {"format": {"type": "json_object"}}})")
          .chat.input.guided.kind,
      GuidedOutput::Kind::kJsonObject);
  EXPECT_EQ(parse_responses_request(R"({"input": "x", "text": {"format": {"type": "text"}}})")
                .chat.input.guided.kind,
            GuidedOutput::Kind::kNone);
  // vLLM's guided_* fields, as a chat request takes them, not ignored.
  EXPECT_EQ(
      parse_responses_request(R"({"input": "x", "guided_regex": "[ab]+"})").chat.input.guided.kind,
      GuidedOutput::Kind::kRegex);
  EXPECT_EQ(parse_responses_request(R"({"input": "x", "guided_choice": ["a", "b"]})")
                .chat.input.guided.kind,
            GuidedOutput::Kind::kChoice);
}

TEST(ResponsesRequest, LogprobsAreAskedThroughInclude) {
  const ResponsesRequest asked = parse_responses_request(
      R"({"input": "x", "include": ["message.output_text.logprobs"], "top_logprobs": 3})");
  EXPECT_TRUE(asked.logprobs);
  EXPECT_EQ(asked.chat.input.sampling.logprobs, 3);
  EXPECT_EQ(asked.echo.top_logprobs, 3);
  const ResponsesRequest other =
      parse_responses_request(R"({"input": "x", "include": ["reasoning.encrypted_content"]})");
  EXPECT_FALSE(other.logprobs);
  EXPECT_EQ(other.chat.input.sampling.logprobs, -1);
}

TEST(ResponsesRequest, ReasoningEffortGoesToTheTemplate) {
  const ResponsesRequest request =
      parse_responses_request(R"({"input": "x", "reasoning": {"effort": "low"}})");
  EXPECT_EQ(json::parse(request.chat.input.template_kwargs_json)["reasoning_effort"], "low");
  EXPECT_EQ(request.echo.reasoning["effort"], "low");
  // The client's own kwargs win.
  const ResponsesRequest own = parse_responses_request(
      R"({"input": "x", "reasoning": {"effort": "low"},
          "chat_template_kwargs": {"reasoning_effort": "high"}})");
  EXPECT_EQ(json::parse(own.chat.input.template_kwargs_json)["reasoning_effort"], "high");
}

TEST(ResponsesRequest, WhatIsNotKeptOrRunIsRefusedByName) {
  EXPECT_EQ(refusal(R"({"input": "x", "previous_response_id": "resp_1"})").param(),
            "previous_response_id");
  EXPECT_EQ(refusal(R"({"input": "x", "conversation": "conv_1"})").param(), "conversation");
  EXPECT_EQ(refusal(R"({"input": "x", "background": true})").param(), "background");
  EXPECT_EQ(refusal(R"({"input": "x", "truncation": "auto"})").param(), "truncation");
  EXPECT_EQ(refusal(R"({"input": "x", "max_tool_calls": 2})").param(), "max_tool_calls");
  EXPECT_EQ(refusal(R"({"input": "x", "tools": [{"type": "web_search"}]})").param(),
            "tools[0].type");
  EXPECT_EQ(refusal(R"({"input": "x", "tool_choice": {"type": "web_search_preview"}})").param(),
            "tool_choice.type");
  EXPECT_EQ(refusal(R"({"input": [{"role": "user", "content": [{"type": "input_image",
                                   "image_url": "http://x"}]}]})")
                .param(),
            "input[0].content[0].type");
  EXPECT_EQ(refusal(R"({"input": [{"type": "item_reference", "id": "msg_1"}]})").param(),
            "input[0].type");
  EXPECT_EQ(refusal(R"({"input": [{"role": "tool", "content": "x"}]})").param(), "input[0].role");
  EXPECT_EQ(refusal(R"({})").param(), "input");
  EXPECT_EQ(refusal(R"({"input": []})").param(), "input");
  EXPECT_EQ(refusal(R"({"input": 3})").param(), "input");
  // store and an empty previous_response_id ask for nothing.
  EXPECT_NO_THROW(
      parse_responses_request(R"({"input": "x", "store": true, "previous_response_id": null})"));
}

// OpenAI's bounds: 16 pairs, keys of 64 characters, string values of 512. A field nobody reads is
// copied into the response and each of its events: a 0.9 MB object took 85 MB to serve.
TEST(ResponsesRequest, MetadataIsHeldToOpenAisBounds) {
  const auto with = [](const nlohmann::json& metadata) {
    return nlohmann::json{{"input", "x"}, {"metadata", metadata}}.dump();
  };
  nlohmann::json full = nlohmann::json::object();
  for (int i = 0; i < 16; ++i) full["key" + std::to_string(i)] = std::string(512, 'v');
  full[std::string(64, 'k')] = "";
  full.erase("key0");
  EXPECT_EQ(parse_responses_request(with(full)).echo.metadata.size(), 16u);
  // Characters, not bytes: 512 of them in two bytes each.
  std::string wide;
  for (int i = 0; i < 512; ++i) wide += "\xc3\xa9";
  EXPECT_NO_THROW(parse_responses_request(with({{"k", wide}})));

  nlohmann::json seventeen = full;
  seventeen["key0"] = "v";
  const ApiError many = refusal(with(seventeen));
  EXPECT_EQ(many.param(), "metadata");
  EXPECT_STREQ(many.what(), "metadata has 17 keys; at most 16 are accepted");
  EXPECT_STREQ(refusal(with({{std::string(65, 'k'), "v"}})).what(),
               "a metadata key is 65 characters long; at most 64");
  EXPECT_STREQ(refusal(with({{"k", std::string(513, 'v')}})).what(),
               "metadata[\"k\"] is 513 characters long; at most 512");
  EXPECT_STREQ(refusal(with({{"a\n", nlohmann::json::array({1})}})).what(),
               "metadata[\"a\\x0a\"] must be a string, not an array");
  EXPECT_STREQ(refusal(with(3)).what(), "metadata must be an object, not an integer");
}

// A store holding "resp_p": the user asked, the model thought and called a function.
void keep_previous(ResponseStore& store) {
  const auto input_items = nlohmann::ordered_json::parse(R"([
      {"type": "message", "id": "msg_1", "role": "user",
       "content": [{"type": "input_text", "text": "Weather?"}]}])");
  const auto response = nlohmann::ordered_json::parse(R"({"id": "resp_p", "output": [
      {"type": "reasoning", "id": "rs_1", "summary": [],
       "content": [{"type": "reasoning_text", "text": "Look it up."}]},
      {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather",
       "arguments": "{}", "status": "completed"}]})");
  ASSERT_TRUE(store.put("resp_p", StoredResponse(response, input_items)));
}

TEST(ResponsesRequest, APreviousResponseIsContinued) {
  ResponseStore store(1 << 20);
  keep_previous(store);
  const ResponsesRequest request = parse_responses_request(
      R"({"instructions": "Be brief.", "previous_response_id": "resp_p",
          "input": [{"type": "function_call_output", "call_id": "call_1", "output": "Sunny"}]})",
      &store);
  // This request's instructions, the kept conversation with its output, then the new input.
  const std::vector<ChatMessage>& messages = request.chat.input.messages;
  ASSERT_EQ(messages.size(), 4u);
  EXPECT_EQ(messages[0].role, "system");
  EXPECT_EQ(messages[0].content, "Be brief.");
  EXPECT_EQ(messages[1].role, "user");
  EXPECT_EQ(messages[1].content, "Weather?");
  EXPECT_EQ(messages[2].role, "assistant");
  const json turn = json::parse(messages[2].fields_json);
  EXPECT_EQ(turn["reasoning"], "Look it up.");
  EXPECT_EQ(turn["tool_calls"][0]["id"], "call_1");
  EXPECT_EQ(messages[3].role, "tool");
  EXPECT_EQ(messages[3].content, "Sunny");
  EXPECT_EQ(request.echo.previous_response_id, "resp_p");
  EXPECT_TRUE(request.echo.store);
  // Kept with the whole conversation (not the instructions), the new item given an id.
  const nlohmann::ordered_json& items = request.input_items;
  ASSERT_EQ(items.size(), 4u) << items;
  EXPECT_EQ(items[0]["id"], "msg_1");
  EXPECT_EQ(items[1]["id"], "rs_1");
  EXPECT_EQ(items[2]["id"], "fc_1");
  EXPECT_EQ(items[3]["type"], "function_call_output");
  EXPECT_TRUE(items[3]["id"].get<std::string>().starts_with("fco_")) << items[3];
  EXPECT_EQ(items[3]["output"], "Sunny");
  // A refusal about an item that came from the kept conversation names where it came from.
  EXPECT_EQ(request.renames.apply(ApiError(400, "m", "messages[1].content")).param(),
            "previous_response_id[0].content");
}

TEST(ResponsesRequest, InputIsKeptAsItemsWithIds) {
  ResponseStore store(1 << 20);
  const ResponsesRequest text = parse_responses_request(R"({"input": "Hello"})", &store);
  EXPECT_TRUE(text.echo.store);
  EXPECT_EQ(text.echo.previous_response_id, nullptr);
  ASSERT_EQ(text.input_items.size(), 1u);
  const nlohmann::ordered_json& item = text.input_items[0];
  EXPECT_EQ(item["type"], "message");
  EXPECT_TRUE(item["id"].get<std::string>().starts_with("msg_")) << item;
  EXPECT_EQ(item["role"], "user");
  EXPECT_EQ(item["content"],
            nlohmann::ordered_json::parse(R"([{"type": "input_text", "text": "Hello"}])"));
  const ResponsesRequest items = parse_responses_request(
      R"({"input": [{"role": "assistant", "content": "Hi."},
                    {"type": "message", "id": "msg_mine", "role": "user", "content": "x"}]})",
      &store);
  ASSERT_EQ(items.input_items.size(), 2u);
  EXPECT_EQ(items.input_items[0]["content"][0]["type"], "output_text");
  EXPECT_EQ(items.input_items[0]["content"][0]["text"], "Hi.");
  EXPECT_EQ(items.input_items[1]["id"], "msg_mine");
  // store false, or a server that keeps nothing: nothing to keep.
  const ResponsesRequest unkept =
      parse_responses_request(R"({"input": "Hello", "store": false})", &store);
  EXPECT_FALSE(unkept.echo.store);
  EXPECT_TRUE(unkept.input_items.empty());
  ResponseStore none(0);
  EXPECT_FALSE(parse_responses_request(R"({"input": "Hello"})", &none).echo.store);
  EXPECT_FALSE(parse_responses_request(R"({"input": "Hello"})").echo.store);
}

TEST(ResponsesRequest, AResponseNotKeptCannotBeContinued) {
  ResponseStore store(1 << 20);
  keep_previous(store);
  try {
    parse_responses_request(R"({"input": "x", "previous_response_id": "resp_gone"})", &store);
    ADD_FAILURE() << "accepted";
  } catch (const ApiError& error) {
    // OpenAI's answer, which clients act on by sending the whole conversation again.
    EXPECT_EQ(error.status(), 400);
    EXPECT_EQ(error.param(), "previous_response_id");
    EXPECT_EQ(error.code(), "previous_response_not_found");
    EXPECT_NE(std::string(error.what()).find("\"resp_gone\""), std::string::npos) << error.what();
  }
  ResponseStore none(0);
  try {
    parse_responses_request(R"({"input": "x", "previous_response_id": "resp_p"})", &none);
    ADD_FAILURE() << "accepted";
  } catch (const ApiError& error) {
    EXPECT_EQ(error.status(), 400);
    EXPECT_EQ(error.param(), "previous_response_id");
    EXPECT_NE(std::string(error.what()).find("responses_store_mb = 0"), std::string::npos)
        << error.what();
  }
  EXPECT_EQ(refusal(R"({"input": "x", "previous_response_id": 3})").param(),
            "previous_response_id");
}

TEST(ResponsesRequest, AnItemIsGivenOnce) {
  ResponseStore store(1 << 20);
  keep_previous(store);
  // The previous response's call sent again with its conversation.
  try {
    parse_responses_request(
        R"({"previous_response_id": "resp_p", "input": [
            {"type": "function_call", "id": "fc_1", "call_id": "call_1", "name": "weather",
             "arguments": "{}"},
            {"type": "function_call_output", "call_id": "call_1", "output": "Sunny"}]})",
        &store);
    ADD_FAILURE() << "accepted";
  } catch (const ApiError& error) {
    EXPECT_EQ(error.param(), "input[0].id");
    EXPECT_NE(std::string(error.what()).find("\"fc_1\""), std::string::npos) << error.what();
  }
  // Ids repeated within the input are a client's placeholders (the Agents SDK's "__fake_id__"):
  // accepted, and kept under fresh ids, each found by its own.
  const ResponsesRequest placeholders = parse_responses_request(
      R"({"previous_response_id": "resp_p", "input": [
          {"role": "user", "content": "a", "id": "__fake_id__"},
          {"role": "user", "content": "b", "id": "__fake_id__"},
          {"role": "user", "content": "c", "id": ""}]})",
      &store);
  const nlohmann::ordered_json& items = placeholders.input_items;
  ASSERT_EQ(items.size(), 6u) << items;
  EXPECT_EQ(items[3]["id"], "__fake_id__");
  std::set<std::string> ids;
  for (const auto& item : items) ids.insert(item["id"].get<std::string>());
  EXPECT_EQ(ids.size(), items.size()) << items;
  EXPECT_FALSE(ids.contains(""));
}

TEST(ResponsesRequest, RefusalsFoundOnTheChatRequestNameTheResponsesField) {
  ApiError error = refusal(
      R"({"input": [{"role": "user", "content": "x"},
                    {"type": "function_call", "call_id": "c", "name": "f", "arguments": "{oops"}]})");
  EXPECT_EQ(error.param(), "input[1].arguments");
  EXPECT_NE(std::string(error.what()).find("input[1].arguments"), std::string::npos)
      << error.what();
  EXPECT_EQ(std::string(error.what()).find("messages"), std::string::npos) << error.what();

  error = refusal(R"({"input": "x", "tools": [{"type": "function", "description": "d"}]})");
  EXPECT_EQ(error.param(), "tools[0].name") << error.what();
  EXPECT_EQ(refusal(R"({"input": "x", "max_output_tokens": 0})").param(), "max_output_tokens");
  EXPECT_EQ(refusal(R"({"input": "x", "tool_choice": {"type": "function", "name": "nope"},
                        "tools": [{"type": "function", "name": "f"}]})")
                .param(),
            "tool_choice.name");
  EXPECT_EQ(refusal(R"({"input": [{"type": "function_call_output", "output": "x"}]})").param(),
            "input[0].call_id");
  EXPECT_EQ(refusal(R"({"input": "x", "temperature": "hot"})").param(), "temperature");
  error = refusal(R"({"input": "x", "text": {"format": {"type": "json_schema", "schema": 3}}})");
  EXPECT_TRUE(error.param().starts_with("text.format")) << error.param();
  // Fields the message names besides its param are the client's too.
  error = refusal(R"({"input": "x", "text": {"format": {"type": "json_object"}},
                      "tools": [{"type": "function", "name": "f"}], "tool_choice": "required"})");
  EXPECT_EQ(error.param(), "tool_choice");
  EXPECT_NE(std::string(error.what()).find("text.format"), std::string::npos) << error.what();
  EXPECT_EQ(std::string(error.what()).find("response_format"), std::string::npos) << error.what();
}

TEST(FieldRenames, TheLongestWholeStepWins) {
  FieldRenames renames;
  renames.add("messages[1]", "input[0]");
  renames.add("messages[1].tool_calls[0]", "input[1]");
  renames.add("messages[1].tool_calls[0].function", "input[1]");
  const ApiError renamed =
      renames.apply(ApiError(400, "messages[1].tool_calls[0].function.arguments is bad",
                             "messages[1].tool_calls[0].function.arguments"));
  EXPECT_EQ(renamed.param(), "input[1].arguments");
  EXPECT_STREQ(renamed.what(), "input[1].arguments is bad");
  EXPECT_EQ(renames.apply(ApiError(400, "m", "messages[10].content")).param(),
            "messages[10].content");
  EXPECT_EQ(renames.apply(ApiError(400, "m", "messages[1].content")).param(), "input[0].content");
  EXPECT_EQ(renames.apply(ApiError(429, "busy")).status(), 429);
  EXPECT_EQ(renames.apply(ApiError(400, "m").with_code("previous_response_not_found")).code(),
            "previous_response_not_found");
  // In a message: whole paths only, each renamed.
  renames.add("response_format", "text.format");
  renames.add("messages", "input");
  EXPECT_STREQ(renames
                   .apply(ApiError(400,
                                   "messages[1].content and response_format, not response_format_x "
                                   "or x.response_format or messages[10]"))
                   .what(),
               "input[0].content and text.format, not response_format_x or x.response_format or "
               "messages[10]");
  // A plain word is renamed as the param, not in the message (English, or the client's string).
  const ApiError plain =
      renames.apply(ApiError(400, "the template failed on these messages", "messages"));
  EXPECT_EQ(plain.param(), "input");
  EXPECT_STREQ(plain.what(), "the template failed on these messages");
}

}  // namespace
}  // namespace headway::serving::http
