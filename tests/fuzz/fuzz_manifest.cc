// libFuzzer target: the manifest parser and validator (job/job_spec.h) on any bytes.
// A manifest is either refused with at least one problem, each naming its field in printable
// text, or accepted as a spec whose every string is text and whose canonical JSON parses back to
// the same spec. Anything else — a crash, an exception, a sanitizer report — fails.
#include <cstdint>
#include <cstdlib>
#include <iostream>
#include <string>

#include "common/text.h"
#include "job/job_spec.h"

namespace {

[[noreturn]] void Fail(const std::string& why, std::string_view input) {
  std::cerr << "fuzz_manifest: " << why << "\n--- input\n" << weft::Printable(input, 4096) << "\n";
  std::abort();
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  std::vector<weft::FieldError> errors;
  auto spec = weft::ParseManifest(text, &errors);
  if (!spec.ok()) {
    if (errors.empty()) Fail("refused without naming a problem: " + spec.status().ToString(), text);
    for (const auto& e : errors) {
      if (e.field.empty()) Fail("a problem without a field: " + e.problem, text);
      if (!weft::TextProblem(e.field).empty() || !weft::TextProblem(e.problem).empty()) {
        Fail("a problem that is not printable text: " + weft::Printable(e.problem), text);
      }
    }
    return 0;
  }
  for (const std::string* s :
       {&spec->name, &spec->description, &spec->data.dataset, &spec->data.path}) {
    if (!weft::TextProblem(*s).empty()) Fail("accepted a string that is not text", text);
  }
  const std::string canonical = weft::SpecToJson(*spec).dump();
  auto again = weft::ParseManifest(canonical);
  if (!again.ok()) Fail("its canonical form is refused: " + again.status().ToString(), text);
  if (!(*again == *spec)) Fail("its canonical form is another spec: " + canonical, text);
  return 0;
}
