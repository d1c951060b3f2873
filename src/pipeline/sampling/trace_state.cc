#include "pipeline/sampling/trace_state.h"

#include <cmath>

namespace spanhouse::pipeline {
namespace {

constexpr int kHexDigits = 14;  // 56 bits

std::string_view Trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;  // OpenTelemetry writes lowercase hex only
}

// 1..14 hex digits, the missing low digits zero (th's form).
bool ParseHex56(std::string_view s, bool exact, uint64_t* out) {
  if (s.empty() || s.size() > kHexDigits || (exact && s.size() != kHexDigits)) return false;
  uint64_t v = 0;
  for (char c : s) {
    const int d = HexValue(c);
    if (d < 0) return false;
    v = (v << 4) | static_cast<uint64_t>(d);
  }
  *out = v << (4 * (kHexDigits - s.size()));
  return true;
}

// Calls f(member) for each non-empty member of a ','-split list, trimmed.
template <typename F>
void EachMember(std::string_view list, char sep, F&& f) {
  while (!list.empty()) {
    const size_t cut = list.find(sep);
    const std::string_view m = Trim(list.substr(0, cut));
    if (!m.empty()) f(m);
    if (cut == std::string_view::npos) break;
    list.remove_prefix(cut + 1);
  }
}

bool IsOtMember(std::string_view m, std::string_view* value) {
  if (m.size() < 3 || m.compare(0, 3, "ot=") != 0) return false;
  *value = m.substr(3);
  return true;
}

}  // namespace

OtTraceState ParseOtTraceState(std::string_view tracestate) {
  OtTraceState out;
  if (tracestate.find("ot=") == std::string_view::npos) return out;  // the common case
  EachMember(tracestate, ',', [&](std::string_view m) {
    std::string_view ot;
    if (!IsOtMember(m, &ot)) return;
    EachMember(ot, ';', [&](std::string_view kv) {
      if (kv.size() < 3 || kv[2] != ':') return;
      const std::string_view key = kv.substr(0, 2);
      const std::string_view val = kv.substr(3);
      if (key == "th") {
        out.has_th = ParseHex56(val, false, &out.th);
        out.malformed |= !out.has_th;
      } else if (key == "rv") {
        out.has_rv = ParseHex56(val, true, &out.rv);
        out.malformed |= !out.has_rv;
      }
    });
  });
  return out;
}

uint64_t ThresholdOf(double probability, int precision) {
  if (!(probability < 1.0)) return 0;
  if (!(probability > 0.0)) return kMaxThreshold;
  precision = precision < 1 ? 1 : precision > kHexDigits ? kHexDigits : precision;
  const long double exact = (1.0L - static_cast<long double>(probability)) * 0x1p56L;
  auto th = static_cast<uint64_t>(std::llround(exact));
  if (th >= kMaxThreshold) th = kMaxThreshold - 1;
  // Keep `precision` significant hex digits after the leading ones that
  // carry no information: zeros for a high probability, f's for a low one
  // (where 2^56 - th, the kept share, is what needs the digits).
  const uint64_t idle = th >= kMaxThreshold / 2 ? 0xf : 0;
  int leading = 0;
  while (leading < kHexDigits && ((th >> (4 * (kHexDigits - 1 - leading))) & 0xf) == idle) {
    ++leading;
  }
  const int drop = kHexDigits - leading - precision;
  if (drop > 0) {
    const uint64_t unit = 1ull << (4 * drop);
    th = (th + unit / 2) / unit * unit;
    if (th >= kMaxThreshold) th = kMaxThreshold - unit;
  }
  return th;
}

double ProbabilityOf(uint64_t th) {
  if (th >= kMaxThreshold) return 0;
  return static_cast<double>(kMaxThreshold - th) / static_cast<double>(kMaxThreshold);
}

std::string EncodeThreshold(uint64_t th) {
  if (th == 0) return "0";
  static constexpr char kHex[] = "0123456789abcdef";
  std::string s(kHexDigits, '0');
  for (int i = kHexDigits - 1; i >= 0; --i, th >>= 4) s[static_cast<size_t>(i)] = kHex[th & 0xf];
  while (s.size() > 1 && s.back() == '0') s.pop_back();
  return s;
}

std::string WithThreshold(std::string_view tracestate, uint64_t th) {
  std::string ot = "ot=th:" + EncodeThreshold(th);
  std::string rest;
  EachMember(tracestate, ',', [&](std::string_view m) {
    std::string_view old;
    if (IsOtMember(m, &old)) {
      EachMember(old, ';', [&](std::string_view kv) {
        if (kv.size() >= 3 && kv.compare(0, 3, "th:") == 0) return;
        ot += ';';
        ot += kv;
      });
      return;
    }
    rest += ',';
    rest += m;
  });
  return ot + rest;
}

}  // namespace spanhouse::pipeline
