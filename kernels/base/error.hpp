#pragma once
// One error type for everything a user can get wrong: the message names the problem
// and, where there is one, the fix. Thrown on the host, never inside a kernel.
#include <sstream>
#include <stdexcept>
#include <string>

namespace lcr {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
inline void stream_all(std::ostringstream&) {}
template <class A, class... R>
void stream_all(std::ostringstream& os, const A& a, const R&... r) {
  os << a;
  stream_all(os, r...);
}
}  // namespace detail

// Builds a message from pieces: throw_error("head_dim ", d, " is odd; RoPE needs ...").
template <class... A>
[[noreturn]] void throw_error(const A&... parts) {
  std::ostringstream os;
  detail::stream_all(os, parts...);
  throw Error(os.str());
}

template <class... A>
void require(bool ok, const A&... parts) {
  if (!ok) throw_error(parts...);
}

}  // namespace lcr
