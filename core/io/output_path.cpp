#include "core/io/output_path.hpp"

#include <filesystem>

#include "kernels/base/error.hpp"

namespace lcr::io {
namespace fs = std::filesystem;

namespace {

// The canonical parent directory plus the file name ("" when the parent does not exist).
fs::path resolved(const std::string& p) {
  std::error_code ec;
  fs::path path(p);
  const fs::path parent = path.has_parent_path() ? path.parent_path() : fs::path(".");
  const fs::path cp = fs::canonical(parent, ec);
  if (ec) return {};
  return cp / path.filename();
}

}  // namespace

bool same_file(const std::string& a, const std::string& b) {
  if (a.empty() || b.empty()) return false;
  std::error_code ec;
  const bool ea = fs::exists(a, ec), eb = fs::exists(b, ec);
  if (ea && eb) {
    const bool eq = fs::equivalent(a, b, ec);
    return !ec && eq;
  }
  if (ea != eb) return false;  // one exists, the other does not: different files
  const fs::path ra = resolved(a), rb = resolved(b);
  return !ra.empty() && ra == rb;
}

void check_output_path(const std::string& output, const std::vector<std::string>& inputs,
                       const std::string& option) {
  require(!output.empty(), option, " is empty: name the file to write");
  for (const auto& in : inputs)
    require(!same_file(output, in), option, " ", output, " is the input ", in,
            ": choose another output file (the input would be overwritten)");
}

void check_tmp_path(const std::string& tmp) {
  std::error_code ec;
  const auto st = fs::symlink_status(tmp, ec);
  require(!fs::exists(st) || st.type() == fs::file_type::regular, tmp,
          " exists and is not a file lcr wrote; remove it yourself (lcr deletes only what it ",
          "created)");
}

}  // namespace lcr::io
