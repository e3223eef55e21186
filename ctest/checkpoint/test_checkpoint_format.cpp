// The checkpoint format's pure parts (checkpoint/format.hpp, index.hpp): a shard's runs against
// brute-force enumeration of its elements, overlaps, the coverage rule (gap, overlap), shard
// validation, and an index refused for each kind of inconsistency.
#include <gtest/gtest.h>

#include <numeric>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "checkpoint/format.hpp"
#include "checkpoint/index.hpp"

using namespace paraxis::checkpoint;

namespace {

// The tensor elements of a shard, in the shard's flat order, by enumerating its box.
std::vector<std::int64_t> brute_force(const Shard& s) {
  const auto& shape = s.tensor.shape;
  std::vector<std::int64_t> all;
  const std::int64_t n = element_count(s.extent);
  for (std::int64_t f = 0; f < n; ++f) {
    std::int64_t rest = f, g = 0, stride = 1;
    for (std::size_t d = shape.size(); d-- > 0;) {
      g += (s.offset[d] + rest % s.extent[d]) * stride;
      rest /= s.extent[d];
      stride *= shape[d];
    }
    all.push_back(g);
  }
  return std::vector<std::int64_t>(all.begin() + s.begin, all.begin() + s.end);
}

std::vector<std::int64_t> expand(const std::vector<Run>& runs) {
  std::vector<std::int64_t> v;
  std::int64_t local = 0;
  for (const auto& r : runs) {
    EXPECT_EQ(r.local, local);  // runs follow the shard's flat order
    for (std::int64_t i = 0; i < r.count; ++i) v.push_back(r.global + i);
    local += r.count;
  }
  return v;
}

Shard box(std::vector<std::int64_t> shape, std::vector<std::int64_t> offset,
          std::vector<std::int64_t> extent, std::int64_t begin = 0, std::int64_t end = -1) {
  return normalized(Shard{TensorInfo{"t", std::move(shape), "f32"}, std::move(offset),
                          std::move(extent), begin, end});
}

}  // namespace

TEST(checkpoint_format, runs_match_brute_force) {
  const std::vector<Shard> cases = {
      box({4, 9}, {0, 3}, {4, 3}),                  // a column block: 4 runs of 3
      box({4, 9}, {1, 0}, {2, 9}),                  // a row block: one run
      box({4, 9}, {1, 0}, {2, 9}, 4, 13),           // its flat range
      box({3, 4, 5}, {1, 0, 0}, {2, 4, 5}, 7, 33),  // trailing dimensions whole: merged
      box({3, 4, 5}, {0, 1, 2}, {3, 2, 3}, 1, 17),  // every dimension cut
      box({6, 4}, {3, 0}, {3, 4}, 4, 8),            // a ZeRO partition of a tensor-parallel half
      box({7}, {0}, {7}, 2, 5),
      box({}, {}, {}),                    // a scalar
      box({4, 9}, {0, 0}, {4, 9}, 5, 5),  // empty
  };
  for (const auto& s : cases) {
    const auto runs = runs_of(s);
    EXPECT_EQ(expand(runs), brute_force(s)) << to_string(s.offset) << to_string(s.extent);
    for (std::size_t i = 1; i < runs.size(); ++i)  // merged: no two runs touch
      EXPECT_LT(runs[i - 1].global + runs[i - 1].count, runs[i].global);
  }
  EXPECT_EQ(runs_of(box({3, 4, 5}, {1, 0, 0}, {2, 4, 5}, 7, 33)).size(), 1u);
  EXPECT_EQ(runs_of(box({4, 9}, {0, 3}, {4, 3})).size(), 4u);
}

TEST(checkpoint_format, overlap_maps_positions_in_both_shards) {
  const Shard cols = box({4, 9}, {0, 3}, {4, 3});  // columns 3..5
  const Shard rows = box({4, 9}, {1, 0}, {2, 9});  // rows 1..2
  const auto pieces = overlap(runs_of(rows), runs_of(cols));
  // Rows 1 and 2, columns 3..5: tensor elements 12..14 and 21..23.
  ASSERT_EQ(pieces.size(), 2u);
  EXPECT_EQ(pieces[0].global, 12);
  EXPECT_EQ(pieces[0].to_local, 3);    // row 1 col 3 in the row block
  EXPECT_EQ(pieces[0].from_local, 3);  // row 1 col 3 in the column block (3 per row)
  EXPECT_EQ(pieces[0].count, 3);
  EXPECT_EQ(pieces[1].global, 21);
  EXPECT_EQ(pieces[1].to_local, 12);
  EXPECT_EQ(pieces[1].from_local, 6);
  EXPECT_TRUE(overlap(runs_of(box({4, 9}, {0, 0}, {1, 9})), runs_of(rows)).empty());
}

TEST(checkpoint_format, coverage_refuses_gaps_and_overlaps) {
  const TensorInfo t{"layer.0.w", {4, 9}, "f32"};
  auto at = [&](std::vector<std::int64_t> o, std::vector<std::int64_t> e, std::int64_t b = 0,
                std::int64_t end = -1) {
    return normalized(Shard{t, o, e, b, end});
  };
  const std::vector<std::string> labels = {"A", "B", "C"};
  EXPECT_EQ(coverage_error(t, {at({0, 0}, {4, 4}), at({0, 4}, {4, 5})}, labels), "");
  // ZeRO: one box split into flat ranges.
  EXPECT_EQ(coverage_error(t, {at({0, 0}, {4, 9}, 0, 10), at({0, 0}, {4, 9}, 10, 36)}, labels), "");
  const std::string gap = coverage_error(t, {at({0, 0}, {4, 4}), at({0, 5}, {4, 4})}, labels);
  EXPECT_NE(gap.find("'layer.0.w'"), std::string::npos) << gap;
  EXPECT_NE(gap.find("elements [4, 5)"), std::string::npos) << gap;
  EXPECT_NE(gap.find("gap"), std::string::npos) << gap;
  const std::string tail = coverage_error(t, {at({0, 0}, {4, 9}, 0, 35)}, labels);
  EXPECT_NE(tail.find("elements [35, 36)"), std::string::npos) << tail;
  const std::string twice =
      coverage_error(t, {at({0, 0}, {4, 5}), at({0, 4}, {4, 5}), at({0, 0}, {1, 1})}, labels);
  EXPECT_NE(twice.find("'layer.0.w'"), std::string::npos) << twice;
  EXPECT_NE(twice.find("element 0 is written twice"), std::string::npos) << twice;
  EXPECT_NE(twice.find("by A and by C"), std::string::npos) << twice;
  const TensorInfo scalar{"step", {}, "i64"};
  EXPECT_NE(coverage_error(scalar, {}, {}).find("gap"), std::string::npos);
  const Shard one = normalized(Shard{scalar, {}, {}, 0, -1});
  EXPECT_EQ(coverage_error(scalar, {one}, {"A"}), "");
  EXPECT_NE(coverage_error(scalar, {one, one}, {"A", "B"}).find("twice"), std::string::npos);
}

TEST(checkpoint_format, invalid_shards_name_the_tensor) {
  auto error_of = [](const Shard& s) {
    try {
      normalized(s);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  const TensorInfo t{"emb", {4, 9}, "bf16"};
  EXPECT_NE(error_of(Shard{t, {0, 5}, {4, 5}}).find("'emb'"), std::string::npos);
  EXPECT_NE(error_of(Shard{t, {0, 5}, {4, 5}}).find("dimension 1"), std::string::npos);
  EXPECT_NE(error_of(Shard{t, {0}, {4}}).find("expected 2 values"), std::string::npos);
  EXPECT_NE(error_of(Shard{t, {}, {}, 3, 40}).find("element range [3, 40)"), std::string::npos);
  EXPECT_NE(error_of(Shard{TensorInfo{"x", {2}, "f16"}, {}, {}}).find("dtype 'f16'"),
            std::string::npos);
  EXPECT_EQ(error_of(Shard{t, {}, {}, 3, 36}), "");
  EXPECT_EQ(dtype_size("bf16"), 2u);
  EXPECT_EQ(dtype_size("u64"), 8u);
  // xxHash's XXH3 64-bit of the empty input (its documented seed-0 value).
  EXPECT_EQ(checksum("", 0), "2d06800538d394c2");
}

TEST(checkpoint_format, index_consistency_is_checked_on_parse) {
  Index index;
  index.step = 3;
  index.ranks = 2;
  index.files = {{"rank-0.bin", 0, 16}, {"rank-1.bin", 1, 16}};
  TensorRecord t;
  t.info = TensorInfo{"w", {2, 4}, "f32"};
  const Shard top = normalized(Shard{t.info, {0, 0}, {1, 4}});
  const Shard bottom = normalized(Shard{t.info, {1, 0}, {1, 4}});
  t.shards = {ShardRecord{top, 0, "rank-0.bin", 0, 16, "00"},
              ShardRecord{bottom, 1, "rank-1.bin", 0, 16, "00"}};
  index.tensors = {t};
  const std::string good = to_json(index).dump();
  EXPECT_EQ(parse_index(good, "x/index.json").tensors.size(), 1u);
  auto refusal = [](const Index& i) {
    try {
      parse_index(to_json(i).dump(), "x/index.json");
    } catch (const std::runtime_error& e) {
      return std::string(e.what());
    }
    return std::string();
  };
  Index gap = index;
  gap.tensors[0].shards.pop_back();
  EXPECT_NE(refusal(gap).find("tensor 'w'"), std::string::npos) << refusal(gap);
  EXPECT_NE(refusal(gap).find("x/index.json"), std::string::npos) << refusal(gap);
  Index dup = index;
  dup.tensors.push_back(t);
  EXPECT_NE(refusal(dup).find("tensor 'w' is listed twice"), std::string::npos) << refusal(dup);
  Index past = index;
  past.files[1].bytes = 8;
  EXPECT_NE(refusal(past).find("outside its file's 8 bytes"), std::string::npos) << refusal(past);
  Index size = index;
  size.tensors[0].shards[0].bytes = 12;
  EXPECT_NE(refusal(size).find("12 bytes recorded for 4 elements"), std::string::npos);
  nlohmann::json v = nlohmann::json::parse(good);
  v["version"] = 99;
  try {
    parse_index(v.dump(), "x/index.json");
    ADD_FAILURE() << "version 99 accepted";
  } catch (const std::runtime_error& e) {
    EXPECT_NE(std::string(e.what()).find("format version 99"), std::string::npos) << e.what();
  }
  EXPECT_THROW(parse_index("{", "x/index.json"), std::runtime_error);
}
