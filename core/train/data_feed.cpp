#include "core/train/data_feed.hpp"

#include <algorithm>

#include "core/data/dataset.hpp"
#include "core/data/eval_windows.hpp"
#include "core/data/sampler.hpp"
#include "core/data/shard.hpp"
#include "kernels/base/error.hpp"

namespace lcr::train {

DataFeed::DataFeed(const TrainConfig& cfg) : cfg_(cfg) {
  const DataOptions& d = cfg.data;
  if (cfg.is_task()) {
    tasks::TaskOptions opt = d.task;
    opt.seq_len = cfg.train.seq_len;
    try {
      task_ = tasks::make_task(d.source, opt);
    } catch (const Error& e) {
      throw_error("data.source = \"", d.source, "\" at train.seq_len = ", cfg.train.seq_len, ": ",
                  e.what());
    }
    return;
  }
  const std::vector<std::string> paths = config::split_paths(d.paths);
  try {
    const std::vector<std::string> files = data::expand_data_paths(paths);
    for (const std::string& f : files) {
      const bool shard = data::is_token_shard(f);
      require(shard == (d.source == "shards"), f, " is ",
              shard ? "a token shard" : "not a token shard", " but data.source = \"", d.source,
              "\"; set data.source = \"", shard ? "shards" : "text", "\"");
    }
    data::TextOptions text;
    text.end_of_document = d.end_of_document;
    const data::SourcePtr all = data::open_token_source(paths, text, 0);
    const data::TrainValidation tv = data::split_tail(all, d.validation_fraction);
    train_ = tv.train;
    validation_ = tv.validation;
  } catch (const Error& e) {
    throw_error("data.paths = \"", d.paths, "\" (data.source = \"", d.source, "\"): ", e.what());
  }
  require(train_->size() > cfg.train.seq_len, "the training data holds ", train_->size(),
          " tokens, fewer than one window of train.seq_len + 1 = ", cfg.train.seq_len + 1,
          "; use more data or a shorter train.seq_len");
}

DataFeed::~DataFeed() = default;

int32_t DataFeed::vocab_size() const { return task_ ? task_->vocab_size() : train_->vocab_size(); }

std::string DataFeed::describe() const {
  if (task_) return "task " + task_->description();
  return train_->describe() + " | validation: " + validation_->describe();
}

data::Batch DataFeed::train_batch(int64_t step, int dp_rank, int dp_size) const {
  const uint64_t seed = uint64_t(cfg_.train.seed);
  if (task_) return task_->batch(seed, step, dp_rank, dp_size, cfg_.train.batch);
  data::SampleRequest req;
  req.seed = seed;
  req.step = step;
  req.dp_rank = dp_rank;
  req.dp_size = dp_size;
  req.batch = cfg_.train.batch;
  req.seq_len = cfg_.train.seq_len;
  req.mode = data::sampling_mode_from_name(cfg_.train.sampling);
  return data::sample_lm_batch(*train_, req);
}

std::vector<EvalSet> DataFeed::eval_sets(const std::vector<int64_t>& lengths) const {
  std::vector<EvalSet> out;
  const uint64_t seed = uint64_t(cfg_.train.seed);
  if (task_) {
    for (int64_t n : lengths) {
      tasks::TaskOptions opt = cfg_.data.task;
      opt.seq_len = n;
      std::unique_ptr<tasks::Task> t;
      try {
        t = tasks::make_task(cfg_.data.source, opt);
      } catch (const Error& e) {
        throw_error("evaluation length ", n,
                    " (eval.max_length_factor = ", cfg_.eval.max_length_factor, "): ", e.what());
      }
      out.push_back({n, t->samples(seed, data::Split::validation, 0, cfg_.eval.task_samples)});
    }
    return out;
  }
  std::vector<data::LengthWindows> w;
  try {
    w = data::perplexity_windows(*validation_, lengths, cfg_.eval.windows);
  } catch (const Error& e) {
    throw_error("eval.max_length_factor = ", cfg_.eval.max_length_factor, ": ", e.what(),
                " (lower eval.max_length_factor or raise data.validation_fraction)");
  }
  for (auto& x : w) out.push_back({x.length, std::move(x.batch)});
  return out;
}

std::shared_ptr<const std::string> DataFeed::validation_text(int64_t max_bytes) const {
  if (task_ || cfg_.data.source != "text") return nullptr;
  const int64_t n = std::min(validation_->size(), max_bytes);
  std::vector<int32_t> ids(static_cast<size_t>(n));
  validation_->read(0, n, ids.data());
  auto text = std::make_shared<std::string>(size_t(n), '\n');
  for (int64_t i = 0; i < n; ++i)
    if (ids[size_t(i)] < 256) (*text)[size_t(i)] = char(ids[size_t(i)]);
  return text;
}

}  // namespace lcr::train
