// The Zipkin v2 -> OTLP span model mapping (zipkin_mapping.h).
#include "codec/zipkin_mapping.h"

#include <arpa/inet.h>

#include <charconv>
#include <cstring>

namespace spanhouse::codec::zipkin {
namespace {

constexpr std::array<std::string_view, 10> kKeyText = {"service.name",
                                                       "network.local.address",
                                                       "network.local.port",
                                                       "service.peer.name",
                                                       "network.peer.address",
                                                       "network.peer.port",
                                                       "zipkin.debug",
                                                       "zipkin.shared",
                                                       "otel.status_description",
                                                       "true"};

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view lower) {
  if (a.size() != lower.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    char c = a[i];
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
    if (c != lower[i]) return false;
  }
  return true;
}

// The SpanKind a span.kind tag names (OpenTracing's values), 0 if none.
uint8_t KindOfTag(std::string_view v) {
  constexpr std::array<std::pair<std::string_view, SpanKind>, 5> kNames = {{
      {"client", SpanKind::kClient},
      {"server", SpanKind::kServer},
      {"producer", SpanKind::kProducer},
      {"consumer", SpanKind::kConsumer},
      {"internal", SpanKind::kInternal},
  }};
  for (const auto& [name, kind] : kNames) {
    if (EqualsIgnoreCase(v, name)) return static_cast<uint8_t>(kind);
  }
  return 0;
}

// otel.status_code's value: the code's name, as the OTel spec's Zipkin
// exporter writes it, or the OTLP enum name older exporters wrote.
bool StatusOfTag(std::string_view v, uint8_t& code) {
  if (v == "OK" || v == "STATUS_CODE_OK") {
    code = static_cast<uint8_t>(StatusCodeOtlp::kOk);
  } else if (v == "ERROR" || v == "STATUS_CODE_ERROR") {
    code = static_cast<uint8_t>(StatusCodeOtlp::kError);
  } else if (v == "UNSET" || v == "STATUS_CODE_UNSET") {
    code = static_cast<uint8_t>(StatusCodeOtlp::kUnset);
  } else {
    return false;
  }
  return true;
}

SpanKind KindOf(Kind k, uint8_t tag_kind) {
  switch (k) {
    case Kind::kClient:
      return SpanKind::kClient;
    case Kind::kServer:
      return SpanKind::kServer;
    case Kind::kProducer:
      return SpanKind::kProducer;
    case Kind::kConsumer:
      return SpanKind::kConsumer;
    case Kind::kAbsent:
      break;
  }
  return tag_kind != 0 ? static_cast<SpanKind>(tag_kind) : SpanKind::kInternal;
}

}  // namespace

bool ParseHexId(std::string_view hex, uint8_t* id, size_t n) {
  if (hex.empty() || hex.size() > 2 * n) return false;
  std::memset(id, 0, n);
  size_t nibble = 2 * n - hex.size();  // left-padded with zeros
  for (char c : hex) {
    const int d = HexDigit(c);
    if (d < 0) return false;
    id[nibble / 2] |= static_cast<uint8_t>(nibble % 2 == 0 ? d << 4 : d);
    ++nibble;
  }
  return true;
}

StrRef RequestMapper::Interned(Key k) {
  if ((interned_mask_ & (1u << k)) == 0) {
    interned_[k] = out_.AddString(kKeyText[k]);
    interned_mask_ |= 1u << k;
  }
  return interned_[k];
}

uint32_t RequestMapper::BeginSpan(SpanFields& f) {
  f = SpanFields{};
  return out_.AddSpan(0, 0);  // resource and scope: Finish
}

void RequestMapper::AddAttr(uint32_t i, StrRef key, ValueType type, StrRef value) {
  SpanBatch::AddAttr(out_.span_attrs, key, type, value);
  out_.spans.attrs[i].end = static_cast<uint32_t>(out_.span_attrs.size());
}

void RequestMapper::Tag(uint32_t i, SpanFields& f, std::string_view key, std::string_view value) {
  if (key == "error") {
    if (value != "false") {
      f.error = {true, value};
      return;
    }
  } else if (key == "otel.status_code") {
    if (StatusOfTag(value, f.status_code)) {
      f.has_status_code = true;
      return;
    }
  } else if (key == kKeyText[kStatusDescription]) {
    f.status_description = {true, value};
    return;
  } else if (key == "otel.scope.name") {
    f.scope_name = {true, value};
    return;
  } else if (key == "otel.scope.version") {
    f.scope_version = {true, value};
    return;
  } else if (key == "otel.library.name") {
    f.library_name = {true, value};
    return;
  } else if (key == "otel.library.version") {
    f.library_version = {true, value};
    return;
  } else if (key == "w3c.tracestate") {
    f.trace_state = {true, value};
    return;
  } else if (key == "span.kind") {
    if (const uint8_t k = KindOfTag(value); k != 0) {
      f.tag_kind = k;
      return;
    }
  } else {
    for (Key k : {kLocalAddress, kLocalPort, kPeerService, kPeerAddress, kPeerPort}) {
      if (key == kKeyText[k]) f.endpoint_keys_in_tags |= static_cast<uint8_t>(1u << k);
    }
  }
  AddAttr(i, out_.RefString(key), ValueType::kString, out_.RefString(value));
}

void RequestMapper::Annotation(uint32_t i, uint64_t timestamp_us, std::string_view value) {
  const uint32_t e = out_.AddEvent();
  out_.events.time_ns[e] = timestamp_us * 1000;
  out_.events.name[e] = out_.RefString(value);
  out_.spans.events[i].end = e + 1;
}

uint32_t RequestMapper::Resource(std::string_view service) {
  if (last_resource_set_ && service == last_service_) return last_resource_;
  auto [it, inserted] = resources_.try_emplace(service, 0);
  if (inserted) {
    const uint32_t r = out_.AddResource();
    if (!service.empty()) {
      SpanBatch::AddAttr(out_.resource_attrs, Interned(kServiceName), ValueType::kString,
                         out_.RefString(service));
      out_.resources.attrs[r].end = static_cast<uint32_t>(out_.resource_attrs.size());
    }
    out_.ResolveServiceName(r);
    it->second = r;
  }
  last_resource_set_ = true;
  last_service_ = service;
  last_resource_ = it->second;
  return it->second;
}

uint32_t RequestMapper::Scope(std::string_view name, std::string_view version) {
  auto [it, inserted] = scopes_.try_emplace({name, version}, 0);
  if (inserted) {
    const uint32_t s = out_.AddScope();
    if (!name.empty()) out_.scopes.name[s] = out_.RefString(name);
    if (!version.empty()) out_.scopes.version[s] = out_.RefString(version);
    it->second = s;
  }
  return it->second;
}

void RequestMapper::AddEndpoint(uint32_t i, const SpanFields& f, const Endpoint& e, Key address,
                                Key port) {
  if ((e.has_ipv4 || e.has_ipv6) && (f.endpoint_keys_in_tags & (1u << address)) == 0) {
    char text[INET6_ADDRSTRLEN];
    const char* ok = e.has_ipv4 ? inet_ntop(AF_INET, e.ipv4.data(), text, sizeof(text))
                                : inet_ntop(AF_INET6, e.ipv6.data(), text, sizeof(text));
    if (ok != nullptr) {
      AddAttr(i, Interned(address), ValueType::kString, out_.AddString(text));
    }
  }
  if (e.port > 0 && (f.endpoint_keys_in_tags & (1u << port)) == 0) {
    char text[16];
    const auto res = std::to_chars(text, text + sizeof(text), e.port);
    AddAttr(i, Interned(port), ValueType::kInt,
            out_.AddString(std::string_view(text, static_cast<size_t>(res.ptr - text))));
  }
}

bool RequestMapper::Finish(uint32_t i, const SpanFields& f) {
  if (f.duration_us > kMaxMicros - f.timestamp_us) return false;
  SpanBatch::Spans& sp = out_.spans;
  sp.start_ns[i] = f.timestamp_us * 1000;
  sp.end_ns[i] = (f.timestamp_us + f.duration_us) * 1000;
  sp.kind[i] = static_cast<uint8_t>(KindOf(f.kind, f.tag_kind));
  if (f.trace_state.set) sp.trace_state[i] = out_.RefString(f.trace_state.value);

  // Status: otel.status_code and its description, then the error tag.
  uint8_t code = static_cast<uint8_t>(StatusCodeOtlp::kUnset);
  std::string_view message;
  if (f.has_status_code) {
    code = f.status_code;
    if (f.status_description.set) message = f.status_description.value;
  }
  if (f.error.set) {
    code = static_cast<uint8_t>(StatusCodeOtlp::kError);
    if (message.empty() && f.error.value != "true") message = f.error.value;
  }
  sp.status_code[i] = code;
  if (!message.empty()) sp.status_message[i] = out_.RefString(message);

  sp.resource[i] = Resource(f.local.service_name);
  sp.scope[i] = Scope(f.scope_name.set ? f.scope_name.value : f.library_name.value,
                      f.scope_version.set ? f.scope_version.value : f.library_version.value);

  if (f.status_description.set && !f.has_status_code) {
    AddAttr(i, Interned(kStatusDescription), ValueType::kString,
            out_.RefString(f.status_description.value));
  }
  AddEndpoint(i, f, f.local, kLocalAddress, kLocalPort);
  if (!f.remote.service_name.empty() && (f.endpoint_keys_in_tags & (1u << kPeerService)) == 0) {
    AddAttr(i, Interned(kPeerService), ValueType::kString, out_.RefString(f.remote.service_name));
  }
  AddEndpoint(i, f, f.remote, kPeerAddress, kPeerPort);
  if (f.debug) AddAttr(i, Interned(kDebug), ValueType::kBool, Interned(kTrue));
  if (f.shared) AddAttr(i, Interned(kShared), ValueType::kBool, Interned(kTrue));
  return true;
}

}  // namespace spanhouse::codec::zipkin
