// One YAML document per input file (yaml_document.hpp).
#include "driver/yaml_document.hpp"

#include <yaml-cpp/depthguard.h>

#include <vector>

namespace paraxis::driver {

namespace {

std::string where_of(const std::string& name, const YAML::Mark& mark) {
  return mark.line >= 0 ? name + ":" + std::to_string(mark.line + 1) : name;
}

}  // namespace

std::string node_kind(const YAML::Node& n) {
  if (n.IsMap()) return "a map";
  if (n.IsSequence()) return "a list";
  if (n.IsScalar()) return "'" + n.Scalar() + "'";
  return "nothing (a null value)";
}

std::string yaml_error_text(const YAML::Exception& e) {
  if (const auto* deep = dynamic_cast<const YAML::DeepRecursion*>(&e))
    return "nested " + std::to_string(deep->depth()) +
           " levels deep, deeper than the YAML parser allows";
  return e.msg;
}

YAML::Node single_yaml_document(const std::string& text, const std::string& name,
                                const std::string& role) {
  std::vector<YAML::Node> documents;
  try {
    documents = YAML::LoadAll(text);
  } catch (const YAML::Exception& e) {
    throw YamlDocumentError(where_of(name, e.mark), yaml_error_text(e));
  }
  if (documents.size() > 1)
    throw YamlDocumentError(where_of(name, documents[1].Mark()),
                            "a " + role + " is one YAML document, and a second one begins here " +
                                "(after '---'): its keys would be ignored; merge the documents");
  return documents.empty() ? YAML::Node() : documents.front();
}

}  // namespace paraxis::driver
