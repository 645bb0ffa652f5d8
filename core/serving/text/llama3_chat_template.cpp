// The built-in chat template: Meta-Llama-3-8B-Instruct's, verbatim from its tokenizer_config.json.
#include <headway/serving/chat_template.h>

namespace headway::serving {

const std::string& ChatTemplate::builtin_llama3_source() {
  static const std::string source =
      "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
      "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
      "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}{% "
      "endif %}{{ content }}{% endfor %}{% if add_generation_prompt %}{{ "
      "'<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}{% endif %}";
  return source;
}

}  // namespace headway::serving
