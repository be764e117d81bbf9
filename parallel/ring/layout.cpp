#include "parallel/ring/layout.hpp"

#include <algorithm>
#include <sstream>

#include "kernels/base/error.hpp"

namespace lcr {

const char* layout_name(LayoutKind k) { return k == LayoutKind::Zigzag ? "zigzag" : "contiguous"; }

LayoutKind parse_layout(const std::string& name) {
  if (name == "contiguous") return LayoutKind::Contiguous;
  if (name == "zigzag") return LayoutKind::Zigzag;
  throw_error("unknown sequence layout '", name, "' (valid: contiguous, zigzag)");
}

SeqLayout::SeqLayout(LayoutKind kind, int64_t length, int ranks, int split)
    : kind_(kind), length_(length), ranks_(ranks), split_(split) {
  require(ranks >= 1, "a sequence layout needs at least one rank (got ", ranks, ")");
  require(split >= 1, "a sequence layout's split must be at least 1 (got ", split, ")");
  const int64_t C = kind == LayoutKind::Zigzag ? 2 * int64_t(ranks) : ranks;
  require(length >= C, layout_name(kind), " layout over ", ranks, " ranks cuts the sequence into ",
          C, " chunks and needs at least ", C, " positions, but the sequence has ", length,
          kind == LayoutKind::Zigzag ? "; use the contiguous layout or fewer ranks"
                                     : "; use fewer ranks",
          "");
  require(length >= C * split, layout_name(kind), " layout over ", ranks, " ranks with split ",
          split, " needs at least ", C * split, " positions, but the sequence has ", length,
          "; use a smaller split");
  const int64_t base = length / C, extra = length % C;
  int64_t pos = 0;
  for (int c = 0; c < C; ++c) {  // the layout's chunks, each cut into `split` pieces
    const int64_t len = base + (c < extra ? 1 : 0), sb = len / split, se = len % split;
    for (int p = 0; p < split; ++p) {
      Chunk ch;
      ch.index = int(chunks_.size());
      ch.start = pos;
      ch.length = sb + (p < se ? 1 : 0);
      ch.owner = kind == LayoutKind::Zigzag ? std::min<int>(c, int(C) - 1 - c) : c;
      pos += ch.length;
      chunks_.push_back(ch);
    }
  }
  owned_.assign(size_t(ranks), {});
  for (auto& ch : chunks_) {
    auto& mine = owned_[size_t(ch.owner)];
    ch.local_offset = 0;
    for (int o : mine) ch.local_offset += chunks_[size_t(o)].length;
    mine.push_back(ch.index);  // chunks are visited in increasing order
  }
}

int64_t SeqLayout::local_length(int rank) const {
  int64_t n = 0;
  for (int c : chunks_of(rank)) n += chunk(c).length;
  return n;
}

int64_t SeqLayout::max_local_length() const {
  int64_t m = 0;
  for (int r = 0; r < ranks_; ++r) m = std::max(m, local_length(r));
  return m;
}

std::vector<int64_t> SeqLayout::positions(int rank) const {
  std::vector<int64_t> p;
  p.reserve(size_t(local_length(rank)));
  for (int c : chunks_of(rank))
    for (int64_t i = 0; i < chunk(c).length; ++i) p.push_back(chunk(c).start + i);
  return p;
}

std::string SeqLayout::describe() const {
  std::ostringstream os;
  os << layout_name(kind_) << " L=" << length_ << " N=" << ranks_;
  if (split_ > 1) os << " split=" << split_;
  os << " chunks";
  for (const auto& c : chunks_) os << " [" << c.start << "," << c.end() << ")@" << c.owner;
  return os.str();
}

}  // namespace lcr
