// Zipkin v2 spans for tests, and their two encodings: the JSON list
// (zipkin2-api.yaml) and zipkin.proto3 ListOfSpans. Shared by the codec unit
// tests and the fuzz seed generator, so one span list can be sent both ways.
#pragma once

#include <arpa/inet.h>

#include <array>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codec/value_text.h"
#include "testdata/pb.h"

namespace spanhouse::testdata {

struct ZEndpoint {
  std::string service_name;  // "" leaves it out
  std::string ipv4;          // text; "" leaves it out
  std::string ipv6;
  int32_t port = 0;  // 0 leaves it out
};

struct ZAnnotation {
  uint64_t timestamp = 0;
  std::string value;
};

struct ZSpan {
  std::string trace_id;   // 16 or 32 hex digits
  std::string id;         // 16 hex digits
  std::string parent_id;  // "" leaves it out
  std::string kind;       // CLIENT, SERVER, PRODUCER, CONSUMER; "" leaves it out
  std::string name;
  uint64_t timestamp = 0;  // 0 leaves it out
  uint64_t duration = 0;
  std::optional<ZEndpoint> local;
  std::optional<ZEndpoint> remote;
  std::vector<ZAnnotation> annotations;
  std::vector<std::pair<std::string, std::string>> tags;
  bool debug = false;
  bool shared = false;
};

// A span with every field set: the codec tests check it field by field, and it is a fuzz seed.
inline ZSpan ZipkinFullSpan() {
  ZSpan s;
  s.trace_id = "5b8efff798038103d269b633813fc60c";
  s.id = "eee19b7ec3c1b174";
  s.parent_id = "eee19b7ec3c1b173";
  s.kind = "SERVER";
  s.name = "get /cart";
  s.timestamp = 1700000000123456;
  s.duration = 2500;
  s.local = ZEndpoint{"checkout", "10.0.0.1", "", 8080};
  s.remote = ZEndpoint{"frontend", "", "2001:db8::c001", 41234};
  s.annotations = {{1700000000123466, "cache.miss"}, {1700000000123476, "ws"}};
  s.tags = {{"http.method", "GET"}, {"http.path", "/cart"}};
  s.debug = true;
  s.shared = true;
  return s;
}

namespace zipkin_detail {

inline void Member(std::string& out, bool& first, std::string_view key) {
  if (!first) out += ',';
  first = false;
  codec::AppendJsonString(out, key);
  out += ':';
}

inline void Endpoint(std::string& out, const ZEndpoint& e) {
  bool first = true;
  out += '{';
  if (!e.service_name.empty()) {
    Member(out, first, "serviceName");
    codec::AppendJsonString(out, e.service_name);
  }
  if (!e.ipv4.empty()) {
    Member(out, first, "ipv4");
    codec::AppendJsonString(out, e.ipv4);
  }
  if (!e.ipv6.empty()) {
    Member(out, first, "ipv6");
    codec::AppendJsonString(out, e.ipv6);
  }
  if (e.port != 0) {
    Member(out, first, "port");
    out += std::to_string(e.port);
  }
  out += '}';
}

inline std::string HexBytes(std::string_view hex) {
  std::string out;
  for (size_t i = 0; i + 1 < hex.size(); i += 2) {
    out += static_cast<char>(std::stoi(std::string(hex.substr(i, 2)), nullptr, 16));
  }
  return out;
}

inline std::string AddressBytes(int family, const std::string& text) {
  std::array<char, 16> bytes{};
  if (inet_pton(family, text.c_str(), bytes.data()) != 1) return {};
  return std::string(bytes.data(), family == AF_INET ? 4 : 16);
}

inline Pb EndpointPb(const ZEndpoint& e) {
  Pb m;
  if (!e.service_name.empty()) m.Bytes(1, e.service_name);
  if (!e.ipv4.empty()) m.Bytes(2, AddressBytes(AF_INET, e.ipv4));
  if (!e.ipv6.empty()) m.Bytes(3, AddressBytes(AF_INET6, e.ipv6));
  if (e.port != 0) m.Varint(4, static_cast<uint64_t>(static_cast<int64_t>(e.port)));
  return m;
}

inline uint64_t KindNumber(std::string_view kind) {
  if (kind == "CLIENT") return 1;
  if (kind == "SERVER") return 2;
  if (kind == "PRODUCER") return 3;
  if (kind == "CONSUMER") return 4;
  return 0;
}

}  // namespace zipkin_detail

// The JSON members in the order the proto fields are numbered.
inline std::string ZipkinJson(const std::vector<ZSpan>& spans) {
  using zipkin_detail::Member;
  std::string out = "[";
  for (size_t i = 0; i < spans.size(); ++i) {
    const ZSpan& s = spans[i];
    if (i > 0) out += ',';
    bool first = true;
    out += '{';
    Member(out, first, "traceId");
    codec::AppendJsonString(out, s.trace_id);
    if (!s.parent_id.empty()) {
      Member(out, first, "parentId");
      codec::AppendJsonString(out, s.parent_id);
    }
    Member(out, first, "id");
    codec::AppendJsonString(out, s.id);
    if (!s.kind.empty()) {
      Member(out, first, "kind");
      codec::AppendJsonString(out, s.kind);
    }
    if (!s.name.empty()) {
      Member(out, first, "name");
      codec::AppendJsonString(out, s.name);
    }
    if (s.timestamp != 0) {
      Member(out, first, "timestamp");
      out += std::to_string(s.timestamp);
    }
    if (s.duration != 0) {
      Member(out, first, "duration");
      out += std::to_string(s.duration);
    }
    if (s.local) {
      Member(out, first, "localEndpoint");
      zipkin_detail::Endpoint(out, *s.local);
    }
    if (s.remote) {
      Member(out, first, "remoteEndpoint");
      zipkin_detail::Endpoint(out, *s.remote);
    }
    if (!s.annotations.empty()) {
      Member(out, first, "annotations");
      out += '[';
      for (size_t k = 0; k < s.annotations.size(); ++k) {
        if (k > 0) out += ',';
        out += "{\"timestamp\":" + std::to_string(s.annotations[k].timestamp) + ",\"value\":";
        codec::AppendJsonString(out, s.annotations[k].value);
        out += '}';
      }
      out += ']';
    }
    if (!s.tags.empty()) {
      Member(out, first, "tags");
      bool first_tag = true;
      out += '{';
      for (const auto& [k, v] : s.tags) {
        Member(out, first_tag, k);
        codec::AppendJsonString(out, v);
      }
      out += '}';
    }
    if (s.debug) {
      Member(out, first, "debug");
      out += "true";
    }
    if (s.shared) {
      Member(out, first, "shared");
      out += "true";
    }
    out += '}';
  }
  out += ']';
  return out;
}

inline std::string ZipkinProto(const std::vector<ZSpan>& spans) {
  using zipkin_detail::HexBytes;
  Pb list;
  for (const ZSpan& s : spans) {
    Pb m;
    m.Bytes(1, HexBytes(s.trace_id));
    if (!s.parent_id.empty()) m.Bytes(2, HexBytes(s.parent_id));
    m.Bytes(3, HexBytes(s.id));
    if (const uint64_t kind = zipkin_detail::KindNumber(s.kind); kind != 0) m.Varint(4, kind);
    if (!s.name.empty()) m.Bytes(5, s.name);
    if (s.timestamp != 0) m.Fixed64(6, s.timestamp);
    if (s.duration != 0) m.Varint(7, s.duration);
    if (s.local) m.Msg(8, zipkin_detail::EndpointPb(*s.local));
    if (s.remote) m.Msg(9, zipkin_detail::EndpointPb(*s.remote));
    for (const ZAnnotation& a : s.annotations)
      m.Msg(10, Pb().Fixed64(1, a.timestamp).Bytes(2, a.value));
    for (const auto& [k, v] : s.tags) m.Msg(11, Pb().Bytes(1, k).Bytes(2, v));
    if (s.debug) m.Varint(12, 1);
    if (s.shared) m.Varint(13, 1);
    list.Msg(1, m);
  }
  return list.str();
}

}  // namespace spanhouse::testdata
