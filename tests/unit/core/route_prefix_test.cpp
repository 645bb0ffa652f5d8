// core::route_prefix_hashes: what a router that reads how prompts begin is given (ABI 1.8).
#include <gtest/gtest.h>
#include <headway/core/route_prefix.h>

#include <cstdint>
#include <numeric>
#include <vector>

namespace headway::core {
namespace {

constexpr uint32_t kPiece = kRoutePrefixPieceTokens;

std::vector<int32_t> ids(size_t n, int32_t first) {
  std::vector<int32_t> v(n);
  std::iota(v.begin(), v.end(), first);
  return v;
}

std::vector<uint64_t> hashes_of(const std::vector<int32_t>& prompt) {
  std::vector<uint64_t> out;
  route_prefix_hashes(prompt, out);
  return out;
}

TEST(RoutePrefix, OneHashPerWholePiece) {
  EXPECT_TRUE(hashes_of({}).empty());
  EXPECT_TRUE(hashes_of(ids(kPiece - 1, 0)).empty());
  EXPECT_EQ(hashes_of(ids(kPiece, 0)).size(), 1u);
  EXPECT_EQ(hashes_of(ids(3 * kPiece + kPiece / 2, 0)).size(), 3u);
}

// A hash names the whole beginning up to its piece's end: equal while two prompts agree, different
// from the piece where they part, and after it even where they agree again.
TEST(RoutePrefix, PromptsShareHashesExactlyAsFarAsTheyShareWholePieces) {
  std::vector<int32_t> a = ids(5 * kPiece, 100);
  std::vector<int32_t> b = a;
  b[2 * kPiece + 7] += 1;  // they part inside the third piece
  const std::vector<uint64_t> ha = hashes_of(a);
  const std::vector<uint64_t> hb = hashes_of(b);
  ASSERT_EQ(ha.size(), 5u);
  ASSERT_EQ(hb.size(), 5u);
  EXPECT_EQ(ha[0], hb[0]);
  EXPECT_EQ(ha[1], hb[1]);
  for (size_t i = 2; i < 5; ++i) EXPECT_NE(ha[i], hb[i]) << i;
  // A longer prompt with the same beginning begins with the same hashes.
  std::vector<int32_t> longer = a;
  longer.insert(longer.end(), {1, 2, 3});
  longer.insert(longer.end(), a.begin(), a.begin() + kPiece);
  const std::vector<uint64_t> hl = hashes_of(longer);
  ASSERT_EQ(hl.size(), 6u);
  EXPECT_TRUE(std::equal(ha.begin(), ha.end(), hl.begin()));
}

// The same piece at another place in a prompt is another beginning, and the hashes of different
// pieces differ: a router matches beginnings, not pieces anywhere.
TEST(RoutePrefix, AHashDependsOnEverythingBeforeIt) {
  const std::vector<int32_t> piece = ids(kPiece, 7);
  std::vector<int32_t> twice = piece;
  twice.insert(twice.end(), piece.begin(), piece.end());
  const std::vector<uint64_t> h = hashes_of(twice);
  ASSERT_EQ(h.size(), 2u);
  EXPECT_NE(h[0], h[1]);
  EXPECT_NE(hashes_of(ids(kPiece, 7))[0], hashes_of(ids(kPiece, 8))[0]);
}

// The same prompt hashes alike every time (a fixed seed: a simulation placed by such a router gives
// the same figures again), and the output vector is replaced, not appended to.
TEST(RoutePrefix, TheSamePromptHashesAlikeAndTheOutputIsReplaced) {
  const std::vector<int32_t> prompt = ids(4 * kPiece, 3);
  std::vector<uint64_t> out = {1, 2, 3, 4, 5, 6, 7, 8};
  route_prefix_hashes(prompt, out);
  EXPECT_EQ(out, hashes_of(prompt));
  EXPECT_EQ(out.size(), 4u);
}

}  // namespace
}  // namespace headway::core
