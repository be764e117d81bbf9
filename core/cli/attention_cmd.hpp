#pragma once
// `lcr attention`: attention on tensors from an HDF5 file (layout: docs/attention-file.md).
// Reads q, k, v (and dout, scheme inputs, parameters), runs attention_forward (and
// attention_backward when dout is present) and writes o, lse (and every gradient) to a
// new HDF5 file, atomically (written as <output>.tmp, then renamed).
#include <string>
#include <vector>

#include "kernels/attention/spec.hpp"

namespace lcr::cli {

struct AttentionCommand {
  std::string input, output;
  std::string precision = "float64";   // float64 | float32: the compute and output type
  std::string config;                  // optional TOML file with an [attention] table
  std::vector<std::string> overrides;  // attention.key=value, applied last
};

// Runs the command; returns the spec it resolved (defaults < the input's /spec attributes
// < the config file < the overrides; shapes from the datasets). Errors are lcr::Error
// naming the file and the dataset.
AttentionSpec run_attention(const AttentionCommand& cmd);

}  // namespace lcr::cli
