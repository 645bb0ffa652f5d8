// GuardedBuffer: the guard entry past a capacity notices a write there and only there, is set anew
// for each capacity, and the buffer does not move once it has held its largest capacity (no
// allocation per step).
#include <gtest/gtest.h>
#include <headway/abi.h>
#include <headway/core/guarded_buffer.h>

namespace headway::core {
namespace {

TEST(GuardedBuffer, NoticesAWriteAtItsCapacityAlone) {
  GuardedBuffer<hw_slice> slices;
  hw_slice* entries = slices.prepare(4);
  for (int i = 0; i < 4; ++i) entries[i] = hw_slice{UINT64_MAX, UINT32_MAX, 0};
  EXPECT_TRUE(slices.guard_intact());
  entries[4] = hw_slice{0, 0, 0};  // one past the capacity
  EXPECT_FALSE(slices.guard_intact());
  EXPECT_EQ(slices.capacity(), 4u);
  // The next prepare() sets the guard again, wherever the capacity now ends.
  slices.prepare(4);
  EXPECT_TRUE(slices.guard_intact());
  entries = slices.prepare(2);
  entries[2] = hw_slice{7, 0, 1};  // inside the room of a larger step, past this one's capacity
  EXPECT_FALSE(slices.guard_intact());
}

TEST(GuardedBuffer, AnEmptyCapacityHasItsGuardToo) {
  GuardedBuffer<int32_t> ids;
  EXPECT_TRUE(ids.guard_intact());
  ids.prepare(0)[0] = -1;
  EXPECT_FALSE(ids.guard_intact());
}

TEST(GuardedBuffer, DoesNotMoveForCapacitiesItHasHeld) {
  GuardedBuffer<uint64_t> ids;
  const uint64_t* largest = ids.prepare(64);
  for (size_t capacity : {0, 1, 63, 64, 17}) {
    EXPECT_EQ(ids.prepare(capacity), largest) << capacity;
    EXPECT_TRUE(ids.guard_intact()) << capacity;
  }
}

}  // namespace
}  // namespace headway::core
