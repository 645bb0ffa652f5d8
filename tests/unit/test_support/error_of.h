// The core::Error a piece of test code throws, for checking its code and message; a test failure
// (and an Error of code HW_OK) when it throws none. Header-only; test side.
#pragma once

#include <gtest/gtest.h>
#include <headway/abi.h>
#include <headway/core/error.h>

namespace headway::test {

template <class Body>
core::Error error_of(Body&& body) {
  try {
    body();
  } catch (const core::Error& e) {
    return e;
  }
  ADD_FAILURE() << "no Error was thrown";
  return core::Error("<none>", HW_OK);
}

}  // namespace headway::test
