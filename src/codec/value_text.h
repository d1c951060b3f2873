// How typed OTLP values become the bytes kept in an attribute's value column
// (see ValueType in model/span_batch.h). Both decoders use these, so a value
// sent as protobuf and the same value sent as JSON are stored identically.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

namespace spanhouse::codec {

// Shortest decimal text that parses back to the same double; "NaN", "Infinity", "-Infinity".
void AppendDouble(std::string& out, double v);
void AppendInt(std::string& out, int64_t v);
// A JSON string literal, quotes included, with control characters escaped.
// Invalid UTF-8 bytes are written as U+FFFD so the output is always valid JSON.
void AppendJsonString(std::string& out, std::string_view s);
void AppendBase64(std::string& out, std::string_view bytes);
// Standard alphabet, padding optional; false on any other character.
bool DecodeBase64(std::string_view in, std::string& out);

// Array and kvlist values are kept as JSON text, built from these pieces:
//   array  -> [v, v, ...]        kvlist -> {"key": v, ...}
//   string -> "..."  bool -> true/false  int -> 123
//   double -> 1.5, 3 (integral: as an integer), -0.0 (keeps its sign), "NaN" (non-finite)
//   bytes  -> "<base64>"  empty -> null
// The writer is the caller's: these are the element rules both decoders follow.
void AppendJsonDouble(std::string& out, double v);

}  // namespace spanhouse::codec
