#pragma once
// `lcr inspect runs/<name>` (or a run.h5 path): a run file's summary, readable while the run
// is still writing it (SWMR read) and after a crash:
//   config      run name, model, data, steps, parallel grid, provenance, resumes
//   metrics     rows logged, the loss curve's first / min / last values and a few points
//               between, the last row (lr, grad norm, tokens/s, memory)
//   evaluation  the newest evaluation: perplexity per length, task accuracy, passkey; the
//               long-context tables (score per task and length, per category, the
//               effective length; longctx_summary.hpp)
//   priors      per layer and head, from the newest prior row: entropy, max logit and
//               first-token mass; GOAT: strongest mode (amplitude, |beta|/|alpha|), the
//               relative prior's peak lag within the training length and its height above
//               the median, and the first-token bump u(0) - mean u(1..31) of the head's
//               KV head; PoPE: mean query/key magnitude and the frequency the query uses
//               most, mean delta; RoPE: the pair with the largest query norm and the
//               norm-weighted mean pair index.
#include <ostream>
#include <string>

namespace lcr::train {

// A run directory stands for its run.h5.
std::string run_file_path(const std::string& run_or_file);

// Writes the summary; Error naming the path when it is not a readable run file.
void inspect_run(const std::string& run_or_file, std::ostream& out);

}  // namespace lcr::train
