#include "headway/core/tokenizer.h"

#include <headway/core/byte_tokenizer.h>
#include <headway/core/error.h>
#include <headway/core/sentencepiece_tokenizer.h>

namespace headway::core {

std::unique_ptr<Tokenizer> Tokenizer::load(const std::filesystem::path& dir) {
  const std::filesystem::path spm = dir / "tokenizer.model";
  if (std::filesystem::exists(spm)) return std::make_unique<SentencePieceTokenizer>(spm);
  const std::filesystem::path json = dir / "tokenizer.json";
  if (std::filesystem::exists(json)) return ByteTokenizer::from_json_file(json);
  throw Error(dir.string() +
              ": no tokenizer.model (SentencePiece) or tokenizer.json (Headway "
              "byte-level) in the checkpoint directory");
}

}  // namespace headway::core
