#pragma once
// `lcr eval --run runs/<name> [--step N] [eval.key=value ...]`: evaluates a checkpoint of a
// run (the newest complete one, or step N) with the run's own config.toml, the overrides
// applied on top (typically eval.max_length_factor, eval.passkey, eval.longctx,
// eval.windows), and prints perplexity per length, task accuracy, the passkey grid and the
// long-context tables (score per task and length, per category, the effective length). Collective
// over the world like training: any dp x cp grid that fits parallel.cp works, whatever the run
// trained with. Nothing is written to the run directory (run.h5 belongs to the trainer).
#include <cstdint>
#include <ostream>
#include <string>
#include <vector>

#include "core/train/evaluate.hpp"

namespace lcr::train {

struct EvalCommand {
  std::string run_dir;
  int64_t step = -1;  // -1 = the newest complete checkpoint
  std::vector<std::string> overrides;
  std::string output;  // a JSON file for the results (rank 0 writes it); "" = none
};

// Every rank returns the results; rank 0 also prints them to `out` and, with cmd.output,
// writes them as JSON (eval_json) to that file, atomically.
EvalResults eval_checkpoint(const EvalCommand& cmd, std::ostream& out);

// {"run": ..., "step": N, "overrides": [...], "lengths": [{"length", "loss", "ppl",
//  "token_accuracy", "sequence_accuracy"}...], "passkey": [{"length", "depth",
//  "accuracy"}...]}, and with eval.longctx "longctx": {"form", "threshold",
//  "effective_length", "cells": [{"task", "category", "length", "depth", "samples",
//  "token_accuracy", "all_match", "part_match"}...], "tasks": [{"task", "length", "score",
//  "all_match", "token_accuracy"}...], "categories": [{"category", "length", "score"}...],
//  "average": [{"length", "score"}...]}; NaN (no scored position, no depth) as null.
std::string eval_json(const EvalCommand& cmd, int64_t step, const EvalResults& res,
                      double longctx_threshold = 0.5);

}  // namespace lcr::train
