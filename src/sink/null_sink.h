// The null sink: takes spans and stores nothing. It measures the pipeline
// without a store (receivers, decoding, the filter, the durable queue, the
// sink runtime) and shows the smallest sink there is: a plug-in of the sink
// runtime (runtime.h) whose write does nothing.
#pragma once

#include <memory>
#include <string>

#include "sink/sink.h"

namespace spanhouse::sink {

std::unique_ptr<Sink> MakeNullSink(std::string name = "null");

}  // namespace spanhouse::sink
