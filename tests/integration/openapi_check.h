// docs/openapi.yaml as a test oracle: whether an answer weftd gave is one the document allows —
// the route and method are documented, the status is listed for them (401, 405, 413, 429 and 507
// are documented once, for every route), and a JSON body conforms to the response's schema. The
// schema subset weft's document uses: type, properties, required, items, enum, nullable, allOf and
// $ref (local). An event stream's events are checked one by one (CheckEvents).
#pragma once

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "yaml-cpp/yaml.h"

namespace weft::testing {

class OpenApiDocument {
 public:
  explicit OpenApiDocument(const std::string& path);

  // Every way the answer departs from the document; empty when it conforms. `path` may carry a
  // query string.
  std::vector<std::string> Check(const std::string& method, const std::string& path, int status,
                                 const std::string& content_type, const std::string& body) const;

 private:
  YAML::Node Resolve(YAML::Node node) const;  // follows a local $ref
  // A text/event-stream body: every event's data against JobDetail (`event: job`) or JobEvent.
  std::vector<std::string> CheckEvents(const std::string& what, const std::string& body) const;
  void Validate(const YAML::Node& schema, const nlohmann::json& value, const std::string& where,
                std::vector<std::string>* problems) const;

  YAML::Node doc_;  // read only: every walk goes through const references or reset()
};

}  // namespace weft::testing
