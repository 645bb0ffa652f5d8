// After a large body the handler's thread returns freed memory to the system; small bodies cost
// nothing. (That a second large body within a second is not trimmed again is not asserted: it
// depends on how long the machine takes between two calls.)
#include "freed_memory.h"

#include <gtest/gtest.h>

namespace headway::serving::http {
namespace {

TEST(FreedMemory, OnlyALargeBodyIsFollowedByATrim) {
  EXPECT_FALSE(return_freed_memory_after_body(0));
  EXPECT_FALSE(return_freed_memory_after_body(kTrimAfterBodyBytes - 1));
  EXPECT_FALSE(return_freed_memory_if_pending());  // no large body yet
#if defined(__GLIBC__)
  // The process's first large body: no trim ran before it.
  EXPECT_TRUE(return_freed_memory_after_body(kTrimAfterBodyBytes));
#else
  EXPECT_FALSE(return_freed_memory_after_body(kTrimAfterBodyBytes));
#endif
}

}  // namespace
}  // namespace headway::serving::http
