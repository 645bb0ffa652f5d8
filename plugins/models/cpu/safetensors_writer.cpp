#include "safetensors_writer.h"

#include <fstream>
#include <headway/sdk/status.hpp>
#include <nlohmann/json.hpp>

namespace headway::models::cpu {

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorData>& tensors) {
  nlohmann::ordered_json header = nlohmann::ordered_json::object();
  header["__metadata__"] = {{"format", "pt"}};
  uint64_t offset = 0;
  std::vector<uint64_t> padding;
  for (const TensorData& t : tensors) {
    uint64_t elements = 1;
    for (uint64_t d : t.shape) elements *= d;
    if (elements * dtype_size(t.dtype) != t.bytes.size()) {
      throw sdk::Error(HW_INVALID_ARGUMENT, path.string() + ": tensor '" + t.name +
                                                "': " + std::to_string(t.bytes.size()) +
                                                " bytes do not match its shape and dtype");
    }
    header[t.name] = {{"dtype", dtype_name(t.dtype)},
                      {"shape", t.shape},
                      {"data_offsets", {offset, offset + t.bytes.size()}}};
    const uint64_t end = offset + t.bytes.size();
    const uint64_t aligned = (end + 7) / 8 * 8;
    padding.push_back(aligned - end);
    offset = aligned;
  }
  std::string text = header.dump();
  text.append((8 - text.size() % 8) % 8, ' ');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) throw sdk::Error(HW_INTERNAL, path.string() + ": cannot create");
  unsigned char length[8];
  for (int i = 0; i < 8; ++i) length[i] = static_cast<unsigned char>(text.size() >> (8 * i));
  out.write(reinterpret_cast<const char*>(length), 8);
  out.write(text.data(), static_cast<std::streamsize>(text.size()));
  const char zeros[8] = {};
  for (size_t i = 0; i < tensors.size(); ++i) {
    out.write(reinterpret_cast<const char*>(tensors[i].bytes.data()),
              static_cast<std::streamsize>(tensors[i].bytes.size()));
    out.write(zeros, static_cast<std::streamsize>(padding[i]));
  }
  if (!out.flush()) throw sdk::Error(HW_INTERNAL, path.string() + ": write failed");
}

}  // namespace headway::models::cpu
