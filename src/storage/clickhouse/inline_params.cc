#include "storage/clickhouse/inline_params.h"

#include <charconv>
#include <cmath>
#include <cstdint>
#include <cstring>

namespace spanhouse::storage {
namespace {

enum class Kind { kString, kInt, kFloat64 };

struct Scalar {
  std::string_view name;
  Kind kind;
  bool is_signed;
  uint64_t max;  // integers: the largest value (a negative one may be one more)
};

constexpr Scalar kScalars[] = {
    {"String", Kind::kString, false, 0},       {"Int8", Kind::kInt, true, INT8_MAX},
    {"Int16", Kind::kInt, true, INT16_MAX},    {"Int32", Kind::kInt, true, INT32_MAX},
    {"Int64", Kind::kInt, true, INT64_MAX},    {"UInt8", Kind::kInt, false, UINT8_MAX},
    {"UInt16", Kind::kInt, false, UINT16_MAX}, {"UInt32", Kind::kInt, false, UINT32_MAX},
    {"UInt64", Kind::kInt, false, UINT64_MAX}, {"Float64", Kind::kFloat64, false, 0},
};

const Scalar* FindScalar(std::string_view name) {
  for (const Scalar& s : kScalars) {
    if (s.name == name) return &s;
  }
  return nullptr;
}

bool IsSpace(char c) {
  return c == ' ' || c == '\t' || c == '\n' || c == '\r';
}
bool IsDigit(char c) {
  return c >= '0' && c <= '9';
}
bool IsIdentStart(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool IsIdentChar(char c) {
  return IsIdentStart(c) || IsDigit(c);
}
// A literal next to one of these would run into it (an identifier, a
// number, a string whose '' would join the two).
bool NeedsGap(char c) {
  return IsIdentChar(c) || c == '.' || c == '\'' || c == '"' || c == '`';
}

constexpr char kHex[] = "0123456789ABCDEF";

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

void AppendString(std::string_view v, std::string* out) {
  out->push_back('\'');
  for (const char c : v) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '\\' || c == '\'') {
      out->push_back('\\');
      out->push_back(c);
    } else if (u < 0x20 || u == 0x7F) {
      const char esc[] = {'\\', 'x', kHex[u >> 4], kHex[u & 15]};
      out->append(esc, sizeof(esc));
    } else {
      out->push_back(c);
    }
  }
  out->push_back('\'');
}

// `v` as an integer literal of type `t`; false if it is not one. Negative
// values in parentheses unless `bare` (an array's element).
bool AppendInt(std::string_view v, const Scalar& t, bool bare, std::string* out) {
  const bool negative = t.is_signed && !v.empty() && v[0] == '-';
  if (negative) v.remove_prefix(1);
  if (v.empty() || (v[0] == '0' && v.size() > 1)) return false;  // the engine refuses 007 too
  for (const char c : v) {
    if (!IsDigit(c)) return false;
  }
  uint64_t m = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), m);
  if (ec != std::errc() || end != v.data() + v.size()) return false;
  if (m > t.max + (negative ? 1 : 0)) return false;
  char buf[24];
  const size_t len = std::to_chars(buf, buf + sizeof(buf), m).ptr - buf;
  if (negative && m != 0) {
    out->append(bare ? "-" : "(-");
    out->append(buf, len);
    if (!bare) out->push_back(')');
  } else {
    out->append(buf, len);
  }
  return true;
}

bool EqualsNoCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if ((a[i] | 0x20) != b[i]) return false;
  }
  return true;
}

// `v` (decimal, inf, infinity or nan) as a Float64 literal; false if it is
// not one or out of range.
bool AppendFloat64(std::string_view v, bool bare, std::string* out) {
  std::string_view body = v;
  if (!body.empty() && body[0] == '-') body.remove_prefix(1);
  if (!EqualsNoCase(body, "inf") && !EqualsNoCase(body, "infinity") && !EqualsNoCase(body, "nan")) {
    for (const char c : body) {
      if (!IsDigit(c) && c != '.' && c != 'e' && c != 'E' && c != '+' && c != '-') return false;
    }
  }
  double d = 0;
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), d);
  if (v.empty() || ec != std::errc() || end != v.data() + v.size()) return false;
  if (std::isnan(d)) {
    out->append("nan");
    return true;
  }
  if (std::fpclassify(d) == FP_SUBNORMAL) {
    // 18.16 reads a subnormal's text as 0: its bits, little-endian.
    uint64_t bits = 0;
    std::memcpy(&bits, &d, sizeof(bits));
    out->append("reinterpretAsFloat64(unhex('");
    for (int i = 0; i < 8; ++i, bits >>= 8) {
      out->push_back(kHex[(bits >> 4) & 15]);
      out->push_back(kHex[bits & 15]);
    }
    out->append("'))");
    return true;
  }
  char buf[40];
  const char* const text_end = std::to_chars(buf, buf + sizeof(buf), d).ptr;
  std::string_view text(buf, text_end - buf);  // shortest round trip: "0.95", "1e-05", "-0", "inf"
  const bool wrap = !bare && text[0] == '-';
  if (wrap) out->push_back('(');
  out->append(text);
  // "100" and "-0" would be integers (and -0 would be 0).
  if (!std::isinf(d) && text.find_first_of(".e") == std::string_view::npos) out->append(".0");
  if (wrap) out->push_back(')');
  return true;
}

bool AppendScalar(std::string_view v, const Scalar& t, bool bare, std::string* out) {
  switch (t.kind) {
    case Kind::kString:
      AppendString(v, out);
      return true;
    case Kind::kInt:
      return AppendInt(v, t, bare, out);
    case Kind::kFloat64:
      return AppendFloat64(v, bare, out);
  }
  return false;
}

// Reads the quoted string at v[*i] ('...') into `s`; false if it is not
// one. The escapes are those 18.16 and the engine of chDB read alike: \xHH,
// \0 \a \b \e \f \n \r \t \v, \\ \' \" \/, and '' for a quote. Others (\N,
// \q, \u0041, \{) are refused: 18.16 drops their backslash, newer servers
// keep it.
constexpr std::string_view kEscaped = "0abefnrtv\\'\"/";
constexpr std::string_view kUnescaped("\0\a\b\x1b\f\n\r\t\v\\'\"/", 13);

bool ReadQuoted(std::string_view v, size_t* i, std::string* s) {
  size_t j = *i;
  if (j >= v.size() || v[j] != '\'') return false;
  for (++j; j < v.size(); ++j) {
    const char c = v[j];
    if (c == '\'') {
      if (j + 1 < v.size() && v[j + 1] == '\'') {
        s->push_back('\'');
        ++j;
        continue;
      }
      *i = j + 1;
      return true;
    }
    if (c != '\\') {
      s->push_back(c);
      continue;
    }
    if (++j == v.size()) return false;
    const char e = v[j];
    if (e == 'x') {
      if (j + 2 >= v.size()) return false;
      const int hi = HexValue(v[j + 1]);
      const int lo = HexValue(v[j + 2]);
      if (hi < 0 || lo < 0) return false;
      s->push_back(static_cast<char>(hi * 16 + lo));
      j += 2;
      continue;
    }
    const size_t k = kEscaped.find(e);
    if (k == std::string_view::npos) return false;
    s->push_back(kUnescaped[k]);
  }
  return false;
}

// `v`, the text of an array of `elem` ("[e1, e2]"), as
// CAST([e1,e2] AS Array(elem)); false if it is not one.
bool AppendArray(std::string_view v, const Scalar& elem, std::string* out) {
  auto skip_space = [&](size_t* i) {
    while (*i < v.size() && IsSpace(v[*i])) ++*i;
  };
  if (v.empty() || v[0] != '[') return false;
  out->append("CAST([");
  size_t i = 1;
  skip_space(&i);
  std::string s;
  for (bool first = true; i < v.size() && v[i] != ']'; first = false) {
    if (!first) {
      if (v[i] != ',') return false;
      ++i;
      skip_space(&i);
      out->push_back(',');
    }
    if (elem.kind == Kind::kString) {
      s.clear();
      if (!ReadQuoted(v, &i, &s)) return false;
      AppendString(s, out);
    } else {
      const size_t start = i;
      while (i < v.size() && v[i] != ',' && v[i] != ']' && !IsSpace(v[i])) ++i;
      if (!AppendScalar(v.substr(start, i - start), elem, true, out)) return false;
    }
    skip_space(&i);
  }
  if (i + 1 != v.size()) return false;  // no ']', or text after it
  out->append("] AS Array(");
  out->append(elem.name);
  out->append("))");
  return true;
}

std::string Named(std::string_view name, std::string_view type) {
  std::string m = "query parameter {";
  m.append(name).append(":").append(type).append("}");
  return m;
}

// The literal of `value` for the placeholder {name:type}.
Status AppendLiteral(std::string_view name, std::string_view type, std::string_view value,
                     std::string* out) {
  std::string t;  // the type without spaces: "Array( String )" is Array(String)
  for (const char c : type) {
    if (!IsSpace(c)) t.push_back(c);
  }
  const Scalar* scalar = FindScalar(t);
  if (scalar != nullptr) {
    if (AppendScalar(value, *scalar, false, out)) return Status::Ok();
    return Status::Invalid(Named(name, t) + ": the value is not a valid " + t);
  }
  constexpr std::string_view kArray = "Array(";
  if (t.size() > kArray.size() && t.starts_with(kArray) && t.back() == ')') {
    const Scalar* elem =
        FindScalar(std::string_view(t).substr(kArray.size(), t.size() - kArray.size() - 1));
    if (elem != nullptr) {
      if (AppendArray(value, *elem, out)) return Status::Ok();
      return Status::Invalid(Named(name, t) + ": the value is not a valid " + t +
                             " ([v1, v2, ...])");
    }
  }
  return Status::Invalid(Named(name, t) +
                         ": unsupported type (String, [U]Int8..64, Float64 or Array of them)");
}

// The end of the quoted string or identifier that starts at sql[i] (its
// closing quote; a backslash escapes the next character), or sql.size().
size_t SkipQuoted(std::string_view sql, size_t i) {
  const char quote = sql[i];
  for (size_t j = i + 1; j < sql.size(); ++j) {
    if (sql[j] == '\\') {
      ++j;
    } else if (sql[j] == quote) {
      return j + 1;
    }
  }
  return sql.size();
}

Status Inline(std::string_view sql, const std::vector<QueryParam>& params, std::string* out) {
  out->reserve(sql.size() + 64);
  const size_t n = sql.size();
  size_t copied = 0;  // sql[0, copied) is in *out
  size_t i = 0;
  while (i < n) {
    const char c = sql[i];
    if (c == '\'' || c == '"' || c == '`') {
      i = SkipQuoted(sql, i);
      continue;
    }
    if (c == '-' && i + 1 < n && sql[i + 1] == '-') {
      const size_t nl = sql.find('\n', i);
      i = nl == std::string_view::npos ? n : nl + 1;
      continue;
    }
    if (c == '/' && i + 1 < n && sql[i + 1] == '*') {
      const size_t close = sql.find("*/", i + 2);
      i = close == std::string_view::npos ? n : close + 2;
      continue;
    }
    if (c != '{') {
      ++i;
      continue;
    }
    // { name : type }, spaces allowed between the parts.
    size_t j = i + 1;
    while (j < n && IsSpace(sql[j])) ++j;
    const size_t name_start = j;
    if (j == n || !IsIdentStart(sql[j])) {
      ++i;
      continue;
    }
    while (j < n && IsIdentChar(sql[j])) ++j;
    const std::string_view name = sql.substr(name_start, j - name_start);
    while (j < n && IsSpace(sql[j])) ++j;
    if (j == n || sql[j] != ':') {
      ++i;
      continue;
    }
    const size_t close = sql.find('}', j + 1);
    if (close == std::string_view::npos) {
      return Status::Invalid("query parameter {" + std::string(name) + ": no closing '}'");
    }
    const std::string_view type = sql.substr(j + 1, close - j - 1);

    const std::string* value = nullptr;
    for (const auto& [pname, pvalue] : params) {
      if (pname != name) continue;
      if (value != nullptr && *value != pvalue) {
        return Status::Invalid(Named(name, type) + ": two different values");
      }
      value = &pvalue;
    }
    if (value == nullptr) return Status::Invalid(Named(name, type) + ": no value given");

    out->append(sql.substr(copied, i - copied));
    if (!out->empty() && NeedsGap(out->back())) out->push_back(' ');
    SH_RETURN_IF_ERROR(AppendLiteral(name, type, *value, out));
    if (close + 1 < n && NeedsGap(sql[close + 1])) out->push_back(' ');
    i = copied = close + 1;
  }
  out->append(sql.substr(copied));
  return Status::Ok();
}

}  // namespace

Status InlineParams(std::string_view sql, const std::vector<QueryParam>& params, std::string* out) {
  out->clear();
  Status st = Inline(sql, params, out);
  if (!st.ok()) out->clear();  // never half a statement
  return st;
}

}  // namespace spanhouse::storage
