#include "integration/openapi_check.h"

#include <regex>
#include <set>

#include "common/sse.h"

namespace weft::testing {
namespace {

// "/v1/jobs/{id}/halt" as a regex matching "/v1/jobs/job-1/halt".
std::regex TemplateRegex(const std::string& path_template) {
  std::string re = "^";
  for (size_t i = 0; i < path_template.size(); ++i) {
    char c = path_template[i];
    if (c == '{') {
      i = path_template.find('}', i);
      re += "[^/]+";
    } else if (std::string(".+*?()[]^$|\\").find(c) != std::string::npos) {
      re += std::string("\\") + c;
    } else {
      re += c;
    }
  }
  return std::regex(re + "$");
}

bool HasType(const nlohmann::json& v, const std::string& type) {
  if (type == "object") return v.is_object();
  if (type == "array") return v.is_array();
  if (type == "string") return v.is_string();
  if (type == "integer") return v.is_number_integer();
  if (type == "number") return v.is_number();
  if (type == "boolean") return v.is_boolean();
  return false;
}

}  // namespace

OpenApiDocument::OpenApiDocument(const std::string& path) : doc_(YAML::LoadFile(path)) {}

// yaml-cpp's Node::operator= writes through to the node assigned to; reset() rebinds, which is
// what every walk below means.
YAML::Node OpenApiDocument::Resolve(YAML::Node node) const {
  while (node.IsMap() && node["$ref"]) {
    std::string ref = node["$ref"].as<std::string>();  // "#/components/schemas/Error"
    YAML::Node target;
    target.reset(doc_);
    size_t at = 2;
    while (at < ref.size()) {
      size_t slash = ref.find('/', at);
      if (slash == std::string::npos) slash = ref.size();
      const YAML::Node& parent = target;
      YAML::Node child = parent[ref.substr(at, slash - at)];
      target.reset(child);
      at = slash + 1;
    }
    node.reset(target);
  }
  return node;
}

void OpenApiDocument::Validate(const YAML::Node& raw, const nlohmann::json& v,
                               const std::string& where, std::vector<std::string>* problems) const {
  const YAML::Node schema = Resolve(raw);
  if (!schema.IsMap()) return;
  if (v.is_null()) {
    if (!(schema["nullable"] && schema["nullable"].as<bool>())) {
      problems->push_back(where + ": null, and the schema is not nullable");
    }
    return;
  }
  if (schema["allOf"]) {
    for (const auto& part : schema["allOf"]) Validate(part, v, where, problems);
  }
  if (schema["oneOf"]) {
    int matches = 0;
    for (const auto& alternative : schema["oneOf"]) {
      std::vector<std::string> mismatches;
      Validate(alternative, v, where, &mismatches);
      matches += mismatches.empty() ? 1 : 0;
    }
    if (matches != 1) {
      problems->push_back(where + ": " + v.dump() + " matches " + std::to_string(matches) +
                          " of oneOf's schemas, not exactly one");
    }
  }
  if (schema["type"] && !HasType(v, schema["type"].as<std::string>())) {
    problems->push_back(where + ": " + v.dump() + " is not of type " +
                        schema["type"].as<std::string>());
    return;
  }
  if (schema["enum"]) {
    bool found = false;
    for (const auto& e : schema["enum"])
      found = found || (v.is_string() && v == e.as<std::string>());
    if (!found) problems->push_back(where + ": " + v.dump() + " is not in the enum");
  }
  if (v.is_object()) {
    for (const auto& r : schema["required"] ? schema["required"] : YAML::Node()) {
      if (!v.contains(r.as<std::string>())) {
        problems->push_back(where + ": required field '" + r.as<std::string>() + "' is missing");
      }
    }
    if (schema["properties"]) {
      for (const auto& [key, value] : v.items()) {
        if (schema["properties"][key]) {
          Validate(schema["properties"][key], value, where + "." + key, problems);
        }
      }
    }
  }
  if (v.is_array() && schema["items"]) {
    for (size_t i = 0; i < v.size(); ++i) {
      Validate(schema["items"], v[i], where + "[" + std::to_string(i) + "]", problems);
    }
  }
}

std::vector<std::string> OpenApiDocument::Check(const std::string& method, const std::string& path,
                                                int status, const std::string& content_type,
                                                const std::string& body) const {
  const std::string route = path.substr(0, path.find('?'));
  const std::string what = method + " " + route + " " + std::to_string(status);
  YAML::Node item;
  bool found = false;
  for (const auto& p : doc_["paths"]) {
    if (std::regex_match(route, TemplateRegex(p.first.as<std::string>()))) {
      item.reset(p.second);
      found = true;
    }
  }
  if (!found) return {what + ": the route is not in the document"};
  std::string m = method;
  for (char& c : m) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  // Documented once for every route (the document's description).
  static const std::set<int> kEveryRoute = {401, 405, 413, 429, 507};
  if (!item[m]) {
    if (status == 405) return {};
    return {what + ": the method is not in the document"};
  }
  const YAML::Node& operation = item;
  YAML::Node response = operation[m]["responses"][std::to_string(status)];
  if (!response) {
    if (kEveryRoute.count(status)) return {};
    return {what + ": the status is not in the document"};
  }
  response.reset(Resolve(response));
  if (content_type.rfind("text/event-stream", 0) == 0) return CheckEvents(what, body);
  if (content_type.rfind("application/json", 0) != 0) return {};
  auto json = nlohmann::json::parse(body, nullptr, false);
  if (json.is_discarded()) return {what + ": the body is not JSON"};
  const YAML::Node schema = response["content"]["application/json"]["schema"];
  std::vector<std::string> problems;
  if (schema) Validate(schema, json, what + " body", &problems);
  return problems;
}

std::vector<std::string> OpenApiDocument::CheckEvents(const std::string& what,
                                                      const std::string& body) const {
  std::vector<std::string> problems;
  SseParser parser;
  int n = 0;
  parser.Feed(body, [&](const SseEvent& e) {
    const std::string where = what + " event " + std::to_string(n++) + " (" + e.event + ")";
    auto data = nlohmann::json::parse(e.data, nullptr, false);
    if (data.is_discarded()) {
      problems.push_back(where + ": data is not JSON");
    } else if (e.event == "job") {
      Validate(doc_["components"]["schemas"]["JobDetail"], data, where, &problems);
    } else if (e.event != "reset") {
      Validate(doc_["components"]["schemas"]["JobEvent"], data, where, &problems);
    }
  });
  if (n == 0) problems.push_back(what + ": an event stream without events");
  return problems;
}

}  // namespace weft::testing
