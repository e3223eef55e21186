// A YAML input (a deck, a machine description) is one document: parsed here, so that a second
// document after `---` (whose keys would otherwise be silently ignored, unknown ones included)
// is an error naming its line, and a parse error reads as what went wrong (a nesting deeper
// than the parser's limit is said so, not yaml-cpp's "bad file").
#pragma once

#include <yaml-cpp/yaml.h>

#include <stdexcept>
#include <string>

namespace paraxis::driver {

struct YamlDocumentError : std::runtime_error {
  YamlDocumentError(std::string where, const std::string& what)
      : std::runtime_error(what), where(std::move(where)) {}
  std::string where;  // "name:line", or name
};

// What a node that is not the expected scalar is, for messages: "a map", "a list", or "nothing (a
// null value)" for a key written without a value.
std::string node_kind(const YAML::Node& n);

// The message of a yaml-cpp exception, in words.
std::string yaml_error_text(const YAML::Exception& e);

// The one document of `text` (a null node when empty). `name` is the path in messages and
// `role` what the file is ("deck", "machine description"). Throws YamlDocumentError.
YAML::Node single_yaml_document(const std::string& text, const std::string& name,
                                const std::string& role);

}  // namespace paraxis::driver
