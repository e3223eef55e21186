// Checking documents against the results declaration (results_schema.hpp) and printing it as
// docs/results.md's tables. The declaration itself: results_schema_table.cpp.
#include "analysis/results_schema.hpp"

#include <climits>
#include <cmath>
#include <cstdlib>
#include <sstream>

namespace paraxis::driver::results_schema {

using nlohmann::json;

namespace {

// The segments of a declared path: keys, "[]", and "<...>" kept whole (it may hold '.').
std::vector<std::string> segments(const std::string& path) {
  std::vector<std::string> out;
  std::string cur;
  int angle = 0;
  for (std::size_t i = 0; i < path.size(); ++i) {
    const char ch = path[i];
    if (ch == '<') ++angle;
    if (ch == '>') --angle;
    if (angle == 0 && (ch == '.' || (ch == '[' && i + 1 < path.size() && path[i + 1] == ']'))) {
      if (!cur.empty()) out.push_back(cur);
      cur.clear();
      if (ch == '[') {
        out.emplace_back("[]");
        ++i;
      }
      continue;
    }
    cur += ch;
  }
  if (!cur.empty()) out.push_back(cur);
  return out;
}

// '*' matches any run of characters.
bool glob(const char* pat, const char* s) {
  if (*pat == '\0') return *s == '\0';
  if (*pat == '*') return glob(pat + 1, s) || (*s != '\0' && glob(pat, s + 1));
  return *pat == *s && glob(pat + 1, s + 1);
}

std::vector<std::string> alternatives(const std::string& seg) {
  std::vector<std::string> out;
  std::string cur;
  for (std::size_t i = 1; i + 1 < seg.size(); ++i) {
    if (seg[i] == '|') {
      out.push_back(cur);
      cur.clear();
    } else {
      cur += seg[i];
    }
  }
  out.push_back(cur);
  return out;
}

bool is_pattern(const std::string& seg) {
  return seg.size() > 1 && seg.front() == '<';
}
// "<axis>": any key; "<a|b>": one of the names (with '*' globs).
bool is_free(const std::string& seg) {
  return is_pattern(seg) && seg.find('|') == std::string::npos;
}

bool matches(const std::string& seg, const std::string& key) {
  if (!is_pattern(seg)) return seg == key;
  if (is_free(seg)) return true;
  for (const auto& a : alternatives(seg))
    if (glob(a.c_str(), key.c_str())) return true;
  return false;
}

// The declaration as a tree: node 0 is the document.
struct Node {
  const Field* field = nullptr;
  std::vector<std::pair<std::string, int>> children;  // segment, node
};

std::vector<Node> build_tree(const std::vector<Field>& fields) {
  std::vector<Node> tree(1);
  for (const Field& field : fields) {
    int at = 0;
    for (const std::string& seg : segments(field.path)) {
      int next = -1;
      for (const auto& [s, n] : tree[static_cast<std::size_t>(at)].children)
        if (s == seg) next = n;
      if (next < 0) {
        next = static_cast<int>(tree.size());
        tree[static_cast<std::size_t>(at)].children.emplace_back(seg, next);
        tree.emplace_back();
      }
      at = next;
    }
    tree[static_cast<std::size_t>(at)].field = &field;
  }
  return tree;
}

}  // namespace

std::string shown(const json& v) {
  // error_handler replace: a string with invalid UTF-8 must not make the message itself throw.
  std::string s = v.dump(-1, ' ', false, json::error_handler_t::replace);
  if (s.size() > 60) s = s.substr(0, 57) + "...";
  return s;
}

std::string range_text(Kind kind, const Range& r) {
  std::ostringstream os;
  const bool integral = kind == Kind::integer || kind == Kind::integer_or_null;
  os << (integral ? "an integer" : "a finite number");
  if (r.hi >= static_cast<double>(INT_MAX))
    os << (r.lo_open ? " > " : " >= ") << r.lo;
  else
    os << " in " << (r.lo_open ? "(" : "[") << r.lo << ", " << r.hi << "]";
  return os.str();
}

std::string csv_header() {
  std::string h;
  for (const Field& f : fields(File::points_csv)) h += std::string(h.empty() ? "" : ",") + f.path;
  return h;
}

namespace {

// The kind and range of one value; empty when it conforms.
std::string kind_error(const Field& f, const json& v) {
  const bool nullable = f.kind == Kind::integer_or_null || f.kind == Kind::number_or_null ||
                        f.kind == Kind::string_or_null || f.kind == Kind::object_or_null;
  if (nullable && v.is_null()) return {};
  switch (f.kind) {
    case Kind::object:
    case Kind::map:
    case Kind::object_or_null:
      return v.is_object() ? std::string() : "expected an object, got " + shown(v);
    case Kind::array:
      return v.is_array() ? std::string() : "expected an array, got " + shown(v);
    case Kind::string:
    case Kind::string_or_null:
      return v.is_string() ? std::string() : "expected a string, got " + shown(v);
    case Kind::boolean:
      return v.is_boolean() ? std::string() : "expected true or false, got " + shown(v);
    default:
      break;
  }
  const std::string bad = "expected " + range_text(f.kind, f.range) + ", got " + shown(v);
  const Range& r = f.range;
  if (f.kind == Kind::integer || f.kind == Kind::integer_or_null) {
    if (!v.is_number_integer()) return bad;
    if (v.is_number_unsigned() && v.get<std::uint64_t>() > static_cast<std::uint64_t>(LLONG_MAX))
      return bad;
    const double x = static_cast<double>(v.get<std::int64_t>());
    return x < r.lo || x > r.hi ? bad : std::string();
  }
  if (!v.is_number()) return bad;
  const double x = v.get<double>();
  return !std::isfinite(x) || x < r.lo || (r.lo_open && x == r.lo) || x > r.hi ? bad
                                                                               : std::string();
}

class Walker {
 public:
  Walker(const std::vector<Node>& tree, bool summary, Mode mode, std::size_t limit)
      : summary_(summary), tree_(tree), mode_(mode), limit_(limit) {}

  void value(int node, const json& v, const std::string& path, bool values) {
    if (full()) return;
    const Node& n = tree_[static_cast<std::size_t>(node)];
    if (n.field && values) {
      const std::string e = kind_error(*n.field, v);
      if (!e.empty()) return add(path, e);
    }
    if (n.field && n.field->kind == Kind::map) return;
    if (v.is_object()) object(node, v, path, values);
    if (v.is_array()) array(node, v, path, values);
  }

  std::vector<Violation> found;

 private:
  bool full() const { return found.size() >= limit_; }
  void add(const std::string& path, const std::string& what) {
    if (!full()) found.push_back({path, what});
  }
  static std::string at(const std::string& path, const std::string& key) {
    return path.empty() ? key : path + "." + key;
  }

  // The child of `node` a key matches: exact names before patterns, free patterns last.
  int child(int node, const std::string& key) const {
    int best = -1, rank = 3;
    for (const auto& [seg, n] : tree_[static_cast<std::size_t>(node)].children) {
      if (seg == "[]" || !matches(seg, key)) continue;
      const int r = !is_pattern(seg) ? 0 : is_free(seg) ? 2 : 1;
      if (r < rank) best = n, rank = r;
    }
    return best;
  }

  bool wanted(const Field* f) const {
    if (!f) return false;
    return f->presence == Presence::need ||
           (mode_ == Mode::strict && f->presence == Presence::always);
  }

  // A summary point: in reader mode a point that is not ok has only its head (index, status,
  // settings) read; in strict mode only its head's values are checked (a diverged point's NaN is
  // written as null), and a point without steps (failed, skipped: the writer writes its head and
  // configuration only) is asked for its head's keys alone.
  bool is_point(const std::string& path) const {
    return summary_ && path.rfind("points[", 0) == 0 && path.find('.') == std::string::npos &&
           path.back() == ']';
  }
  static bool head_key(const std::string& k) {
    return k == "index" || k == "status" || k == "settings";
  }

  void object(int node, const json& v, const std::string& path, bool values) {
    const bool point = is_point(path);
    bool ok = true;
    if (point) {
      const auto st = v.find("status");
      ok = st != v.end() && st->is_string() && *st == "ok";
    }
    const bool only_head = point && mode_ == Mode::reader && !ok;
    const bool head_only_asked = point && (only_head || !v.contains("steps"));
    for (const auto& [key, x] : v.items()) {
      if (only_head && !head_key(key)) continue;
      const int c = child(node, key);
      if (c < 0) {
        if (mode_ == Mode::strict) add(at(path, key), "not declared in the results schema");
        continue;
      }
      value(c, x, at(path, key), values && (ok || (point && head_key(key))));
    }
    for (const auto& [seg, n] : tree_[static_cast<std::size_t>(node)].children) {
      const Field* f = tree_[static_cast<std::size_t>(n)].field;
      if (seg == "[]" || is_free(seg) || !wanted(f) || (head_only_asked && !head_key(seg)))
        continue;
      for (const auto& name : is_pattern(seg) ? alternatives(seg) : std::vector<std::string>{seg})
        if (name.find('*') == std::string::npos && !v.contains(name))
          add(at(path, name), "missing");
    }
  }

  void array(int node, const json& v, const std::string& path, bool values) {
    int elem = -1;
    for (const auto& [seg, n] : tree_[static_cast<std::size_t>(node)].children)
      if (seg == "[]") elem = n;
    for (std::size_t i = 0; i < v.size(); ++i) {
      const std::string p = path + "[" + std::to_string(i) + "]";
      if (elem < 0) {
        if (mode_ == Mode::strict) add(p, "array elements not declared in the results schema");
        return;
      }
      value(elem, v[i], p, values);
    }
  }

  bool summary_;
  const std::vector<Node>& tree_;
  Mode mode_;
  std::size_t limit_;
};

}  // namespace

std::vector<Violation> check(const json& doc, const std::vector<Field>& declared, bool summary,
                             Mode mode, std::size_t limit) {
  if (!doc.is_object()) return {{"", "expected a JSON object, got " + shown(doc)}};
  const std::vector<Node> tree = build_tree(declared);
  Walker w(tree, summary, mode, limit);
  w.value(0, doc, "", true);
  return w.found;
}

std::vector<Violation> check(const json& doc, File f, Mode mode, std::size_t limit) {
  return check(doc, fields(f), f == File::summary, mode, limit);
}

namespace {

// One CSV line's cells; a quoted cell keeps its commas.
std::vector<std::string> cells(const std::string& line) {
  std::vector<std::string> out(1);
  bool quoted = false;
  for (char ch : line) {
    if (ch == '"')
      quoted = !quoted;
    else if (ch == ',' && !quoted)
      out.emplace_back();
    else
      out.back() += ch;
  }
  return out;
}

std::string cell_error(const Field& f, const std::string& cell) {
  if (f.kind == Kind::string) return {};
  char* end = nullptr;
  if (f.kind == Kind::integer) {
    const long long x = std::strtoll(cell.c_str(), &end, 10);
    if (cell.empty() || *end != '\0')
      return "expected " + range_text(f.kind, f.range) + ", got '" + cell + "'";
    return kind_error(f, json(x));
  }
  const double x = std::strtod(cell.c_str(), &end);
  if (cell.empty() || *end != '\0')
    return "expected " + range_text(f.kind, f.range) + ", got '" + cell + "'";
  return kind_error(f, json(x));
}

}  // namespace

std::vector<Violation> check_csv(const std::string& text) {
  std::vector<Violation> out;
  std::istringstream in(text);
  std::string line;
  if (!std::getline(in, line) || line != csv_header())
    return {{"points.csv:1", "header '" + line + "', declared '" + csv_header() + "'"}};
  const auto& cols = fields(File::points_csv);
  for (int row = 2; std::getline(in, line); ++row) {
    const std::string where = "points.csv:" + std::to_string(row);
    const auto c = cells(line);
    if (c.size() != cols.size()) {
      out.push_back({where, std::to_string(c.size()) + " cells, " + std::to_string(cols.size()) +
                                " columns declared"});
      continue;
    }
    for (std::size_t k = 0; k < cols.size(); ++k)
      if (const std::string e = cell_error(cols[k], c[k]); !e.empty())
        out.push_back({where + ": " + cols[k].path, e});
  }
  return out;
}

namespace {

std::string kind_name(Kind k) {
  switch (k) {
    case Kind::object:
      return "object";
    case Kind::map:
      return "object (keys named in the meaning)";
    case Kind::array:
      return "array";
    case Kind::integer:
      return "integer";
    case Kind::number:
      return "number";
    case Kind::string:
      return "string";
    case Kind::boolean:
      return "boolean";
    case Kind::integer_or_null:
      return "integer or null";
    case Kind::number_or_null:
      return "number or null";
    case Kind::string_or_null:
      return "string or null";
    case Kind::object_or_null:
      return "object or null";
  }
  return "?";
}

std::string range_cell(const Field& f) {
  const bool numeric = f.kind == Kind::integer || f.kind == Kind::number ||
                       f.kind == Kind::integer_or_null || f.kind == Kind::number_or_null;
  if (!numeric) return "";
  if (!std::isfinite(f.range.lo) && !std::isfinite(f.range.hi)) return "any";
  const bool integral = f.kind == Kind::integer || f.kind == Kind::integer_or_null;
  // "an integer >= 0" -> ">= 0", "a finite number in [0, 1]" -> "in [0, 1]"
  return range_text(f.kind, f.range).substr(integral ? 11 : 16);
}

std::string escaped(const std::string& s) {
  std::string out;
  for (char ch : s) out += ch == '|' ? std::string("\\|") : std::string(1, ch);
  return out;
}

}  // namespace

std::string markdown(File f) {
  static const char* const presence[] = {"required", "always", "optional"};
  std::ostringstream md;
  md << "| field | type | unit | range | present | meaning |\n|---|---|---|---|---|---|\n";
  for (const Field& x : fields(f))
    md << "| `" << escaped(x.path) << "` | " << kind_name(x.kind) << " | " << x.unit << " | "
       << range_cell(x) << " | " << presence[static_cast<int>(x.presence)] << " | "
       << escaped(x.doc) << " |\n";
  return md.str();
}

}  // namespace paraxis::driver::results_schema
