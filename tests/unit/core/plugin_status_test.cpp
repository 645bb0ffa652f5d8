// A failed plugin call's message as the host reads it (error.h): within the buffer, UTF-8, never
// empty.
#include <gtest/gtest.h>
#include <headway/core/error.h>

#include <cstring>
#include <memory>
#include <string>

namespace headway::core {
namespace {

TEST(PluginMessage, AnUnterminatedMessageIsReadWithinItsBuffer) {
  // On the heap, sized exactly: a read past the buffer is an AddressSanitizer report.
  auto status = std::make_unique<hw_status>();
  std::memset(status->message, 'x', sizeof(status->message));
  EXPECT_EQ(plugin_message(*status), std::string(HW_STATUS_MESSAGE_CAPACITY, 'x'));
}

TEST(PluginMessage, BytesThatAreNotUtf8AreReplaced) {
  hw_status status{};
  std::strcpy(status.message, "bad \xff byte, caf\xc3\xa9");
  EXPECT_EQ(plugin_message(status), "bad \xEF\xBF\xBD byte, caf\xc3\xa9");
}

TEST(PluginMessage, AnEmptyMessageSaysThereWasNone) {
  hw_status status{};
  EXPECT_EQ(plugin_message(status), "(the plugin gave no message)");
  try {
    check_status(HW_INTERNAL, status, "scheduler 'x' schedule");
    ADD_FAILURE() << "no error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "scheduler 'x' schedule: (the plugin gave no message)");
    EXPECT_EQ(e.code(), HW_INTERNAL);
  }
}

}  // namespace
}  // namespace headway::core
