#include "proto_conversion.h"

#include <string>
#include <string_view>
#include <utility>

#include "headway/serving/random_bits.h"

namespace headway::serving::grpc_frontend {

namespace {

void to_sampling(const v1::SamplingParams& sampling, GenerateInput& out) {
  out.sampling.temperature = sampling.temperature();
  // Unset means "off" (1), not the proto3 default 0, which the service would refuse.
  out.sampling.top_p = sampling.has_top_p() ? sampling.top_p() : 1.0f;
  out.sampling.top_k = sampling.top_k();
  out.sampling.min_p = sampling.min_p();
  out.sampling.seed = sampling.has_seed() ? sampling.seed() : random_u64();
  out.sampling.ignore_eos = sampling.ignore_eos();
  out.sampling.stop_token_ids.assign(sampling.stop_token_ids().begin(),
                                     sampling.stop_token_ids().end());
  out.sampling.presence_penalty = sampling.presence_penalty();
  out.sampling.frequency_penalty = sampling.frequency_penalty();
  // Unset means "off" (1), not the proto3 default 0, which the service would refuse.
  out.sampling.repetition_penalty =
      sampling.has_repetition_penalty() ? sampling.repetition_penalty() : 1.0f;
  out.sampling.min_tokens = sampling.min_tokens();
  out.sampling.logit_bias.assign(sampling.logit_bias().begin(), sampling.logit_bias().end());
  out.sampling.allowed_token_ids.assign(sampling.allowed_token_ids().begin(),
                                        sampling.allowed_token_ids().end());
  for (const v1::TokenIds& word : sampling.bad_words_ids()) {
    out.sampling.bad_words_ids.emplace_back(word.ids().begin(), word.ids().end());
  }
  // The service checks the range (a value past int32 stays past it).
  out.sampling.logprobs =
      sampling.has_logprobs()
          ? static_cast<int32_t>(std::min<uint32_t>(sampling.logprobs(), INT32_MAX))
          : -1;
  out.sampling.prompt_logprobs =
      sampling.has_prompt_logprobs()
          ? static_cast<int32_t>(std::min<uint32_t>(sampling.prompt_logprobs(), INT32_MAX))
          : -1;
  // Unset keeps GenerateInput's default; an explicit 0 goes to the service, which refuses it.
  if (sampling.has_max_tokens()) out.max_tokens = sampling.max_tokens();
  out.stop.assign(sampling.stop().begin(), sampling.stop().end());
}

}  // namespace

GenerateInput to_generate_input(const v1::GenerateRequest& request) {
  GenerateInput out;
  out.request_id = request.request_id();
  out.model = request.model();
  switch (request.prompt_case()) {
    case v1::GenerateRequest::kText:
      out.prompt_kind = GenerateInput::PromptKind::kText;
      out.prompt_text = request.text();
      break;
    case v1::GenerateRequest::kTokenIds:
      out.prompt_kind = GenerateInput::PromptKind::kTokenIds;
      out.prompt_ids.assign(request.token_ids().ids().begin(), request.token_ids().ids().end());
      break;
    case v1::GenerateRequest::kChat:
      out.prompt_kind = GenerateInput::PromptKind::kChat;
      out.messages.reserve(request.chat().messages_size());
      for (const auto& message : request.chat().messages()) {
        out.messages.push_back({message.role(), message.content(), message.fields_json()});
      }
      out.tools_json = request.chat().tools_json();
      out.template_kwargs_json = request.chat().template_kwargs_json();
      out.add_generation_prompt =
          !request.chat().has_add_generation_prompt() || request.chat().add_generation_prompt();
      out.continue_final_message = request.chat().continue_final_message();
      break;
    case v1::GenerateRequest::PROMPT_NOT_SET:
      throw ServiceError(ErrorCode::kInvalidArgument,
                         "none given; set one of text, token_ids or chat", "prompt");
  }
  to_sampling(request.sampling(), out);
  out.priority = request.priority();
  out.request_class = request.request_class();
  out.include_stop_str_in_output = request.include_stop_str_in_output();
  if (request.has_skip_special_tokens()) out.skip_special_tokens = request.skip_special_tokens();
  if (request.has_add_special_tokens()) out.add_special_tokens = request.add_special_tokens();
  if (request.has_guided()) out.guided = from_proto(request.guided());
  if (request.has_truncate_prompt_tokens()) {
    out.truncate_prompt_tokens = request.truncate_prompt_tokens();
  }
  out.prefill_only = request.prefill_only();
  if (request.has_kv_source()) out.kv_source = from_proto(request.kv_source());
  out.generated_ids.assign(request.generated_ids().begin(), request.generated_ids().end());
  return out;
}

GuidedOutput from_proto(const v1::GuidedOutput& guided) {
  GuidedOutput out;
  out.field = guided.field();
  out.starts_after = guided.starts_after();
  out.reasoning_opener = guided.reasoning_opener();
  switch (guided.kind_case()) {
    case v1::GuidedOutput::kJsonSchema:
      out.kind = GuidedOutput::Kind::kJsonSchema;
      out.schema_json = guided.json_schema();
      break;
    case v1::GuidedOutput::kJsonObject:
      if (guided.json_object()) out.kind = GuidedOutput::Kind::kJsonObject;
      break;
    case v1::GuidedOutput::kChoice:
      out.kind = GuidedOutput::Kind::kChoice;
      out.choices.assign(guided.choice().choices().begin(), guided.choice().choices().end());
      break;
    case v1::GuidedOutput::kRegex:
      out.kind = GuidedOutput::Kind::kRegex;
      out.regex = guided.regex();
      break;
    case v1::GuidedOutput::kGrammar:
      out.kind = GuidedOutput::Kind::kGrammar;
      out.grammar = guided.grammar();
      break;
    case v1::GuidedOutput::KIND_NOT_SET:
      throw ServiceError(ErrorCode::kInvalidArgument,
                         "none of json_schema, json_object, choice, regex or grammar is set",
                         "guided");
  }
  return out;
}

ServiceError with_proto_field_names(const ServiceError& error) {
  static constexpr std::pair<std::string_view, std::string_view> kRenames[] = {
      {"tools", "tools_json"}, {"chat_template_kwargs", "template_kwargs_json"}};
  // `name` itself or a path into it ("chat_template_kwargs.messages"), not a longer name.
  const auto names = [](std::string_view text, std::string_view name) {
    return text.starts_with(name) &&
           (text.size() == name.size() || text[name.size()] == '.' || text[name.size()] == ' ' ||
            text[name.size()] == ':' || text[name.size()] == '[');
  };
  for (const auto& [service_name, proto_name] : kRenames) {
    const std::string& param = error.param();
    if (!names(param, service_name)) continue;
    const std::string_view what = error.what();
    const std::string message =
        names(what, service_name)
            ? std::string(proto_name) + std::string(what.substr(service_name.size()))
            : std::string(what);
    return ServiceError(error.code(), message,
                        std::string(proto_name) + param.substr(service_name.size()));
  }
  return error;
}

void to_proto(const GuidedOutput& guided, v1::GuidedOutput& out) {
  out.set_field(guided.field);
  out.set_starts_after(guided.starts_after);
  out.set_reasoning_opener(guided.reasoning_opener);
  switch (guided.kind) {
    case GuidedOutput::Kind::kJsonSchema:
      out.set_json_schema(guided.schema_json);
      break;
    case GuidedOutput::Kind::kJsonObject:
      out.set_json_object(true);
      break;
    case GuidedOutput::Kind::kChoice:
      out.mutable_choice()->mutable_choices()->Add(guided.choices.begin(), guided.choices.end());
      break;
    case GuidedOutput::Kind::kRegex:
      out.set_regex(guided.regex);
      break;
    case GuidedOutput::Kind::kGrammar:
      out.set_grammar(guided.grammar);
      break;
    case GuidedOutput::Kind::kNone:
      break;
  }
}

KvStage from_proto(const v1::KvStage& stage) {
  KvStage out;
  out.shm_name = stage.shm_name();
  out.computed_tokens = stage.computed_tokens();
  out.block_count = stage.block_count();
  out.block_bytes = stage.block_bytes();
  out.block_size = stage.block_size();
  out.source_address = stage.source_address();
  out.held = stage.held();
  out.layers = stage.layers();
  out.kv_heads = stage.kv_heads();
  out.head_dim = stage.head_dim();
  return out;
}

void to_proto(const KvStage& stage, v1::KvStage& out) {
  out.set_shm_name(stage.shm_name);
  out.set_computed_tokens(stage.computed_tokens);
  out.set_block_count(stage.block_count);
  out.set_block_bytes(stage.block_bytes);
  out.set_block_size(stage.block_size);
  out.set_source_address(stage.source_address);
  out.set_held(stage.held);
  out.set_layers(stage.layers);
  out.set_kv_heads(stage.kv_heads);
  out.set_head_dim(stage.head_dim);
}

void to_generate_response(const std::string& request_id, const StreamChunk& chunk,
                          v1::GenerateResponse& out) {
  out.Clear();
  out.set_request_id(request_id);
  out.mutable_token_ids()->Add(chunk.token_ids.begin(), chunk.token_ids.end());
  out.set_text_delta(chunk.text);
  for (const GeneratedLogprobs& token : chunk.logprobs) {
    v1::TokenLogprobs& entry = *out.add_logprobs();
    entry.set_logprob(token.chosen.logprob);
    for (const TokenCandidate& candidate : token.top) {
      entry.add_top_token_ids(candidate.token);
      entry.add_top_logprobs(candidate.logprob);
    }
  }
  for (const PromptLogprobs& position : chunk.prompt_logprobs) {
    v1::PromptTokenLogprobs& entry = *out.add_prompt_logprobs();
    entry.set_position(position.position);
    entry.set_token_id(position.token.token);
    if (!position.has_figures) {
      entry.set_no_figures(true);
      continue;
    }
    entry.set_logprob(position.token.logprob);
    entry.set_rank(position.rank);
    for (const TokenCandidate& candidate : position.top) {
      entry.add_top_token_ids(candidate.token);
      entry.add_top_logprobs(candidate.logprob);
    }
  }
  if (chunk.finish == Finish::kNone) return;
  out.set_finish_reason(finish_name(chunk.finish));
  out.mutable_usage()->set_prompt_tokens(chunk.usage.prompt_tokens);
  out.mutable_usage()->set_completion_tokens(chunk.usage.completion_tokens);
  out.mutable_usage()->set_cached_prompt_tokens(chunk.usage.cached_prompt_tokens);
  auto& timings = *out.mutable_timings();
  timings.set_queue_seconds(chunk.timings.queue_seconds);
  timings.set_ttft_seconds(chunk.timings.ttft_seconds);
  timings.set_e2e_seconds(chunk.timings.e2e_seconds);
  timings.set_kv_transfer_seconds(chunk.timings.kv_transfer_seconds);
  timings.set_kv_network_bytes(chunk.timings.kv_network_bytes);
  timings.set_kv_wait_seconds(chunk.timings.kv_wait_seconds);
  timings.set_kv_moved(chunk.timings.kv_moved);
  timings.set_kv_cached_tokens(chunk.timings.kv_cached_tokens);
  out.set_error(chunk.error);
  if (chunk.kv_stage) to_proto(*chunk.kv_stage, *out.mutable_kv_stage());
}

void to_health_response(const HealthSummary& health, v1::HealthResponse& out) {
  out.set_serving(health.serving);
  out.set_engines_alive(health.engines_alive);
  out.set_engines_total(health.engines_total);
  out.set_reason(health.reason);
  out.set_draining(health.draining);
}

void to_model_info_response(const ModelSummary& model, v1::ModelInfoResponse& out) {
  out.set_name(model.name);
  out.set_max_model_len(model.max_model_len);
  out.set_vocab(model.vocab);
  out.set_tokenizer(model.tokenizer);
  out.set_samples_on_device(!model.samples_on_host);
  out.set_ignores_token_ids(!model.reads_token_ids);
  out.set_reports_prompt_logprobs(model.reports_prompt_logprobs);
  out.set_layers(model.layers);
  out.set_kv_heads(model.kv_heads);
  out.set_head_dim(model.head_dim);
}

void to_cluster_info_response(const ClusterSummary& cluster, v1::ClusterInfoResponse& out) {
  out.set_deployment(cluster.deployment);
  out.set_router(cluster.router);
  for (const EngineSummary& engine : cluster.engines) {
    v1::EngineInfo& info = *out.add_engines();
    info.set_index(engine.index);
    info.set_pool(engine.pool);
    info.set_role(engine.role);
    info.set_alive(engine.alive);
    info.set_running(engine.running);
    info.set_waiting(engine.waiting);
    info.set_outstanding_tokens(engine.outstanding_tokens);
    info.set_kv_blocks_free(engine.kv_blocks_free);
    info.set_kv_blocks_total(engine.kv_blocks_total);
    info.set_queued_prefill_tokens(engine.queued_prefill_tokens);
    info.set_block_size(engine.block_size);
    info.set_address(engine.address);
    info.set_preemptions(engine.preemptions);
    info.set_prefix_cache_queries(engine.prefix_cache_queries);
    info.set_prefix_cache_hits(engine.prefix_cache_hits);
    info.set_max_waiting(engine.max_waiting);
    info.set_prefix_caching(engine.prefix_caching);
  }
  for (const PluginMetricSample& sample : cluster.plugin_metrics) {
    v1::PluginMetric& metric = *out.add_plugin_metrics();
    metric.set_engine(sample.engine);
    metric.set_pool(sample.pool);
    metric.set_kind(sample.kind);
    metric.set_plugin(sample.plugin);
    metric.set_metric(sample.metric);
    metric.set_type(sample.counter ? v1::PluginMetric::COUNTER : v1::PluginMetric::GAUGE);
    metric.set_value(sample.value);
  }
  out.set_incarnation(cluster.incarnation);
}

void to_kv_events(const KvEventsSince& since, v1::ClusterInfoResponse& out) {
  out.set_reports_kv_events(true);
  out.set_kv_events_next(since.next);
  out.set_kv_events_lost(since.lost);
  out.mutable_kv_events()->Reserve(static_cast<int>(since.events.size()));
  for (const hw_kv_event& event : since.events) {
    v1::KvEvent& added = *out.add_kv_events();
    added.set_piece_hash(event.piece_hash);
    added.set_kind(event.kind);
  }
}

}  // namespace headway::serving::grpc_frontend
