// HttpRequestParser: RFC 9112's request syntax, strictly where a lenient
// reading would let a proxy in front and this server disagree on where a
// request ends (request smuggling), leniently where that cannot happen (a
// bare LF ends a line, empty lines before a request are skipped).
//
// Every limit is checked on the bytes as they arrive, never on a declared
// size alone, and each decision depends only on the bytes seen so far, so
// the same stream gives the same requests however it is cut into reads.
#include "net/http_parser.h"

#include <algorithm>
#include <charconv>
#include <cstring>

namespace spanhouse::net {

namespace {

// --- Text helpers (HTTP syntax is ASCII; no locale) ---

char Lower(char c) {
  return c >= 'A' && c <= 'Z' ? static_cast<char>(c - 'A' + 'a') : c;
}

bool IEquals(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Lower(a[i]) != Lower(b[i])) return false;
  }
  return true;
}

std::string_view Trim(std::string_view t) {
  while (!t.empty() && (t.front() == ' ' || t.front() == '\t')) t.remove_prefix(1);
  while (!t.empty() && (t.back() == ' ' || t.back() == '\t')) t.remove_suffix(1);
  return t;
}

// RFC 9110 tchar: what methods and header names are made of.
bool IsTokenChar(char c) {
  if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9')) return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(c) != std::string_view::npos;
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), IsTokenChar);
}

// Calls f on each trimmed, non-empty element of a comma-separated list.
template <typename F>
void ForEachListItem(std::string_view list, F f) {
  while (!list.empty()) {
    const size_t comma = list.find(',');
    const std::string_view item = Trim(list.substr(0, comma));
    if (!item.empty()) f(item);
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
}

int HexValue(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  return -1;
}

// Content-Length: digits, or a list of identical values (RFC 9110, 8.6).
bool ParseContentLength(std::string_view v, HttpHead& head) {
  bool ok = !Trim(v).empty();
  ForEachListItem(v, [&](std::string_view item) {
    uint64_t n = 0;
    const auto res = std::from_chars(item.data(), item.data() + item.size(), n);
    if (res.ec != std::errc() || res.ptr != item.data() + item.size() || item[0] == '+') {
      ok = false;
    } else if (head.content_length && *head.content_length != n) {
      ok = false;
    } else {
      head.content_length = n;
    }
  });
  return ok;
}

bool IsTargetChar(char c) {
  return static_cast<unsigned char>(c) > 0x20 && c != 0x7f;
}

bool IsFieldValueChar(char c) {
  const auto u = static_cast<unsigned char>(c);
  return (u >= 0x20 || c == '\t') && u != 0x7f;
}

}  // namespace

HttpRequestParser::Event HttpRequestParser::Feed(std::string_view data, size_t* consumed) {
  std::string_view in = data;
  for (;;) {
    std::optional<Event> event;
    switch (state_) {
      case State::kHead:
        event = OnHead(in);
        break;
      case State::kHeadDone:
        event = OnHeadDone();
        break;
      case State::kBody: {
        const size_t n = std::min(in.size(), body_target_ - body_fill_);
        if (n > 0) std::memcpy(req_.body.data() + body_fill_, in.data(), n);
        body_fill_ += n;
        in.remove_prefix(n);
        if (body_fill_ < body_target_) {
          event = Event::kNeedInput;
        } else if (head_.chunked) {
          state_ = State::kChunkEnd;
        } else {
          state_ = State::kDone;
        }
        break;
      }
      case State::kChunkSize:
        event = OnChunkSize(in);
        break;
      case State::kChunkEnd:
        event = OnChunkEnd(in);
        break;
      case State::kTrailer:
        event = OnTrailer(in);
        break;
      case State::kDone:
        event = Event::kRequest;
        break;
      case State::kError:
        event = Event::kError;
        break;
    }
    if (event) {
      *consumed = data.size() - in.size();
      return *event;
    }
  }
}

std::optional<HttpRequestParser::Event> HttpRequestParser::OnHead(std::string_view& in) {
  // Empty lines before a request line are ignored (RFC 9112, 2.2).
  while (scan_ == 0 && !in.empty()) {
    if (in[0] == '\n') {
      in.remove_prefix(1);
    } else if (in[0] == '\r' && in.size() >= 2 && in[1] == '\n') {
      in.remove_prefix(2);
    } else if (in[0] == '\r' && in.size() == 1) {
      return Event::kNeedInput;
    } else {
      break;
    }
  }
  if (in.empty()) return Event::kNeedInput;

  // Find the empty line that ends the head, a line at a time from where the
  // last look stopped, within the limit only: what lies beyond it cannot be
  // part of an acceptable head.
  const size_t window = std::min(in.size(), limits_.max_head_bytes);
  scan_ = std::min(scan_, window);
  size_t head_len = 0;
  while (head_len == 0) {
    const char* line = in.data() + scan_;
    const auto* nl = static_cast<const char*>(std::memchr(line, '\n', window - scan_));
    if (nl == nullptr) {
      if (in.size() >= limits_.max_head_bytes) {
        return Fail(431,
                    "request head exceeds " + std::to_string(limits_.max_head_bytes) + " bytes\n");
      }
      return Event::kNeedInput;
    }
    const size_t len = nl - line;
    scan_ += len + 1;
    if (len == 0 || (len == 1 && line[0] == '\r')) head_len = scan_;  // never the first line
  }
  const char* error = ParseHead(in.substr(0, head_len));
  in.remove_prefix(head_len);
  scan_ = 0;
  if (error != nullptr) return Fail(400, std::string("malformed HTTP request: ") + error + "\n");
  state_ = State::kHeadDone;
  return Event::kHead;
}

// Parses a request head: the request line, header fields, and the empty line
// that ends them; lines end in CRLF or a bare LF. Returns what is wrong with
// it, or nullptr.
const char* HttpRequestParser::ParseHead(std::string_view head) {
  auto next_line = [&head] {
    const size_t eol = head.find('\n');  // there is one: the head ends in one
    std::string_view line = head.substr(0, eol);
    head.remove_prefix(eol + 1);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    return line;
  };

  // method SP request-target SP HTTP-version
  const std::string_view line = next_line();
  const size_t sp1 = line.find(' ');
  if (sp1 == std::string_view::npos) return "bad request line";
  const size_t sp2 = line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return "bad request line";
  const std::string_view method = line.substr(0, sp1);
  const std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  const std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method)) return "bad method";
  if (target.empty() || !std::all_of(target.begin(), target.end(), IsTargetChar)) {
    return "bad request target";
  }
  if (version == "HTTP/1.1") {
    head_.http10 = false;
  } else if (version == "HTTP/1.0") {
    head_.http10 = true;
  } else {
    return "unsupported HTTP version";
  }
  req_.method = method;
  req_.target = target;
  head_.head_method = method == "HEAD";

  for (std::string_view field = next_line(); !field.empty(); field = next_line()) {
    if (const char* error = ParseField(field)) return error;
  }
  // Both would let a proxy in front and this server disagree on where the
  // body ends: request smuggling (RFC 9112, 6.3).
  if (head_.chunked && head_.content_length) return "both Content-Length and Transfer-Encoding";
  return nullptr;
}

// One header field line; what is wrong with it, or nullptr.
const char* HttpRequestParser::ParseField(std::string_view field) {
  if (field.front() == ' ' || field.front() == '\t') return "obsolete header line folding";
  const size_t colon = field.find(':');
  if (colon == std::string_view::npos) return "header line without a colon";
  const std::string_view name = field.substr(0, colon);
  if (!IsToken(name)) return "bad header name";
  const std::string_view value = Trim(field.substr(colon + 1));
  if (!std::all_of(value.begin(), value.end(), IsFieldValueChar)) {
    return "control character in a header value";
  }
  if (IEquals(name, "content-length")) {
    if (!ParseContentLength(value, head_)) return "bad or conflicting Content-Length";
  } else if (IEquals(name, "transfer-encoding")) {
    // Only chunked is understood, and only once (RFC 9112, 6.1).
    if (head_.chunked || !IEquals(value, "chunked")) return "unsupported Transfer-Encoding";
    head_.chunked = true;
  } else if (IEquals(name, "connection")) {
    ForEachListItem(value, [&](std::string_view opt) {
      if (IEquals(opt, "close")) head_.conn_close = true;
      if (IEquals(opt, "keep-alive")) head_.conn_keep_alive = true;
    });
  } else if (IEquals(name, "expect")) {
    if (IEquals(value, "100-continue")) head_.expect_continue = true;
  } else if (IEquals(name, "content-type")) {
    if (!seen_content_type_) req_.content_type = value;  // the first one counts
    seen_content_type_ = true;
  } else if (IEquals(name, "content-encoding")) {
    if (!seen_content_encoding_) req_.content_encoding = value;
    seen_content_encoding_ = true;
  } else if (IEquals(name, "if-none-match")) {
    if (req_.if_none_match.empty()) req_.if_none_match = value;
  } else if (IEquals(name, "authorization")) {
    if (authorization_.count++ == 0) authorization_.value = value;
  }
  return nullptr;
}

// The body's framing, once the caller has seen the head.
std::optional<HttpRequestParser::Event> HttpRequestParser::OnHeadDone() {
  if (head_.chunked) {
    state_ = State::kChunkSize;
    return std::nullopt;
  }
  const uint64_t length = head_.content_length.value_or(0);
  if (length > limits_.max_body_bytes) return BodyTooLarge();
  if (length == 0) {
    state_ = State::kDone;
    return std::nullopt;
  }
  // The one allocation for the body: it is filled in place from here on.
  req_.body.resize(length);
  body_fill_ = 0;
  body_target_ = length;
  state_ = State::kBody;
  return std::nullopt;
}

bool HttpRequestParser::ExpectsContinue(size_t available) const {
  if (!head_.expect_continue || head_.http10) return false;
  if (head_.chunked) return true;
  const uint64_t length = head_.content_length.value_or(0);
  return length > available && length <= limits_.max_body_bytes;
}

std::span<char> HttpRequestParser::BodyRoom() {
  if (state_ != State::kBody) return {};
  return {req_.body.data() + body_fill_, body_target_ - body_fill_};
}

HttpRequestParser::Line HttpRequestParser::TakeLine(std::string_view& in, size_t max,
                                                    std::string_view* line) {
  if (in.empty()) return Line::kNeedMore;
  const auto* nl = static_cast<const char*>(std::memchr(in.data(), '\n', in.size()));
  if (nl == nullptr) return in.size() > max ? Line::kTooLong : Line::kNeedMore;
  const size_t len = nl - in.data();
  if (len > max) return Line::kTooLong;
  *line = in.substr(0, len);
  if (!line->empty() && line->back() == '\r') line->remove_suffix(1);
  in.remove_prefix(len + 1);
  return Line::kLine;
}

// chunk-size [ chunk-ext ] CRLF; the extensions are ignored.
std::optional<HttpRequestParser::Event> HttpRequestParser::OnChunkSize(std::string_view& in) {
  std::string_view line;
  switch (TakeLine(in, limits_.max_chunk_line, &line)) {
    case Line::kNeedMore:
      return Event::kNeedInput;
    case Line::kTooLong:
      return Fail(400, "malformed HTTP request: chunk size line too long\n");
    case Line::kLine:
      break;
  }
  uint64_t size = 0;
  size_t digits = 0;
  for (; digits < line.size() && HexValue(line[digits]) >= 0; ++digits) {
    if (digits == 15) return Fail(400, "malformed HTTP request: chunk size too large\n");
    size = size * 16 + HexValue(line[digits]);
  }
  const std::string_view rest = Trim(line.substr(digits));
  if (digits == 0 || (!rest.empty() && rest.front() != ';')) {
    return Fail(400, "malformed HTTP request: bad chunk size\n");
  }
  if (size == 0) {
    state_ = State::kTrailer;
    return std::nullopt;
  }
  if (size > limits_.max_body_bytes - req_.body.size()) return BodyTooLarge();
  body_fill_ = req_.body.size();
  body_target_ = body_fill_ + size;
  req_.body.resize(body_target_);  // grows geometrically over the chunks
  state_ = State::kBody;
  return std::nullopt;
}

std::optional<HttpRequestParser::Event> HttpRequestParser::OnChunkEnd(std::string_view& in) {
  if (in.empty()) return Event::kNeedInput;
  if (in[0] == '\n') {
    in.remove_prefix(1);
  } else if (in[0] == '\r' && in.size() == 1) {
    return Event::kNeedInput;
  } else if (in[0] == '\r' && in[1] == '\n') {
    in.remove_prefix(2);
  } else {
    return Fail(400, "malformed HTTP request: chunk data longer than its size\n");
  }
  state_ = State::kChunkSize;
  return std::nullopt;
}

// Trailer fields are read and dropped, up to an empty line.
std::optional<HttpRequestParser::Event> HttpRequestParser::OnTrailer(std::string_view& in) {
  std::string_view line;
  switch (TakeLine(in, limits_.max_trailer_bytes, &line)) {
    case Line::kNeedMore:
      return Event::kNeedInput;
    case Line::kTooLong:
      return Fail(400, "malformed HTTP request: trailer section too large\n");
    case Line::kLine:
      break;
  }
  trailer_bytes_ += line.size() + 2;
  if (trailer_bytes_ > limits_.max_trailer_bytes) {
    return Fail(400, "malformed HTTP request: trailer section too large\n");
  }
  if (line.empty()) state_ = State::kDone;
  return std::nullopt;
}

HttpRequestParser::Event HttpRequestParser::Fail(int status, std::string message) {
  state_ = State::kError;
  error_status_ = status;
  error_message_ = std::move(message);
  req_ = HttpRequest{};
  return Event::kError;
}

HttpRequestParser::Event HttpRequestParser::BodyTooLarge() {
  return Fail(413, "request body exceeds " + std::to_string(limits_.max_body_bytes) + " bytes\n");
}

void HttpRequestParser::Next() {
  *this = HttpRequestParser(limits_);
}

}  // namespace spanhouse::net
