#pragma once
// The long-context tasks in the configuration (docs/training.md, "Long-context evaluation"):
//   [task.<name>]     the options of the eight tasks (niah_single, ..., phonebook), for
//                     training on them (data.source = "<name>") and for evaluating on them
//   eval.longctx*     which tasks to evaluate, in which form, at how many depths and
//                     samples, and the effective-length threshold; or (eval.longctx_set)
//                     a text-form set to evaluate instead (core/train/eval_longctx.hpp)
//
//   std::vector<std::string> t = config::longctx_tasks(cfg.eval);   // {} when off
//   tasks::TaskOptions o = config::longctx_task_options(cfg);        // form applied
//   for (const auto& name : t) lengths = config::longctx_task_lengths(cfg, name);
//
// Every error names the key (eval.longctx..., task.<name>.<option>) and the fix.
#include <cstdint>
#include <string>
#include <vector>

#include "core/config/table.hpp"
#include "core/config/train_config.hpp"

namespace lcr::config {

// Binds [task.<name>] of the long-context tasks into `task` (the [task] table).
void bind_longctx_tasks(Table& task, tasks::TaskOptions& o);
// Binds the eval.longctx* keys into `eval` (the [eval] table).
void bind_longctx_eval(Table& eval, EvalOptions& e);

// eval.longctx as task names, in long_task_names() order ("all": every one; "": none).
// Error naming eval.longctx for an unknown or repeated name.
std::vector<std::string> longctx_tasks(const EvalOptions& e);

// Whether there is a long-context evaluation: eval.longctx_set or eval.longctx is set.
bool longctx_on(const EvalOptions& e);

// The form the tasks are evaluated in, "byte" or "token": eval.longctx_form, or for "auto"
// the model's: the form of data.source when it is a long-context task; "byte" for byte text
// (data.source = "text") and for models of 256 or 257 tokens; "token" otherwise.
std::string longctx_form(const TrainConfig& cfg);
int32_t longctx_form_vocab(const std::string& form);  // 256 (byte) or 486 (token)

// The [task.<name>] options with every long-context task's form set to longctx_form(cfg).
tasks::TaskOptions longctx_task_options(const TrainConfig& cfg);

// The evaluation lengths (eval_lengths) the task fits: from the first length its sequence
// fits in to the longest (shorter ones are left out). Error naming the task, eval.longctx
// and the fix when it fits none, or fits a length but not a longer one.
std::vector<int64_t> longctx_task_lengths(const TrainConfig& cfg, const std::string& task);

// check_train_config's part: the eval.longctx* values, each task's options and lengths,
// and (once model.vocab_size is known, > 0) that the model's vocabulary holds the form's.
// With eval.longctx_set the tasks are not generated and not checked here: the set is
// checked when longctx_plan opens it.
void check_longctx_config(const TrainConfig& cfg);

}  // namespace lcr::config
