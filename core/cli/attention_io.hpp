#pragma once
// The reading and writing half of `lcr attention` (attention_cmd.cpp), shared with
// `lcr ring-attention` (ring_attention_cmd.cpp) so that both read the same input file the
// same way and write their results in the same layout (docs/attention-file.md), which is
// what makes the two outputs comparable dataset by dataset.
#include "core/cli/attention_cmd.hpp"
#include "kernels/attention/attention.hpp"

namespace lcr::cli {

// Everything an attention call needs, read from cmd.input: the resolved spec (defaults <
// /spec attributes < --config < overrides; sizes from the datasets), the FULL tensors
// q [B, Lq, H, dq], k, v, scheme inputs (fox_cq/ck, path_w/beta), q_pos0/k_pos0 from the
// file's attributes, the parameters, and dout [B, Lq, H, dv] when /dout exists.
template <class T>
struct AttentionProblem {
  AttentionSpec spec;
  AttentionInputs<T> in;
  ParamSet<T> params;
  View4<T> dout;  // empty (extent 0) when the file has no /dout
  bool has_dout() const { return dout.extent(0) > 0; }
};

// Checks --precision and that --output differs from --input (lcr::Error otherwise).
void check_attention_command(const AttentionCommand& cmd);

// Reads and validates the problem (lcr::Error naming file and dataset on bad input).
template <class T>
AttentionProblem<T> read_attention_problem(const AttentionCommand& cmd);

// Writes o, lse (and, when g is given, every gradient) to cmd.output atomically, with the
// resolved spec as /spec attributes. T must match cmd.precision.
template <class T>
void write_attention_result(const AttentionCommand& cmd, const AttentionSpec& spec,
                            const AttentionInputs<T>& in, const AttentionOutputs<T>& out,
                            const AttentionGrads<T>* g);

}  // namespace lcr::cli
