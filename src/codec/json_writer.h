// Pieces every JSON writer here repeats (the query API's Jaeger JSON, the
// Jaeger documents written to OpenSearch, the OpenSearch queries): numbers,
// hex ids, commas, and the shapes of Jaeger's key-values and references.
#pragma once

#include <array>
#include <charconv>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "codec/value_text.h"

namespace spanhouse::codec {

inline void AppendUint(std::string& out, uint64_t v) {
  char buf[24];
  auto res = std::to_chars(buf, buf + sizeof(buf), v);
  out.append(buf, res.ptr);
}

// The lowercase hex of `data`, no quotes.
inline void AppendHex(std::string& out, const uint8_t* data, size_t n) {
  static constexpr char kDigits[] = "0123456789abcdef";
  // Grown once and written in place: a += per digit checks the capacity each time.
  const size_t at = out.size();
  out.resize(at + 2 * n);
  char* p = out.data() + at;
  for (size_t i = 0; i < n; ++i) {
    p[2 * i] = kDigits[data[i] >> 4];
    p[2 * i + 1] = kDigits[data[i] & 0xf];
  }
}

// A JSON string holding an id's lowercase hex.
template <size_t N>
void AppendHexString(std::string& out, const std::array<uint8_t, N>& id) {
  out += '"';
  AppendHex(out, id.data(), N);
  out += '"';
}

// Writes the commas between the elements of a JSON array or object.
class Commas {
 public:
  explicit Commas(std::string& out) : out_(out) {}
  void Next() {
    if (!first_) out_ += ',';
    first_ = false;
  }
  bool empty() const { return first_; }

 private:
  std::string& out_;
  bool first_ = true;
};

// Writes a JSON document into `out`: objects, arrays, keys and values, with
// the commas and the quoting done here, so a caller never pastes JSON text
// together (a name with a quote in it stays a string). The caller pairs the
// Begins and Ends; a value inside an object follows its Key.
class JsonWriter {
 public:
  explicit JsonWriter(std::string& out) : out_(out) {}

  JsonWriter& BeginObject() { return Open('{'); }
  JsonWriter& EndObject() { return Close('}'); }
  JsonWriter& BeginArray() { return Open('['); }
  JsonWriter& EndArray() { return Close(']'); }
  JsonWriter& Key(std::string_view key) {
    Separate();
    AppendJsonString(out_, key);
    out_ += ':';
    after_key_ = true;
    return *this;
  }
  JsonWriter& String(std::string_view v) {
    Separate();
    AppendJsonString(out_, v);
    return *this;
  }
  JsonWriter& Uint(uint64_t v) {
    Separate();
    AppendUint(out_, v);
    return *this;
  }
  // Shortest text that reads back as `v`; an integral one as an integer.
  JsonWriter& Double(double v) {
    Separate();
    AppendJsonDouble(out_, v);
    return *this;
  }
  JsonWriter& Bool(bool v) { return Raw(v ? "true" : "false"); }
  JsonWriter& Null() { return Raw("null"); }
  // A value that is JSON already (a document another writer made).
  JsonWriter& Raw(std::string_view json) {
    Separate();
    out_ += json;
    return *this;
  }

 private:
  // The comma before a value or key, unless it is the first of its
  // container or the value of the key just written.
  void Separate() {
    if (after_key_) {
      after_key_ = false;
      return;
    }
    if (!first_.empty()) {
      if (!first_.back()) out_ += ',';
      first_.back() = false;
    }
  }
  JsonWriter& Open(char c) {
    Separate();
    out_ += c;
    first_.push_back(true);
    return *this;
  }
  JsonWriter& Close(char c) {
    out_ += c;
    if (!first_.empty()) first_.pop_back();
    return *this;
  }

  std::string& out_;
  std::vector<bool> first_;  // per open container: nothing written in it yet
  bool after_key_ = false;
};

// Jaeger's key-value up to its value: {"key":<key>,"type":"<type>","value":
// (the caller appends the value and '}').
inline void AppendKeyValueHead(std::string& out, std::string_view key, std::string_view type) {
  out += "{\"key\":";
  AppendJsonString(out, key);
  out += ",\"type\":\"";
  out += type;
  out += "\",\"value\":";
}

// Jaeger's reference: {"refType":"CHILD_OF","traceID":"..","spanID":".."}.
template <size_t T, size_t S>
void AppendJaegerReference(std::string& out, std::string_view type,
                           const std::array<uint8_t, T>& trace,
                           const std::array<uint8_t, S>& span) {
  out += "{\"refType\":\"";
  out += type;
  out += "\",\"traceID\":";
  AppendHexString(out, trace);
  out += ",\"spanID\":";
  AppendHexString(out, span);
  out += '}';
}

}  // namespace spanhouse::codec
