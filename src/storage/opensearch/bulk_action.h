// The action line of a `_bulk` item, as the OpenSearch sink and the storage
// benchmark write it: {"<verb>":{"_index":<index>,"_id":<id>}} (no newline).
#pragma once

#include <string>
#include <string_view>

#include "codec/value_text.h"

namespace spanhouse::storage::opensearch {

inline void AppendBulkAction(std::string& out, std::string_view verb, std::string_view index,
                             std::string_view id) {
  out += "{\"";
  out += verb;
  out += "\":{\"_index\":";
  codec::AppendJsonString(out, index);
  out += ",\"_id\":";
  codec::AppendJsonString(out, id);
  out += "}}";
}

}  // namespace spanhouse::storage::opensearch
