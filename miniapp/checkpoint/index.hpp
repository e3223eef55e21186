// index.json, the checkpoint's metadata (docs/checkpoint.md, "Format"): per global tensor its
// shards (which rank wrote which box and range, where in which file, with which checksum), the
// data files and their sizes, the step, the ranks count and the caller's free-form `meta`.
// The writer builds it on rank 0 and checks it before it commits; the reader parses and checks
// it again, so that an inconsistent index is refused before any data is read.
#pragma once

#include <nlohmann/json.hpp>

#include <cstdint>
#include <string>
#include <vector>

#include "checkpoint/format.hpp"
#include "checkpoint/lineage.hpp"

namespace paraxis::checkpoint {

// One shard as the index records it.
struct ShardRecord {
  Shard shard;  // normalized
  int rank = 0;
  std::string file;  // a file name in the checkpoint folder
  std::int64_t byte_offset = 0, bytes = 0;
  std::string checksum;  // checksum() of its bytes
};

struct TensorRecord {
  TensorInfo info;
  std::vector<ShardRecord> shards;
};

struct FileRecord {
  std::string name;
  int rank = 0;
  std::int64_t bytes = 0;
};

struct Index {
  long step = 0;
  int ranks = 0;
  nlohmann::json meta = nlohmann::json::object();
  Lineage lineage;                    // an empty id: none recorded (written as null)
  std::vector<TensorRecord> tensors;  // sorted by name
  std::vector<FileRecord> files;      // one per rank, by rank
};

// A shard record and back (the per-rank pieces the writer gathers use the same form).
nlohmann::json to_json(const ShardRecord& r);
ShardRecord shard_record_from_json(const nlohmann::json& j);  // throws std::runtime_error

nlohmann::json to_json(const Index& index);

// index.json's `lineage`: {id, run, parent: {run, step} | null}, or null for an empty id; and
// back (throws std::runtime_error naming the key).
nlohmann::json to_json(const Lineage& l);
Lineage lineage_from_json(const nlohmann::json& j);

// Checks an index for internal consistency and returns "" or the first problem in a sentence:
// tensor names unique, every shard valid for its tensor and of the bytes its elements take, in
// a listed file and inside its size, shards within one file not overlapping, and every tensor
// covered exactly once (coverage_error).
std::string consistency_error(const Index& index);

// Parses index.json's content; throws std::runtime_error naming `where` (the file) and the
// offending key unless it is a paraxis checkpoint index of a version from
// kOldestReadableFormatVersion to kFormatVersion whose content is consistent (consistency_error).
Index parse_index(const std::string& content, const std::string& where);

}  // namespace paraxis::checkpoint
