// The files under src/ui/assets as the build embedded them: the generated
// ui_embedded.cc (src/ui/embed_assets.cmake) defines both symbols.
#pragma once

#include <cstddef>

namespace spanhouse::ui {

struct EmbeddedFile {
  const char* name;    // path under src/ui/assets, e.g. "app.js"
  const char* sha256;  // lowercase hex of the content's SHA-256
  const unsigned char* data;
  size_t size;
};

extern const EmbeddedFile kEmbeddedFiles[];
extern const size_t kEmbeddedFileCount;

}  // namespace spanhouse::ui
