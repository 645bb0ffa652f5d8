// What [server] cors_allowed_origins accepts: origins exactly as browsers write them in Origin, so
// that an entry can match; and why each near miss would never match.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <headway/core/web_origin.h>

#include <string>
#include <vector>

namespace headway::core {
namespace {

using ::testing::HasSubstr;

TEST(WebOrigin, OriginsAsBrowsersWriteThemAreAccepted) {
  for (const char* origin :
       {"*", "https://chat.example.com", "http://localhost:3000", "http://127.0.0.1:8080",
        "http://[::1]:5173", "https://[2001:db8::1]", "chrome-extension://abcdefghijklmnop",
        "tauri://localhost", "app+x.y-z://host"}) {
    EXPECT_EQ(why_not_web_origin(origin), "") << origin;
  }
}

TEST(WebOrigin, NearMissesSayHowToWriteTheOrigin) {
  EXPECT_THAT(why_not_web_origin("https://chat.example.com/"),
              AllOf(HasSubstr("trailing slash"), HasSubstr("write \"https://chat.example.com\"")));
  EXPECT_THAT(why_not_web_origin("https://chat.example.com/app?x=1"),
              AllOf(HasSubstr("a path"), HasSubstr("write \"https://chat.example.com\"")));
  EXPECT_THAT(why_not_web_origin("chat.example.com"),
              AllOf(HasSubstr("not an origin"), HasSubstr("\"https://chat.example.com\"")));
  EXPECT_THAT(why_not_web_origin("https://chat.example.com:443"),
              AllOf(HasSubstr("default port"), HasSubstr("write \"https://chat.example.com\"")));
  EXPECT_THAT(why_not_web_origin("http://localhost:80"), HasSubstr("default port"));
  EXPECT_EQ(why_not_web_origin("http://localhost:443"), "");  // not http's default
  EXPECT_THAT(why_not_web_origin("https://Chat.Example.com"), HasSubstr("lower case"));
  EXPECT_THAT(why_not_web_origin("null"), HasSubstr("every page"));
  EXPECT_THAT(why_not_web_origin(""), HasSubstr("must not be empty"));
  EXPECT_THAT(why_not_web_origin("https://*.example.com"), HasSubstr("'*'"));
  EXPECT_THAT(why_not_web_origin("https://a.example https://b.example"), HasSubstr("whitespace"));
  EXPECT_THAT(why_not_web_origin("https://user@a.example"), HasSubstr("'@'"));
  EXPECT_THAT(why_not_web_origin("https://"), HasSubstr("no host"));
  EXPECT_THAT(why_not_web_origin("https://:8080"), HasSubstr("no host"));
  EXPECT_THAT(why_not_web_origin("http://localhost:"), HasSubstr("invalid port \"\""));
  EXPECT_THAT(why_not_web_origin("http://localhost:0"), HasSubstr("invalid port \"0\""));
  EXPECT_THAT(why_not_web_origin("http://localhost:65536"), HasSubstr("invalid port"));
  EXPECT_THAT(why_not_web_origin("http://localhost:3o00"), HasSubstr("invalid port"));
  EXPECT_THAT(why_not_web_origin("http://[::1"), HasSubstr("unclosed '['"));
  EXPECT_THAT(why_not_web_origin("http://[::1]x"), HasSubstr("after its host's ']'"));
  EXPECT_THAT(why_not_web_origin("1http://a.example"), HasSubstr("its scheme \"1http\""));
  EXPECT_THAT(why_not_web_origin("http://localhost:03000"),
              AllOf(HasSubstr("leading zero"), HasSubstr("write \"http://localhost:3000\"")));
  EXPECT_THAT(why_not_web_origin("https://b\xc3\xbc"
                                 "cher.de"),
              HasSubstr("punycode"));
  EXPECT_EQ(why_not_web_origin("https://xn--bcher-kva.de"), "");
  EXPECT_THAT(why_not_web_origin("HTTPS://chat.example.com"), HasSubstr("a scheme in lower case"));
  EXPECT_THAT(why_not_web_origin("wss://Chat.example.com"), HasSubstr("host in lower case"));
  // Another scheme's host is sent as it is (a browser extension's id may be upper case).
  EXPECT_EQ(why_not_web_origin("safari-web-extension://6C8E1A2B-0000-4000-8000-00000000ABCD"), "");
}

TEST(WebOrigin, CredentialsNeedListedOrigins) {
  EXPECT_EQ(why_no_credentials_with({"https://a.example", "http://localhost:3000"}), "");
  EXPECT_THAT(why_no_credentials_with({"https://a.example", "*"}), HasSubstr("list the origins"));
  EXPECT_THAT(why_no_credentials_with({}), HasSubstr("no origin listed"));
}

}  // namespace
}  // namespace headway::core
