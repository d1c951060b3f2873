// The HTTP status of each StatusCode: the one mapping every HTTP listener
// (the receivers, the query API) answers with.
#pragma once

#include "common/status.h"

namespace spanhouse::net {

constexpr int HttpStatusOf(StatusCode code) {
  switch (code) {
    case StatusCode::kOk:
      return 200;
    case StatusCode::kInvalidArgument:
      return 400;
    case StatusCode::kNotFound:
      return 404;
    case StatusCode::kTooLarge:
      return 413;
    case StatusCode::kUnsupportedMedia:
      return 415;
    case StatusCode::kResourceExhausted:
      return 429;
    case StatusCode::kUnavailable:
      return 503;
    case StatusCode::kInternal:
      return 500;
  }
  return 500;
}

}  // namespace spanhouse::net
