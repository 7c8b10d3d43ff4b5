// libFuzzer target: the image archive reader (control/image_archive.h), which weftd runs on a
// tenant's upload before skopeo or podman ever sees it, on any file content, plain or gzipped.
// Every input is named one of the three formats or refused with InvalidArgument; a crash, a hang
// or a sanitizer report fails.
#include <unistd.h>

#include <cstdint>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "control/image_archive.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::string path = "/tmp/weft-fuzz-image-" + std::to_string(getpid());
  std::ofstream(path, std::ios::binary | std::ios::trunc)
      .write(reinterpret_cast<const char*>(data), static_cast<std::streamsize>(size));
  auto format = weft::ImageArchiveFormat(path);
  if (!format.ok()) {
    if (!absl::IsInvalidArgument(format.status())) {
      std::cerr << "fuzz_image_archive: unexpected " << format.status() << "\n";
      std::abort();
    }
    return 0;
  }
  if (*format != weft::kOciArchive && *format != weft::kDockerArchive &&
      *format != weft::kRootfsArchive) {
    std::cerr << "fuzz_image_archive: unknown format '" << *format << "'\n";
    std::abort();
  }
  return 0;
}
