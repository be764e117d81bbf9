#pragma once
// The constructors behind make_task(), one per task source file. Each validates its
// options and throws an lcr::Error naming the bad option ("task.flip_flop.p_ignore").
#include <memory>

#include "core/data/tasks/longctx.hpp"
#include "core/data/tasks/task.hpp"

namespace lcr::tasks {

std::unique_ptr<Task> make_copy_mixture(int64_t seq_len, const CopyMixtureOptions& o);
std::unique_ptr<Task> make_passkey(int64_t seq_len, const PasskeyOptions& o);
std::unique_ptr<Task> make_indirect_indexing(int64_t seq_len, const IndirectIndexingOptions& o);
std::unique_ptr<Task> make_flip_flop(int64_t seq_len, const FlipFlopOptions& o);
std::unique_ptr<Task> make_mqar(int64_t seq_len, const MqarOptions& o);
std::unique_ptr<Task> make_a5(int64_t seq_len, const A5Options& o);

// The long-context tasks (longctx.hpp). make_niah serves the four niah_* names.
std::unique_ptr<LongTask> make_niah(const std::string& name, int64_t seq_len, const NiahOptions& o);
std::unique_ptr<LongTask> make_variable_tracking(int64_t seq_len, const VariableTrackingOptions& o);
std::unique_ptr<LongTask> make_cwe(int64_t seq_len, const CweOptions& o);
std::unique_ptr<LongTask> make_fwe(int64_t seq_len, const FweOptions& o);
std::unique_ptr<LongTask> make_phonebook(int64_t seq_len, const PhonebookOptions& o);

// A mixture of long-context tasks (longctx_mix.cpp); `o` holds every task's options.
std::unique_ptr<Task> make_longctx_mix(const TaskOptions& o);

}  // namespace lcr::tasks
