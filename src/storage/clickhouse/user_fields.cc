// Which keys are user fields, and the user_fields column written as JSON
// text (UserFieldsJson) or as the JSON type's own columns (UserFieldsColumns).
#include "storage/clickhouse/user_fields.h"

#include <charconv>

#include "codec/value_text.h"

namespace spanhouse::storage {

UserFields::UserFields(const std::vector<std::string>& well_known)
    : well_known_(well_known.begin(), well_known.end()) {}

const std::vector<std::string>& UserFields::DefaultWellKnown() {
  // The namespaces of the OpenTelemetry semantic conventions (attribute
  // registry), and the SDK's own. Never add one: the reader's tag search
  // takes a key of these as never stored in user_fields (stored spans may
  // hold such a key's value only there).
  static const std::vector<std::string> names = {
      "android",       "artifact",     "aws",       "az",           "azure",
      "browser",       "cassandra",    "cicd",      "client",       "cloud",
      "cloudevents",   "code",         "container", "cpu",          "db",
      "deployment",    "destination",  "device",    "disk",         "dns",
      "elasticsearch", "enduser",      "error",     "event",        "exception",
      "faas",          "feature_flag", "file",      "gcp",          "gen_ai",
      "geo",           "graphql",      "heroku",    "host",         "http",
      "ios",           "jvm",          "k8s",       "linux",        "log",
      "message",       "messaging",    "net",       "network",      "oci",
      "opentracing",   "os",           "otel",      "peer",         "process",
      "profile",       "rpc",          "server",    "service",      "session",
      "signalr",       "source",       "system",    "telemetry",    "test",
      "thread",        "tls",          "url",       "user",         "user_agent",
      "v8js",          "vcs",          "webengine", "opentelemetry"};
  return names;
}

const UserFields& UserFields::Default() {
  static const UserFields def(DefaultWellKnown());
  return def;
}

bool UserFields::IsUserField(std::string_view key) const {
  // Every prefix that ends before a dot, then the whole key.
  for (size_t dot = key.find('.'); dot != std::string_view::npos; dot = key.find('.', dot + 1)) {
    if (well_known_.count(std::string(key.substr(0, dot))) != 0) return false;
  }
  return well_known_.count(std::string(key)) == 0;
}

// The user_fields column: per row a JSON object of the span's user-defined
// attributes, then its resource's (a key in both: the span's wins, the
// engine skipping the repeated path). Which keys are user fields is decided
// once per distinct key of the block; a resource's part once per batch.
struct UserFieldsJson::Impl {
  explicit Impl(const UserFields& filter) : filter_(filter) {}

  std::string_view Of(const SpanBatch& b, uint32_t i) {
    json_.assign(1, '{');
    bool first = true;
    Append(b, b.span_attrs, b.spans.attrs[i], &json_, &first);
    const std::string& res = ResourcePart(b, b.spans.resource[i]);
    if (!res.empty()) {
      if (!first) json_ += ',';
      json_ += res;
    }
    json_ += '}';
    return json_;
  }

  bool IsUserField(std::string_view key) {
    bool added = false;
    const uint32_t k = keys_.Find(key, &added);
    if (added) user_.push_back(!key.empty() && filter_.IsUserField(key) ? 1 : 0);
    return user_[k] != 0;
  }
  // `"key":value` pairs, comma-separated, of the user fields in `r`.
  void Append(const SpanBatch& b, const AttrColumns& cols, Range r, std::string* out, bool* first) {
    for (uint32_t a = r.begin; a < r.end; ++a) {
      const std::string_view key = b.Str(cols.key[a]);
      if (!IsUserField(key)) continue;
      if (!*first) *out += ',';
      *first = false;
      codec::AppendJsonString(*out, key);
      *out += ':';
      const std::string_view v = b.Str(cols.value[a]);
      switch (cols.type[a]) {
        case ValueType::kBool:
        case ValueType::kInt:
          out->append(v);  // true / false, decimal: JSON as they are
          break;
        case ValueType::kDouble:
          if (!v.empty() && (v.back() >= '0' && v.back() <= '9')) {
            out->append(v);
          } else {
            codec::AppendJsonString(*out, v);  // NaN, Infinity: not JSON numbers
          }
          break;
        case ValueType::kBytes: {
          std::string b64;
          codec::AppendBase64(b64, v);
          codec::AppendJsonString(*out, b64);
          break;
        }
        case ValueType::kEmpty:
          *out += "null";
          break;
        default:  // strings; arrays and kvlists as their JSON text, one value
          codec::AppendJsonString(*out, v);
          break;
      }
    }
  }
  const std::string& ResourcePart(const SpanBatch& b, uint32_t r) {
    std::vector<std::string>& parts = resources_[&b];
    if (parts.empty()) {
      parts.resize(b.resources.attrs.size());
      for (uint32_t k = 0; k < parts.size(); ++k) {
        bool first = true;
        Append(b, b.resource_attrs, b.resources.attrs[k], &parts[k], &first);
      }
    }
    return parts[r];
  }

  const UserFields& filter_;
  KeyIndex keys_;
  std::vector<uint8_t> user_;  // by key index: 1 = user field
  std::unordered_map<const SpanBatch*, std::vector<std::string>> resources_;
  std::string json_;
};

UserFieldsJson::UserFieldsJson(const UserFields& filter) : impl_(std::make_unique<Impl>(filter)) {}
UserFieldsJson::~UserFieldsJson() = default;
std::string_view UserFieldsJson::Of(const SpanBatch& b, uint32_t i) {
  return impl_->Of(b, i);
}

// The helpers first, inline as they were in the class: Row runs them for
// every attribute of every row.
inline int32_t UserFieldsColumns::PathOf(std::string_view key) {
  bool added = false;
  const uint32_t k = keys_.Find(key, &added);
  if (added) {
    // A map has no limit of paths.
    const bool user =
        !key.empty() && filter_.IsUserField(key) && (map_ || paths_.size() < kMaxPaths);
    path_of_.push_back(user ? static_cast<int32_t>(paths_.size()) : -1);
    if (user) {
      paths_.emplace_back();
      paths_.back().name = key;
      if (map_) paths_.back().map_key = map_keys_.Index(key);
    }
  }
  return path_of_[k];
}

inline int32_t UserFieldsColumns::PathOfId(uint32_t id, std::string_view key) {
  if (id >= path_of_id_.size()) path_of_id_.resize(id + 1, kUnknownPath);
  int32_t& path = path_of_id_[id];
  if (path == kUnknownPath) path = PathOf(key);
  return path;
}

inline bool UserFieldsColumns::Set(const SpanBatch& b, const AttrColumns& cols, uint32_t a,
                                   int32_t path) {
  if (path < 0 || cols.type[a] == ValueType::kEmpty) return false;
  Path& p = paths_[static_cast<size_t>(path)];
  if (map_) {
    if (p.map_row == rows_ + 1) return false;  // already set in this row: the first wins
    p.map_row = rows_ + 1;
    map_keys_.AddIndex(p.map_key);
    return AddText(cols.type[a], b.Str(cols.value[a]));
  }
  if (p.type.size() > rows_) return false;  // already set in this row: the first wins
  p.type.resize(rows_, kNull);
  return Add(p, cols.type[a], b.Str(cols.value[a]));
}

inline bool UserFieldsColumns::Add(Path& p, ValueType t, std::string_view v) {
  const char* end = v.data() + v.size();
  switch (t) {
    case ValueType::kBool:
      Push(p, kBool);
      p.bools.push_back(v == "true" ? 1 : 0);
      return v == "true" || v == "false";
    case ValueType::kInt: {
      int64_t n = 0;
      if (std::from_chars(v.data(), end, n).ptr == end && !v.empty()) {
        Push(p, kInt64);
        p.ints.push_back(n);
        char buf[24];
        const auto r = std::to_chars(buf, buf + sizeof(buf), n);
        return std::string_view(buf, static_cast<size_t>(r.ptr - buf)) == v;
      }
      break;
    }
    case ValueType::kDouble: {
      double d = 0;
      if (!v.empty() && v.back() >= '0' && v.back() <= '9' &&
          std::from_chars(v.data(), end, d).ptr == end) {
        Push(p, kFloat64);
        p.doubles.push_back(d);
        char buf[32];
        const auto r = std::to_chars(buf, buf + sizeof(buf), d);
        return std::string_view(buf, static_cast<size_t>(r.ptr - buf)) == v;
      }
      break;  // NaN, Infinity: as text
    }
    case ValueType::kBytes: {
      std::string b64;
      codec::AppendBase64(b64, v);
      Push(p, kString);
      AppendString(p.strings, b64);
      return false;
    }
    default:
      break;
  }
  Push(p, kString);  // strings; arrays and kvlists as their JSON text
  AppendString(p.strings, v);
  return t == ValueType::kString;
}

inline bool UserFieldsColumns::AddText(ValueType t, std::string_view v) {
  if (t == ValueType::kBytes) {
    std::string b64;
    codec::AppendBase64(b64, v);
    AppendString(map_values_, b64);
    return false;
  }
  // Any other value is kept as its text, which the reader gives back with
  // the type attr_types keeps.
  AppendString(map_values_, v);
  return true;
}

inline void UserFieldsColumns::Push(Path& p, uint8_t type) {
  p.type.push_back(type);
  p.types |= 1u << type;
}

inline void UserFieldsColumns::AppendString(std::string& out, std::string_view v) {
  uint64_t n = v.size();
  while (n >= 0x80) {
    out += static_cast<char>(n | 0x80);
    n >>= 7;
  }
  out += static_cast<char>(n);
  out.append(v);
}

void UserFieldsColumns::Row(const SpanBatch& b, uint32_t i, std::vector<uint8_t>* exact,
                            const uint32_t* key_ids) {
  // The span's first: a key in both is its.
  const Range own = b.spans.attrs[i];
  if (exact != nullptr) exact->assign(own.size(), 0);
  for (uint32_t a = own.begin; a < own.end; ++a) {
    const std::string_view key = b.Str(b.span_attrs.key[a]);
    const int32_t path = key_ids != nullptr ? PathOfId(key_ids[a - own.begin], key) : PathOf(key);
    const bool e = Set(b, b.span_attrs, a, path);
    if (exact != nullptr) (*exact)[a - own.begin] = e ? 1 : 0;
  }
  // A resource's user fields are found once per batch: its ~15 attributes
  // come with every span and few are user fields. Kept with their paths;
  // the batch's list found once per run of rows from it.
  if (&b != last_batch_) {
    last_batch_ = &b;
    last_fields_ = &resource_fields_[&b];
    if (last_fields_->empty()) last_fields_->resize(b.resources.attrs.size());
  }
  std::vector<ResourceField>& res = (*last_fields_)[b.spans.resource[i]];
  if (res.empty()) {
    const Range range = b.resources.attrs[b.spans.resource[i]];
    for (uint32_t a = range.begin; a < range.end; ++a) {
      const int32_t path = PathOf(b.Str(b.resource_attrs.key[a]));
      if (path >= 0) res.push_back({a, path});
    }
    res.push_back({kNoAttr, -1});  // known, even when it has none
  }
  for (const ResourceField& f : res) {
    if (f.attr != kNoAttr) Set(b, b.resource_attrs, f.attr, f.path);
  }
  ++rows_;
  if (map_) map_offsets_.push_back(map_keys_.rows());
}

void UserFieldsColumns::Write(native::Writer& w) {
  if (rows_ == 0) return;
  if (map_) {
    for (uint64_t o : map_offsets_) w.Fixed<uint64_t>(o);
    map_keys_.Write(w);  // nothing when no row has a field
    w.Bytes(map_values_.data(), map_values_.size());
    return;
  }
  w.Fixed<uint64_t>(3);  // JSON serialization: flattened
  w.Varint(paths_.size());
  for (const Path& p : paths_) w.String(p.name);
  for (const Path& p : paths_) {
    w.Fixed<uint64_t>(3);  // Dynamic serialization: flattened
    w.Varint(static_cast<uint64_t>(__builtin_popcount(p.types)));
    for (int t = 0; t < kTypes; ++t) {
      if ((p.types & (1u << t)) != 0) w.String(kTypeNames[t]);
    }
  }
  for (Path& p : paths_) {
    // Discriminators: a type's rank among the path's types (they are
    // listed in name order, as kTypeNames is), NULL after the last.
    uint8_t rank[kTypes + 1];
    uint8_t n = 0;
    for (int t = 0; t < kTypes; ++t) rank[t] = (p.types & (1u << t)) != 0 ? n++ : 0;
    rank[kNull] = n;
    p.type.resize(rows_, kNull);
    for (uint8_t t : p.type) w.Fixed<uint8_t>(rank[t]);
    for (uint8_t v : p.bools) w.Fixed<uint8_t>(v);
    for (double v : p.doubles) w.Fixed<double>(v);
    for (int64_t v : p.ints) w.Fixed<int64_t>(v);
    w.Bytes(p.strings.data(), p.strings.size());
  }
}

}  // namespace spanhouse::storage
