#pragma once
// Output paths of every command that writes (attention, ring-attention, shards, scaling,
// ...): one home for "is this output one of my inputs?" and the checks before writing.
#include <string>
#include <vector>

namespace lcr::io {

// True when a and b name the same file: for existing paths the same device and inode
// (so "./in.h5", "in.h5", an absolute path, a symlink and a hard link all match); for a
// path that does not exist yet, the same canonical parent directory and file name.
bool same_file(const std::string& a, const std::string& b);

// Refuses, naming `option` (e.g. "--output"): an empty path; an output that is any of
// `inputs` (same_file).
void check_output_path(const std::string& output, const std::vector<std::string>& inputs,
                       const std::string& option = "--output");

// Before writing `tmp` (an output's "<output>.tmp"): refuses when something that is not a
// regular file is in its place (lcr never creates one; it is never deleted for you).
void check_tmp_path(const std::string& tmp);

}  // namespace lcr::io
