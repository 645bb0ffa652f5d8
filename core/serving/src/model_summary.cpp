#include <fmt/format.h>
#include <headway/serving/generation_service.h>

namespace headway::serving {

std::string kv_shape_label(const ModelSummary& model) {
  if (model.layers == 0) return "a KV shape it does not say";
  return fmt::format("{} layers x {} KV heads x {} dims", model.layers, model.kv_heads,
                     model.head_dim);
}

}  // namespace headway::serving
