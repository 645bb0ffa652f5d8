// A tiny random-weight checkpoint of the cpu model (2 layers, hidden 64, byte-level tokenizer)
// written under a per-process temp directory (`path / "tiny"`), removed when its owner process
// exits. Threading: create before starting threads; read-only afterwards.
#pragma once

#include <tiny_checkpoint.h>
#include <unistd.h>

#include <filesystem>
#include <string>

namespace headway::test {

// The shape of the tests' tiny cpu model: 2 layers, hidden 64, 4 heads over 2 KV heads, F32.
inline models::cpu::TinyModelSpec tiny_test_spec() {
  models::cpu::TinyModelSpec spec;
  spec.layers = 2;
  spec.hidden = 64;
  spec.heads = 4;
  spec.kv_heads = 2;
  spec.ffn = 128;
  spec.dtype = models::cpu::DType::kF32;
  return spec;
}

struct TinyCheckpoint {
  TinyCheckpoint() {
    path = std::filesystem::temp_directory_path() / ("headway_tiny_" + std::to_string(::getpid()));
    models::cpu::TinyModelSpec spec = tiny_test_spec();
    spec.max_position_embeddings = 4096;
    models::cpu::write_tiny_checkpoint(spec, path / "tiny");
  }
  ~TinyCheckpoint() {
    if (::getpid() == owner)
      std::filesystem::remove_all(path);  // not from a forked child that exits
  }
  TinyCheckpoint(const TinyCheckpoint&) = delete;
  TinyCheckpoint& operator=(const TinyCheckpoint&) = delete;
  std::filesystem::path path;
  pid_t owner = ::getpid();
};

// One checkpoint shared by the tests of a binary, removed when the process exits.
inline TinyCheckpoint& shared_tiny_checkpoint() {
  static TinyCheckpoint checkpoint;
  return checkpoint;
}

}  // namespace headway::test
