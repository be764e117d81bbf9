#include "core/data/longctx_set.hpp"

#include <fmt/format.h>

#include <algorithm>
#include <cmath>

#include "core/io/hdf5.hpp"
#include "kernels/base/error.hpp"

namespace lcr::data {
namespace {

constexpr const char* kRemake =
    "make the set again with experiments/data/prepare_longctx.py (docs/data.md, \"Text form\")";

[[noreturn]] void refuse(const std::string& path, const std::string& problem,
                         const std::string& fix = kRemake) {
  throw_error(path, ": ", problem, "; ", fix);
}

std::string text_attr(const h5::Location& at, const std::string& name) {
  const h5::Attr a = at.attr(name);
  if (const auto* s = std::get_if<std::string>(&a)) return *s;
  refuse(at.file(), fmt::format("attribute '{}' of {} is not a string", name, at.path()));
}

int64_t int_attr(const h5::Location& at, const std::string& name) {
  const h5::Attr a = at.attr(name);
  if (const auto* v = std::get_if<int64_t>(&a)) return *v;
  refuse(at.file(), fmt::format("attribute '{}' of {} is not an integer", name, at.path()));
}

double real_attr(const h5::Location& at, const std::string& name) {
  const h5::Attr a = at.attr(name);
  if (const auto* v = std::get_if<double>(&a)) return *v;
  if (const auto* v = std::get_if<int64_t>(&a)) return double(*v);
  refuse(at.file(), fmt::format("attribute '{}' of {} is not a number", name, at.path()));
}

std::string cell_name(size_t k) { return fmt::format("cells/{:06d}", k); }

// Reads and checks cell k; fills `out` when given.
LongSetCell load(const h5::File& f, size_t k, int64_t vocab, tasks::LongCell* out) {
  const std::string& file = f.file();
  const std::string name = cell_name(k);
  if (!f.has_group("cells") || !f.group("cells").has_group(name.substr(6)))
    refuse(file, fmt::format("the set has no group /{} (its 'cells' attribute promises it): "
                             "the file is truncated",
                             name));
  const h5::Location g = f.group("cells").group(name.substr(6));
  LongSetCell c;
  c.task = text_attr(g, "task");
  if (!tasks::is_long_task(c.task))
    refuse(file,
           fmt::format("/{} is for task '{}', which is not a long-context task", name, c.task));
  c.category = tasks::long_task_category(c.task);
  const std::string category = text_attr(g, "category");
  if (category != tasks::long_category_name(c.category))
    refuse(file, fmt::format("/{}: task {} is in category {}, not '{}'", name, c.task,
                             tasks::long_category_name(c.category), category));
  c.length = int_attr(g, "length");
  c.depth = real_attr(g, "depth");
  const bool needle = tasks::long_task_has_depth(c.task);
  if (c.length < 2)
    refuse(file,
           fmt::format("/{} has length {}; a sequence needs at least 2 tokens", name, c.length));
  if (needle ? !(c.depth >= 0.0 && c.depth <= 1.0) : !std::isnan(c.depth))
    refuse(file, fmt::format("/{} ({}) has depth {}; expected {}", name, c.task, c.depth,
                             needle ? "a needle depth in [0, 1]" : "NaN (no needle)"));

  const std::vector<int64_t> ts = g.shape("tokens"), bs = g.shape("span_begin"),
                             es = g.shape("span_end");
  if (ts.size() != 2 || ts[0] < 1 || ts[1] != c.length)
    refuse(file, fmt::format("/{}/tokens has shape {}, expected [samples, {}] (the cell's "
                             "length): the array is truncated or the file damaged",
                             name, shape_string(ts), c.length));
  c.samples = ts[0];
  if (bs.size() != 2 || bs[0] != c.samples || bs[1] < 1 || es != bs)
    refuse(file, fmt::format("/{}: span_begin has shape {} and span_end {}, expected both "
                             "[{}, answers >= 1] (one row per sample): the arrays are "
                             "truncated or the file damaged",
                             name, shape_string(bs), shape_string(es), c.samples));
  c.answers = bs[1];

  const std::vector<int32_t> tokens = g.read<int32_t>("tokens");
  const std::vector<int64_t> begin = g.read<int64_t>("span_begin"),
                             end = g.read<int64_t>("span_end");
  for (size_t i = 0; i < tokens.size(); ++i)
    if (tokens[i] < 0 || tokens[i] >= vocab)
      refuse(file,
             fmt::format("/{}/tokens: sample {} position {} holds token id {}, outside the "
                         "vocabulary [0, {})",
                         name, int64_t(i) / c.length, int64_t(i) % c.length, tokens[i], vocab));
  for (int64_t b = 0; b < c.samples; ++b) {
    int64_t after = 0;  // spans are increasing and do not overlap
    for (int64_t s = 0; s < c.answers; ++s) {
      const int64_t lo = begin[size_t(b * c.answers + s)], hi = end[size_t(b * c.answers + s)];
      // Labels are next tokens, so the last label position is length - 2: end <= length - 1.
      if (!(lo >= after && lo < hi && hi <= c.length - 1))
        refuse(file, fmt::format("/{}: sample {} answer {} has the label span [{}, {}), which is "
                                 "{}; spans must be non-empty, in order, inside [0, {})",
                                 name, b, s, lo, hi,
                                 lo < 0 || hi > c.length - 1 ? "out of range"
                                 : lo >= hi                  ? "empty"
                                                             : "before the end of the previous one",
                                 c.length - 1));
      after = hi;
    }
  }
  if (!out) return c;
  out->task = c.task;
  out->category = c.category;
  out->length = c.length;
  out->depth = c.depth;
  out->batch = Batch(c.samples, c.length, int32_t(vocab));
  out->batch.tokens = tokens;
  out->spans.assign(size_t(c.samples), {});
  for (int64_t b = 0; b < c.samples; ++b) {
    int32_t* labels = out->batch.labels_row(b);
    const int32_t* row = out->batch.tokens_row(b);
    for (int64_t s = 0; s < c.answers; ++s) {
      const tasks::AnswerSpan span{begin[size_t(b * c.answers + s)],
                                   end[size_t(b * c.answers + s)]};
      for (int64_t t = span.begin; t < span.end; ++t) labels[t] = row[t + 1];
      out->spans[size_t(b)].push_back(span);
    }
  }
  return c;
}

}  // namespace

LongSet LongSet::open(const std::string& path, int64_t vocab) {
  h5::quiet();
  const h5::File f = h5::File::open(path);  // Error: missing, not HDF5, damaged
  LongSet set;
  set.path_ = path;
  if (!f.has_attr("format") || text_attr(f, "format") != kFormat)
    refuse(path,
           fmt::format("not a long-context evaluation set (no root attribute format = "
                       "\"{}\")",
                       kFormat),
           "give the file experiments/data/prepare_longctx.py wrote (docs/data.md, \"Text form\")");
  const int64_t version = int_attr(f, "version");
  if (version != kVersion)
    refuse(path, fmt::format("set version {}; this lcr reads version {}", version, kVersion));
  set.vocab_ = int_attr(f, "vocab_size");
  set.sha_ = text_attr(f, "tokenizer_sha256");
  set.source_ = text_attr(f, "source");
  if (set.vocab_ != vocab)
    refuse(path,
           fmt::format("the set was tokenised with a vocabulary of {} tokens (tokenizer sha256 "
                       "{}), but the model's has {}: a different tokenizer",
                       set.vocab_, set.sha_.substr(0, 12), vocab),
           "make the set with the tokenizer the model's shards were made with "
           "(prepare_longctx.py --tokenizer <prepare_text.py's output folder>)");
  const int64_t n = int_attr(f, "cells");
  if (n < 1) refuse(path, fmt::format("the set declares {} cells; it needs at least one", n));
  for (int64_t k = 0; k < n; ++k) set.cells_.push_back(load(f, size_t(k), vocab, nullptr));
  return set;
}

std::vector<int64_t> LongSet::lengths() const {
  std::vector<int64_t> out;
  for (const LongSetCell& c : cells_) out.push_back(c.length);
  std::sort(out.begin(), out.end());
  out.erase(std::unique(out.begin(), out.end()), out.end());
  return out;
}

tasks::LongCell LongSet::read(size_t k) const {
  require(k < cells_.size(), "LongSet::read: cell ", k, " of ", cells_.size());
  const h5::File f = h5::File::open(path_);
  tasks::LongCell out;
  const LongSetCell c = load(f, k, vocab_, &out);
  if (c.task != cells_[k].task || c.length != cells_[k].length || c.samples != cells_[k].samples)
    refuse(path_, fmt::format("/{} changed since the set was opened", cell_name(k)),
           "leave the set alone while lcr evaluates it");
  return out;
}

}  // namespace lcr::data
