// Why a frontend cannot listen, from a bind tried again.
#include <gtest/gtest.h>
#include <headway/serving/listen_failure.h>
#include <netinet/in.h>
#include <sys/socket.h>
#include <unistd.h>

namespace {

using headway::serving::why_cannot_listen;

TEST(ListenFailure, AnAddressThatIsNotThisMachinesIsNamedAsSuch) {
  // 192.0.2.0/24 is TEST-NET-1 (RFC 5737): no machine has it.
  EXPECT_EQ(why_cannot_listen("192.0.2.1", 8000), "the host is not an address of this machine");
}

TEST(ListenFailure, APortAnotherSocketListensOnIsInUse) {
  const int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_in address{};
  address.sin_family = AF_INET;
  address.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  ASSERT_EQ(::bind(fd, reinterpret_cast<sockaddr*>(&address), sizeof address), 0);
  ASSERT_EQ(::listen(fd, 1), 0);
  socklen_t size = sizeof address;
  ASSERT_EQ(::getsockname(fd, reinterpret_cast<sockaddr*>(&address), &size), 0);
  EXPECT_EQ(why_cannot_listen("127.0.0.1", ntohs(address.sin_port)), "the port is in use");
  ::close(fd);
}

}  // namespace
