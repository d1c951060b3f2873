// What one spanhouse node tells another when it forwards spans (peers/peer_sink.h sends
// it, the OTLP/gRPC receiver reads it): the metadata naming the node that forwarded a
// request. A request carrying it is the receiving node's whole, never forwarded again.
#pragma once

namespace spanhouse {

inline constexpr const char* kForwardedByMetadata = "x-spanhouse-forwarded-by";

}  // namespace spanhouse
