#pragma once
// Text-form long-context sets written from C++ with prepare_longctx.py's layout
// (docs/data.md, "Text form"), for the reader's tests: good ones, and hooks to spoil them.
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <vector>

#include "core/io/hdf5.hpp"

namespace lcr::test {

struct SetCell {
  std::string task = "niah_single", category = "single_needle";
  int64_t length = 0;
  double depth = 0.5;  // NaN for cwe and fwe
  int64_t samples = 0, answers = 0;
  std::vector<int32_t> tokens;      // [samples, length]
  std::vector<int64_t> begin, end;  // [samples, answers]
};

// `samples` rows of `length` ids below `vocab`, with `answers` two-position spans ending at
// the last label position (length - 1), in order.
inline SetCell set_cell(int64_t length, int64_t samples, int64_t answers, int64_t vocab) {
  SetCell c;
  c.length = length;
  c.samples = samples;
  c.answers = answers;
  for (int64_t b = 0; b < samples; ++b) {
    for (int64_t t = 0; t < length; ++t) c.tokens.push_back(int32_t((7 * b + 3 * t + 1) % vocab));
    for (int64_t a = 0; a < answers; ++a) {
      c.begin.push_back(length - 1 - 3 * (answers - a));
      c.end.push_back(length - 1 - 3 * (answers - a) + 2);
    }
  }
  return c;
}

// Writes the set; `spoil` may change the file (attributes, groups) before it is closed.
inline void write_set(const std::string& path, const std::vector<SetCell>& cells, int64_t vocab,
                      const std::function<void(const h5::File&)>& spoil = {}) {
  h5::File f = h5::File::create(path);
  f.set_attr("format", std::string("lcr-longctx-set"));
  f.set_attr("version", int64_t(1));
  f.set_attr("vocab_size", vocab);
  f.set_attr("tokenizer_sha256", std::string(64, 'a'));
  f.set_attr("tokenizer", std::string("/nowhere/tokenizer.json"));
  f.set_attr("source", std::string("test text"));
  f.set_attr("cells", int64_t(cells.size()));
  {  // every group handle closed before the file
    const h5::Location all = f.create_group("cells");
    for (size_t k = 0; k < cells.size(); ++k) {
      const SetCell& c = cells[k];
      char name[24];  // room for any size_t: GCC checks the snprintf bound
      std::snprintf(name, sizeof name, "%06zu", k);
      const h5::Location g = all.create_group(name);
      g.set_attr("task", c.task);
      g.set_attr("category", c.category);
      g.set_attr("length", c.length);
      g.set_attr("depth", c.depth);
      g.write("tokens", c.tokens.data(), {c.samples, int64_t(c.tokens.size()) / c.samples});
      g.write("span_begin", c.begin.data(), {c.samples, c.answers});
      g.write("span_end", c.end.data(), {c.samples, c.answers});
    }
    if (spoil) spoil(f);
  }
  f.close();
}

}  // namespace lcr::test
