// One YAML document per input file (yaml_document.hpp).
#include "deck/yaml_document.hpp"

#include <yaml-cpp/depthguard.h>
#include <yaml-cpp/eventhandler.h>
#include <yaml-cpp/parser.h>

#include <sstream>

namespace paraxis::driver {

namespace {

// Records where a document starts; every other event is ignored.
struct DocumentStart final : YAML::EventHandler {
  YAML::Mark mark = YAML::Mark::null_mark();
  void OnDocumentStart(const YAML::Mark& m) override { mark = m; }
  void OnDocumentEnd() override {}
  void OnNull(const YAML::Mark&, YAML::anchor_t) override {}
  void OnAlias(const YAML::Mark&, YAML::anchor_t) override {}
  void OnScalar(const YAML::Mark&, const std::string&, YAML::anchor_t,
                const std::string&) override {}
  void OnSequenceStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                       YAML::EmitterStyle::value) override {}
  void OnSequenceEnd() override {}
  void OnMapStart(const YAML::Mark&, const std::string&, YAML::anchor_t,
                  YAML::EmitterStyle::value) override {}
  void OnMapEnd() override {}
};

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
  YAML::Node first;
  YAML::Mark second;
  bool has_second = false;
  try {
    first = YAML::Load(text);
    // A second document, found by parsing at most two: YAML::LoadAll, which reads them all,
    // never ends on some malformed inputs (the deck fuzzer's timeouts).
    std::istringstream in(text);
    YAML::Parser parser(in);
    DocumentStart skip, next;
    if (parser.HandleNextDocument(skip) && parser.HandleNextDocument(next)) {
      has_second = true;
      second = next.mark;
    }
  } catch (const YAML::Exception& e) {
    throw YamlDocumentError(where_of(name, e.mark), yaml_error_text(e));
  }
  if (has_second)
    throw YamlDocumentError(where_of(name, second),
                            "a " + role + " is one YAML document, and a second one begins here " +
                                "with '---': its keys would be ignored; merge the documents");
  return first;
}

}  // namespace paraxis::driver
