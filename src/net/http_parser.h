// HTTP/1.1 requests read from bytes: the request head (request line, header
// fields, the framing they declare) and the body, by Content-Length or
// de-chunked. A state machine with no socket and no clock, so that the
// server's I/O thread, the unit tests and the fuzzer drive the same code.
//
// The caller owns the input: Feed() is given the bytes not consumed so far
// followed by any new ones, and says how many it consumed. A head is
// consumed only once complete, so it is parsed where it lies (the
// connection's input buffer) without a copy; a body is copied into the
// request, or received straight into it through BodyRoom().
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <utility>

namespace spanhouse::net {

struct HttpRequest {
  std::string method;
  std::string target;  // path and query string
  std::string content_type;
  std::string content_encoding;
  std::string if_none_match;  // the first If-None-Match header (conditional GETs of the UI's files)
  std::string body;
  std::string_view path() const {
    std::string_view t = target;
    return t.substr(0, t.find('?'));
  }
};

// The Authorization headers of a request head: how many, and the first
// one's value (see HttpAuthorizer in http_server.h).
struct AuthorizationHeader {
  std::string_view value;  // the first Authorization header's value
  int count = 0;           // 0: none; more than 1: ambiguous
};

// What a request head says about framing and the connection, beyond
// HttpRequest.
struct HttpHead {
  bool http10 = false;
  bool head_method = false;  // HEAD: the answer has no body
  std::optional<uint64_t> content_length;
  bool chunked = false;
  bool conn_close = false;       // Connection: close
  bool conn_keep_alive = false;  // Connection: keep-alive
  bool expect_continue = false;  // Expect: 100-continue

  bool keep_alive() const { return !conn_close && (!http10 || conn_keep_alive); }
};

struct HttpParserLimits {
  // The request line and header fields with the empty line that ends them
  // (431 beyond); also what the server's input buffer holds.
  size_t max_head_bytes = 64 * 1024;
  size_t max_body_bytes = 20u << 20;     // declared or de-chunked (413 beyond)
  size_t max_chunk_line = 4 * 1024;      // chunk size plus extensions (400 beyond)
  size_t max_trailer_bytes = 16 * 1024;  // trailer fields, all together (400 beyond)
};

class HttpRequestParser {
 public:
  enum class Event {
    kNeedInput,  // more bytes are needed (after those not consumed)
    kHead,       // a head is complete: request() and head() hold it; Feed again for the body
    kRequest,    // the request is complete, body included; Next() starts the next one
    kError,      // error_status() and error_message() are the answer; the parser is done
  };

  explicit HttpRequestParser(HttpParserLimits limits = {}) : limits_(limits) {}

  // Parses from `data`: the bytes not consumed by the previous call, then
  // any that came after them. `*consumed` is how many of them were used.
  // Stops at each event; after kRequest it reads nothing more until Next().
  Event Feed(std::string_view data, size_t* consumed);

  // After kHead: the Authorization headers, once (a second call gets none).
  // The value points into the `data` of the Feed that returned kHead.
  AuthorizationHeader TakeAuthorization() { return std::exchange(authorization_, {}); }
  // After kHead: whether a client that asked for 100 Continue is to get it
  // before its body, given that `available` bytes follow the head already:
  // HTTP/1.1, and the body is chunked, or longer than that and within the
  // limit.
  bool ExpectsContinue(size_t available) const;

  // While a body (or a chunk's data) is awaited: the part of the request's
  // body still to be filled, which the caller may write into directly, then
  // say how much with BodyFilled(). Empty otherwise.
  std::span<char> BodyRoom();
  void BodyFilled(size_t n) { body_fill_ += n; }

  // Ready for the next request on the same connection.
  void Next();

  // The request, from kHead on; the caller may move its fields out.
  HttpRequest& request() { return req_; }
  const HttpHead& head() const { return head_; }
  // Waiting for the start of a request or for the rest of its head.
  bool reading_head() const { return state_ == State::kHead; }
  int error_status() const { return error_status_; }
  const std::string& error_message() const { return error_message_; }
  const HttpParserLimits& limits() const { return limits_; }

 private:
  enum class State {
    kHead,       // reading a request head
    kHeadDone,   // the head is parsed; the body's framing comes next
    kBody,       // filling req_.body up to body_target_ (a body, or a chunk's data)
    kChunkSize,  // reading a chunk-size line
    kChunkEnd,   // reading the CRLF after a chunk's data
    kTrailer,    // reading trailer fields after the last chunk
    kDone,       // a request is complete
    kError,
  };
  // Takes one line off `in`, without its CRLF or LF.
  enum class Line { kLine, kNeedMore, kTooLong };
  static Line TakeLine(std::string_view& in, size_t max, std::string_view* line);

  // Each step: an event for Feed to return, or nothing to go on.
  std::optional<Event> OnHead(std::string_view& in);
  std::optional<Event> OnHeadDone();
  std::optional<Event> OnChunkSize(std::string_view& in);
  std::optional<Event> OnChunkEnd(std::string_view& in);
  std::optional<Event> OnTrailer(std::string_view& in);
  const char* ParseHead(std::string_view head);
  const char* ParseField(std::string_view field);
  Event Fail(int status, std::string message);
  Event BodyTooLarge();

  HttpParserLimits limits_;
  State state_ = State::kHead;
  HttpRequest req_;
  HttpHead head_;
  AuthorizationHeader authorization_;
  bool seen_content_type_ = false;
  bool seen_content_encoding_ = false;
  size_t scan_ = 0;  // kHead: no line before this offset (in the unconsumed bytes) ends the head
  size_t body_fill_ = 0;    // bytes of req_.body received
  size_t body_target_ = 0;  // kBody: req_.body is complete at this size
  size_t trailer_bytes_ = 0;
  int error_status_ = 0;
  std::string error_message_;
};

}  // namespace spanhouse::net
