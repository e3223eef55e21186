// index.json: serialization, parsing and the consistency check (index.hpp).
#include "checkpoint/index.hpp"

#include <algorithm>
#include <map>
#include <set>
#include <stdexcept>

namespace paraxis::checkpoint {

using nlohmann::json;

namespace {

// Reads a key of the expected JSON type or throws naming it (the caller adds the file).
const json& field(const json& j, const char* key, json::value_t type, const char* expected) {
  if (!j.is_object() || !j.contains(key))
    throw std::runtime_error(std::string("missing key '") + key + "'");
  const json& v = j.at(key);
  const bool ok = v.type() == type || (type == json::value_t::number_integer &&
                                       v.type() == json::value_t::number_unsigned);
  if (!ok) throw std::runtime_error(std::string("key '") + key + "': expected " + expected);
  return v;
}

std::int64_t integer(const json& j, const char* key) {
  return field(j, key, json::value_t::number_integer, "an integer").get<std::int64_t>();
}

std::string text(const json& j, const char* key) {
  return field(j, key, json::value_t::string, "a string").get<std::string>();
}

std::vector<std::int64_t> integers(const json& j, const char* key) {
  std::vector<std::int64_t> v;
  for (const auto& x : field(j, key, json::value_t::array, "an array of integers")) {
    if (!x.is_number_integer())
      throw std::runtime_error(std::string("key '") + key + "': expected an array of integers");
    v.push_back(x.get<std::int64_t>());
  }
  return v;
}

std::string label(const ShardRecord& r) {
  return "rank " + std::to_string(r.rank) + " (" + r.file + ", box offset " +
         to_string(r.shard.offset) + " extent " + to_string(r.shard.extent) + ", elements [" +
         std::to_string(r.shard.begin) + ", " + std::to_string(r.shard.end) + "))";
}

}  // namespace

json to_json(const ShardRecord& r) {
  return json{{"tensor", r.shard.tensor.name},
              {"shape", r.shard.tensor.shape},
              {"dtype", r.shard.tensor.dtype},
              {"offset", r.shard.offset},
              {"extent", r.shard.extent},
              {"begin", r.shard.begin},
              {"end", r.shard.end},
              {"rank", r.rank},
              {"file", r.file},
              {"byte_offset", r.byte_offset},
              {"bytes", r.bytes},
              {"checksum", r.checksum}};
}

ShardRecord shard_record_from_json(const json& j) {
  ShardRecord r;
  r.shard.tensor.name = text(j, "tensor");
  r.shard.tensor.shape = integers(j, "shape");
  r.shard.tensor.dtype = text(j, "dtype");
  r.shard.offset = integers(j, "offset");
  r.shard.extent = integers(j, "extent");
  r.shard.begin = integer(j, "begin");
  r.shard.end = integer(j, "end");
  r.rank = static_cast<int>(integer(j, "rank"));
  r.file = text(j, "file");
  r.byte_offset = integer(j, "byte_offset");
  r.bytes = integer(j, "bytes");
  r.checksum = text(j, "checksum");
  return r;
}

json to_json(const Lineage& l) {
  if (l.id.empty()) return nullptr;
  json parent = nullptr;
  if (l.parent_step >= 0) parent = {{"run", l.parent_run}, {"step", l.parent_step}};
  return json{{"id", l.id}, {"run", l.run}, {"parent", parent}};
}

Lineage lineage_from_json(const json& j) {
  Lineage l;
  if (j.is_null()) return l;
  l.id = text(j, "id");
  l.run = text(j, "run");
  if (l.id.empty() || l.run.empty())
    throw std::runtime_error("key 'lineage': empty 'id' or 'run'; expected run ids");
  if (!j.contains("parent"))
    throw std::runtime_error("key 'lineage': missing key 'parent' (null when not resumed)");
  const json& p = j.at("parent");
  if (p.is_null()) return l;
  l.parent_run = text(p, "run");
  l.parent_step = static_cast<long>(integer(p, "step"));
  if (l.parent_step < 0)
    throw std::runtime_error("key 'lineage.parent.step': " + std::to_string(l.parent_step) +
                             "; expected >= 0");
  return l;
}

json to_json(const Index& index) {
  json tensors = json::array();
  for (const auto& t : index.tensors) {
    json shards = json::array();
    for (const auto& s : t.shards) {
      json js = to_json(s);
      // The tensor's own fields are stated once, beside the shards.
      js.erase("tensor");
      js.erase("shape");
      js.erase("dtype");
      shards.push_back(js);
    }
    tensors.push_back({{"name", t.info.name},
                       {"shape", t.info.shape},
                       {"dtype", t.info.dtype},
                       {"shards", shards}});
  }
  json files = json::array();
  for (const auto& f : index.files)
    files.push_back({{"name", f.name}, {"rank", f.rank}, {"bytes", f.bytes}});
  return json{{"format", kFormatName},     {"version", kFormatVersion},
              {"checksum", kChecksumName}, {"step", index.step},
              {"ranks", index.ranks},      {"lineage", to_json(index.lineage)},
              {"meta", index.meta},        {"files", files},
              {"tensors", tensors}};
}

namespace {

using FileMap = std::map<std::string, const FileRecord*>;
using ByteRanges = std::map<std::string, std::vector<std::pair<std::int64_t, std::int64_t>>>;

// The index's files: each rank's one data file, within the save's ranks, listed once (into files).
std::string files_error(const Index& index, FileMap& files) {
  for (const auto& f : index.files) {
    if (f.bytes < 0 || f.rank < 0 || f.rank >= index.ranks)
      return "file '" + f.name + "': rank " + std::to_string(f.rank) + ", " +
             std::to_string(f.bytes) + " bytes; expected a rank below " +
             std::to_string(index.ranks) + " and bytes >= 0";
    if (!files.emplace(f.name, &f).second) return "file '" + f.name + "' is listed twice";
  }
  // Every rank of a save writes one data file (writer.cpp): `ranks` and the files agree.
  std::set<int> writers;
  for (const auto& f : index.files)
    if (!writers.insert(f.rank).second)
      return "rank " + std::to_string(f.rank) + " has two data files";
  if (static_cast<long long>(writers.size()) != index.ranks)
    return "ranks " + std::to_string(index.ranks) + ", but data files of " +
           std::to_string(writers.size()) + " rank(s) (every rank of a save writes one)";
  return "";
}

// One shard of tensor t: its box spelt out (normalized into n), its bytes within its file.
std::string shard_error(const TensorRecord& t, const ShardRecord& r, const FileMap& files,
                        Shard& n) {
  const std::string who = "tensor '" + t.info.name + "', shard of " + label(r) + ": ";
  if (!(r.shard.tensor == t.info)) return who + "names another tensor, shape or dtype";
  try {
    n = normalized(r.shard);
  } catch (const std::invalid_argument& e) {
    return who + e.what();
  }
  if (n.offset != r.shard.offset || n.extent != r.shard.extent || n.end != r.shard.end)
    return who + "box or range not spelt out";
  const auto it = files.find(r.file);
  if (it == files.end()) return who + "its file is not among the index's files";
  const std::int64_t need = (n.end - n.begin) * static_cast<std::int64_t>(dtype_size(t.info.dtype));
  if (r.bytes != need)
    return who + std::to_string(r.bytes) + " bytes recorded for " +
           std::to_string(n.end - n.begin) + " elements of " + t.info.dtype + " (" +
           std::to_string(need) + " bytes)";
  if (r.byte_offset < 0 || r.byte_offset + r.bytes > it->second->bytes)
    return who + "bytes [" + std::to_string(r.byte_offset) + ", " +
           std::to_string(r.byte_offset + r.bytes) + ") lie outside its file's " +
           std::to_string(it->second->bytes) + " bytes";
  return "";
}

// Per file, the byte ranges of its shards: they must not overlap.
std::string overlap_error(ByteRanges& extents) {
  for (auto& [file, ranges] : extents) {
    std::sort(ranges.begin(), ranges.end());
    for (std::size_t i = 1; i < ranges.size(); ++i)
      if (ranges[i].first < ranges[i - 1].second)
        return "file '" + file + "': two shards share bytes from " +
               std::to_string(ranges[i].first);
  }
  return "";
}

}  // namespace

std::string consistency_error(const Index& index) {
  FileMap files;
  if (std::string e = files_error(index, files); !e.empty()) return e;
  std::set<std::string> names;
  ByteRanges extents;
  for (const auto& t : index.tensors) {
    if (!names.insert(t.info.name).second) return "tensor '" + t.info.name + "' is listed twice";
    std::vector<Shard> shards;
    std::vector<std::string> labels;
    for (const auto& r : t.shards) {
      Shard n;
      if (std::string e = shard_error(t, r, files, n); !e.empty()) return e;
      if (r.bytes > 0) extents[r.file].emplace_back(r.byte_offset, r.byte_offset + r.bytes);
      shards.push_back(n);
      labels.push_back(label(r));
    }
    const std::string e = coverage_error(t.info, shards, labels);
    if (!e.empty()) return e;
  }
  return overlap_error(extents);
}

Index parse_index(const std::string& content, const std::string& where) {
  Index index;
  try {
    const json j = json::parse(content);
    if (!j.is_object() || !j.contains("format") || j.at("format") != kFormatName)
      throw std::runtime_error(
          std::string("not a paraxis checkpoint index (key 'format' is not '") + kFormatName +
          "')");
    const std::int64_t version = integer(j, "version");
    if (version < kOldestReadableFormatVersion || version > kFormatVersion)
      throw std::runtime_error(
          "format version " + std::to_string(version) + "; this paraxis reads versions " +
          std::to_string(kOldestReadableFormatVersion) + " to " + std::to_string(kFormatVersion));
    if (text(j, "checksum") != kChecksumName)
      throw std::runtime_error("key 'checksum': '" + j.at("checksum").get<std::string>() +
                               "'; expected '" + kChecksumName + "'");
    index.step = static_cast<long>(integer(j, "step"));
    index.ranks = static_cast<int>(integer(j, "ranks"));
    if (index.step < 0 || index.ranks < 1)
      throw std::runtime_error("step " + std::to_string(index.step) + ", ranks " +
                               std::to_string(index.ranks) + "; expected step >= 0, ranks >= 1");
    index.meta = field(j, "meta", json::value_t::object, "an object");
    if (version >= 2) {
      if (!j.contains("lineage")) throw std::runtime_error("missing key 'lineage'");
      index.lineage = lineage_from_json(j.at("lineage"));
    }
    for (const auto& f : field(j, "files", json::value_t::array, "an array")) {
      index.files.push_back(
          FileRecord{text(f, "name"), static_cast<int>(integer(f, "rank")), integer(f, "bytes")});
      const auto& name = index.files.back().name;
      if (name.empty() || name.find('/') != std::string::npos || name == "." || name == "..")
        throw std::runtime_error("file name '" + name + "' is not a plain file name");
    }
    for (const auto& t : field(j, "tensors", json::value_t::array, "an array")) {
      TensorRecord tr;
      tr.info = TensorInfo{text(t, "name"), integers(t, "shape"), text(t, "dtype")};
      for (const auto& s : field(t, "shards", json::value_t::array, "an array")) {
        json full = s;
        full["tensor"] = tr.info.name;
        full["shape"] = tr.info.shape;
        full["dtype"] = tr.info.dtype;
        tr.shards.push_back(shard_record_from_json(full));
      }
      index.tensors.push_back(std::move(tr));
    }
  } catch (const json::exception& e) {
    throw std::runtime_error("checkpoint index '" + where + "': not valid JSON: " + e.what());
  } catch (const std::runtime_error& e) {
    throw std::runtime_error("checkpoint index '" + where + "': " + e.what());
  }
  const std::string e = consistency_error(index);
  if (!e.empty()) throw std::runtime_error("checkpoint index '" + where + "': " + e);
  return index;
}

}  // namespace paraxis::checkpoint
