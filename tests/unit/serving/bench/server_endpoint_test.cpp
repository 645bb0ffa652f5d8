#include <gtest/gtest.h>
#include <headway/core/error.h>
#include <headway/serving/bench/server_endpoint.h>

#include <filesystem>
#include <fstream>

namespace headway::serving::bench {
namespace {

std::string error_of(std::string_view url) {
  try {
    parse_server_url(url);
  } catch (const core::Error& e) {
    return e.what();
  }
  return "";
}

TEST(ServerEndpoint, ParsesOriginAndPrefix) {
  ServerEndpoint e = parse_server_url("http://127.0.0.1:8000");
  EXPECT_EQ(e.origin, "http://127.0.0.1:8000");
  EXPECT_EQ(e.base_path, "");
  e = parse_server_url("https://example.com/api/v1/");
  EXPECT_EQ(e.origin, "https://example.com");
  EXPECT_EQ(e.base_path, "/api");  // ".../v1" as OpenAI clients take it is the same server
  e = parse_server_url("http://[::1]:9000/serve");
  EXPECT_EQ(e.origin, "http://[::1]:9000");
  EXPECT_EQ(e.base_path, "/serve");
}

TEST(ServerEndpoint, BadUrlsNameTheUrlAndTheProblem) {
  EXPECT_NE(error_of("127.0.0.1:8000").find("no scheme"), std::string::npos);
  EXPECT_NE(error_of("ftp://host").find("unsupported scheme 'ftp'"), std::string::npos);
  EXPECT_NE(error_of("http://host:80x").find("bad port '80x'"), std::string::npos);
  EXPECT_NE(error_of("http://host:0").find("bad port"), std::string::npos);
  EXPECT_NE(error_of("http://host:70000").find("bad port"), std::string::npos);
  EXPECT_NE(error_of("http:///v1").find("no host"), std::string::npos);
  EXPECT_NE(error_of("http://host/?x=1").find("query"), std::string::npos);
  EXPECT_NE(error_of("http://u:p@host").find("credentials"), std::string::npos);
  EXPECT_NE(error_of("http://host:80x").find("http://host:80x"), std::string::npos);
}

TEST(ServerEndpoint, ModelListOfAnUnreachableServerIsAnErrorNamingIt) {
  // Port 1 on loopback: nothing listens there in a test environment.
  const ServerEndpoint e = parse_server_url("http://127.0.0.1:1");
  try {
    list_models(e);
    FAIL();
  } catch (const core::Error& error) {
    EXPECT_NE(std::string(error.what()).find("http://127.0.0.1:1/v1/models"), std::string::npos)
        << error.what();
  }
}

}  // namespace
}  // namespace headway::serving::bench
