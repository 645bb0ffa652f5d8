// Why a frontend cannot listen, from a bind tried again.
#include <gtest/gtest.h>
#include <headway/serving/listen_failure.h>

#include "../test_support/listening_socket.h"

namespace {

using headway::serving::why_cannot_listen;

TEST(ListenFailure, AnAddressThatIsNotThisMachinesIsNamedAsSuch) {
  // 192.0.2.0/24 is TEST-NET-1 (RFC 5737): no machine has it.
  EXPECT_EQ(why_cannot_listen("192.0.2.1", 8000), "the host is not an address of this machine");
}

TEST(ListenFailure, APortAnotherSocketListensOnIsInUse) {
  const headway::test::ListeningSocket taken;
  EXPECT_EQ(why_cannot_listen("127.0.0.1", taken.port()), "the port is in use");
}

}  // namespace
