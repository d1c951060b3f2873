#pragma once

#include <cstdint>
#include <string_view>

#include "model/span_batch.h"

namespace spanhouse {

// Jaeger's names for a resource without a usable service.name. A resource
// gets one at intake (SpanBatch::ResolveServiceName), so such spans are
// stored, listed and searched under it like any other service.
inline constexpr std::string_view kMissingServiceName = "missing-service-name";
inline constexpr std::string_view kEmptyServiceName = "empty-service-name";
inline constexpr std::string_view kWrongTypeServiceName = "service-name-wrong-type";

// The service resource `r` of `b` has in Jaeger: its first service.name
// attribute when that is a non-empty string, else one of the names above.
std::string_view JaegerServiceName(const SpanBatch& b, uint32_t r);

}  // namespace spanhouse
