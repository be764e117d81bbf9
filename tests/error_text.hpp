#pragma once
// The message of the lcr::Error a call throws, or "" when it throws none: how the tests
// check that bad input is refused with a message naming the problem and the fix.
#include <string>

#include "kernels/base/error.hpp"

namespace lcr::test {

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

}  // namespace lcr::test
