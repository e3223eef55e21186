// How a deck key is parsed and written back: a KeySpec (name, type text, the function that checks
// a YAML node and stores it into a RunConfig, and the one that reads the value back as JSON) and
// the builders for each kind of key (integer in a range, number, bool, choice, enum, string, list
// of integers). Header-only because the builders are templates over the field they set; deck.cpp
// holds the table of keys. A field reference is a generic lambda, `[](auto& c) -> auto& { return
// c.member; }`, so that one table line both sets (RunConfig&) and reads (const RunConfig&).
#pragma once

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <nlohmann/json.hpp>
#include <optional>
#include <sstream>
#include <string>
#include <type_traits>
#include <vector>

#include "deck/run_config.hpp"
#include "deck/yaml_document.hpp"

namespace paraxis::driver::deck_keys {

using Apply = std::function<std::optional<std::string>(RunConfig&, const YAML::Node&)>;
// The key's value in `config` of summary.json (results.cpp); `apply` reads it back.
using Get = std::function<nlohmann::json(const RunConfig&)>;

struct KeySpec {
  std::string key;
  std::string type;
  Apply apply;
  Get get;
};

// The field's value as JSON, for fields stored as themselves (numbers, bools, strings, lists).
template <class Ref>
Get plain_get(Ref ref) {
  return [=](const RunConfig& c) { return nlohmann::json(ref(c)); };
}

// A node as short text for messages and sweep settings, cut at `limit` characters: aliases let
// a small hostile deck describe a node whose full dump would not fit in memory.
inline void append_text(const YAML::Node& n, std::string& out, std::size_t limit) {
  if (out.size() > limit) return;
  if (n.IsScalar()) {
    out += n.Scalar().substr(0, limit - std::min(limit, out.size()) + 1);
  } else if (n.IsSequence() || n.IsMap()) {
    const bool seq = n.IsSequence();
    out += seq ? '[' : '{';
    bool first = true;
    for (const auto& e : n) {
      if (out.size() > limit) {
        out += ", ...";
        break;
      }
      if (!first) out += ", ";
      first = false;
      if (seq) {
        append_text(e, out, limit);
      } else {
        append_text(e.first, out, limit);
        out += ": ";
        append_text(e.second, out, limit);
      }
    }
    out += seq ? ']' : '}';
  } else {
    out += "~";
  }
}

inline std::string scalar_text(const YAML::Node& n) {
  std::string s;
  append_text(n, s, 200);
  return s;
}

inline std::optional<long long> parse_int(const std::string& s) {
  long long v = 0;
  const char* b = s.data();
  const char* e = s.data() + s.size();
  if (b != e && *b == '+') ++b;
  auto [ptr, ec] = std::from_chars(b, e, v);
  if (ec != std::errc() || ptr != e) return std::nullopt;
  return v;
}

inline std::optional<double> parse_double(const std::string& s) {
  if (s.empty()) return std::nullopt;
  char* end = nullptr;
  const double v = std::strtod(s.c_str(), &end);
  if (end != s.c_str() + s.size() || !std::isfinite(v)) return std::nullopt;
  return v;
}

inline std::string int_type(long long lo, long long hi) {
  return "integer in [" + std::to_string(lo) + ", " + std::to_string(hi) + "]";
}

// Parses an integer in [lo, hi]; the error says what was expected.
inline std::optional<std::string> read_int(const YAML::Node& n, long long lo, long long hi,
                                           long long& out) {
  const std::string type = int_type(lo, hi);
  if (!n.IsScalar()) return "expected " + type + ", got " + node_kind(n);
  const std::string s = n.Scalar();
  auto v = parse_int(s);
  if (!v) {
    if (parse_double(s) || s.find_first_not_of("+-0123456789") == std::string::npos)
      return "'" + s + "' is not an integer that fits 64 bits (expected " + type + ")";
    return "expected " + type + ", got '" + s + "'";
  }
  if (*v < lo || *v > hi) return "value " + s + " out of range (expected " + type + ")";
  out = *v;
  return std::nullopt;
}

template <class Ref>
KeySpec int_key(std::string key, long long lo, long long hi, Ref ref) {
  return {key, int_type(lo, hi),
          [=](RunConfig& c, const YAML::Node& n) -> std::optional<std::string> {
            long long v = 0;
            if (auto err = read_int(n, lo, hi, v)) return err;
            using Field = std::remove_reference_t<decltype(ref(c))>;
            ref(c) = static_cast<Field>(v);
            return std::nullopt;
          },
          plain_get(ref)};
}

// An integer in [lo, hi] or the word `auto`, stored as `auto_value` (summary.json writes it
// back as "auto").
template <class Ref>
KeySpec int_or_auto_key(std::string key, long long lo, long long hi, long long auto_value,
                        Ref ref) {
  return {key, int_type(lo, hi) + " or auto",
          [=](RunConfig& c, const YAML::Node& n) -> std::optional<std::string> {
            using Field = std::remove_reference_t<decltype(ref(c))>;
            if (n.IsScalar() && n.Scalar() == "auto") {
              ref(c) = static_cast<Field>(auto_value);
              return std::nullopt;
            }
            long long v = 0;
            if (auto err = read_int(n, lo, hi, v)) return *err + " or auto";
            ref(c) = static_cast<Field>(v);
            return std::nullopt;
          },
          [=](const RunConfig& c) {
            return ref(c) == auto_value ? nlohmann::json("auto") : nlohmann::json(ref(c));
          }};
}

// A number in [lo, hi], or in (lo, hi] when `lo_open` (a value that must be positive).
template <class Ref>
KeySpec real_key(std::string key, double lo, double hi, Ref ref, bool lo_open = false) {
  std::ostringstream t;
  t << "number in " << (lo_open ? "(" : "[") << lo << ", " << hi << "]";
  std::string type = t.str();
  return {key, type,
          [=](RunConfig& c, const YAML::Node& n) -> std::optional<std::string> {
            if (!n.IsScalar()) return "expected " + type + ", got " + node_kind(n);
            auto v = parse_double(n.Scalar());
            if (!v) return "expected " + type + ", got '" + n.Scalar() + "'";
            if (*v < lo || *v > hi || (lo_open && *v == lo))
              return "value " + n.Scalar() + " out of range (expected " + type + ")";
            ref(c) = *v;
            return std::nullopt;
          },
          plain_get(ref)};
}

template <class Ref>
KeySpec bool_key(std::string key, Ref ref) {
  return {key, "true or false",
          [=](RunConfig& c, const YAML::Node& n) -> std::optional<std::string> {
            if (n.IsScalar()) {
              const std::string& s = n.Scalar();
              if (s == "true" || s == "True" || s == "TRUE") return ref(c) = true, std::nullopt;
              if (s == "false" || s == "False" || s == "FALSE") return ref(c) = false, std::nullopt;
            }
            return "expected true or false, got '" + scalar_text(n) + "'";
          },
          plain_get(ref)};
}

// One of `choices`: set(c, index, name) stores it, get(c) gives back the name stored.
template <class Set, class GetName>
KeySpec choice_key(std::string key, std::vector<std::string> choices, Set set, GetName get) {
  std::string type = "one of";
  for (auto& ch : choices) type += " " + ch;
  return {key, type,
          [=](RunConfig& c, const YAML::Node& n) -> std::optional<std::string> {
            if (n.IsScalar())
              for (std::size_t i = 0; i < choices.size(); ++i)
                if (n.Scalar() == choices[i]) {
                  set(c, i, choices[i]);
                  return std::nullopt;
                }
            return "expected " + type + ", got '" + scalar_text(n) + "'";
          },
          [=](const RunConfig& c) { return nlohmann::json(std::string(get(c))); }};
}

// A choice resolved to an enum when the deck loads: choice i is the enumerator of value i (the
// names come from the enum's own list, e.g. config::schedule_names()).
template <class Ref>
KeySpec enum_key(std::string key, const std::vector<std::string>& names, Ref ref) {
  return choice_key(
      std::move(key), names,
      [=](RunConfig& c, std::size_t i, const std::string&) {
        using Enum = std::remove_reference_t<decltype(ref(c))>;
        ref(c) = static_cast<Enum>(i);
      },
      [=](const RunConfig& c) { return names.at(static_cast<std::size_t>(ref(c))); });
}

template <class Ref>
KeySpec string_key(std::string key, Ref ref) {
  return {key, "string",
          [=](RunConfig& c, const YAML::Node& n) -> std::optional<std::string> {
            if (!n.IsScalar()) return "expected a string, got " + node_kind(n);
            const std::string& v = n.Scalar();
            // "" is the documented default; spaces alone are a mistake, never a folder's name.
            if (!v.empty() && v.find_first_not_of(" \t\r\n") == std::string::npos)
              return "'" + v + "' is a blank path: give a path, or \"\" for the default";
            ref(c) = v;
            return std::nullopt;
          },
          plain_get(ref)};
}

template <class Ref>
KeySpec int_list_key(std::string key, long long lo, long long hi, Ref ref) {
  return {key, "list of integers",
          [=](RunConfig& c, const YAML::Node& n) -> std::optional<std::string> {
            if (!n.IsSequence()) return "expected a list of integers, got '" + scalar_text(n) + "'";
            std::vector<int> out;
            for (const auto& e : n) {
              auto v = e.IsScalar() ? parse_int(e.Scalar()) : std::nullopt;
              if (!v || *v < lo || *v > hi)
                return "element '" + scalar_text(e) + "' is not an " + int_type(lo, hi);
              out.push_back(static_cast<int>(*v));
            }
            ref(c) = out;
            return std::nullopt;
          },
          plain_get(ref)};
}

// Every key a deck may set, in documentation order (deck_key_table.cpp).
const std::vector<KeySpec>& key_table();

}  // namespace paraxis::driver::deck_keys
