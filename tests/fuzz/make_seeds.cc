// Writes the generated part of the seed corpus: real requests from the project's own load
// generator and test batch, encoded by the project's encoder, and the same requests
// compressed for the decompression target. Run once by hand (tests/fuzz/README.md); the
// output is checked in, so a change here changes the corpus only when someone reruns it.
//   make_seeds tests/fuzz/corpus
#include <zlib.h>

#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "codec/compressor.h"
#include "codec/otlp.h"
#include "codec/otlp_encode.h"
#include "model/span_batch.h"
#include "testdata/sample_batch.h"
#include "testdata/zipkin_spans.h"
#include "tools/loadgen/generator.h"

namespace {

namespace fs = std::filesystem;
using spanhouse::SpanBatch;

void Write(const fs::path& dir, std::string_view name, std::string_view bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary).write(bytes.data(), std::streamsize(bytes.size()));
  std::printf("%s/%.*s: %zu bytes\n", dir.c_str(), static_cast<int>(name.size()), name.data(),
              bytes.size());
}

std::string Read(const fs::path& p) {
  std::ifstream f(p, std::ios::binary);
  std::stringstream s;
  s << f.rdbuf();
  return s.str();
}

// A protobuf length-delimited field (wire type 2), for the hand-built seed.
std::string Len(uint32_t field, std::string_view payload) {
  std::string s;
  for (uint64_t v : {uint64_t{field} << 3 | 2, uint64_t{payload.size()}}) {
    for (; v >= 0x80; v >>= 7) s += static_cast<char>((v & 0x7f) | 0x80);
    s += static_cast<char>(v);
  }
  s += payload;
  return s;
}

// zlib format (HTTP "deflate"), which the load generator does not send.
std::string Deflate(std::string_view in) {
  uLongf n = compressBound(in.size());
  std::string out(n, '\0');
  compress2(reinterpret_cast<Bytef*>(out.data()), &n, reinterpret_cast<const Bytef*>(in.data()),
            in.size(), 6);
  out.resize(n);
  return out;
}

std::string Compressed(std::string_view kind, std::string_view in) {
  std::string out;
  spanhouse::codec::Compressor(kind).Compress(in, &out);
  return out;
}

// The decompression target's input: encoding selector, cap selector, body (fuzz_decompress.cc).
std::string DecompressInput(uint8_t encoding, uint8_t cap, std::string_view body) {
  std::string s;
  s += static_cast<char>(encoding);
  s += static_cast<char>(cap);
  s += body;
  return s;
}

// Zipkin span lists written both as JSON and as protobuf, under the same name in
// zipkin_json/ (NAME.json) and zipkin_proto/ (NAME): every field and every tag the mapping
// reads, a shared RPC span, 64-bit ids over several services, what an OTel SDK exporter sends.
std::vector<std::pair<std::string, std::vector<spanhouse::testdata::ZSpan>>> ZipkinSeeds() {
  using spanhouse::testdata::ZEndpoint;
  using spanhouse::testdata::ZSpan;
  constexpr uint64_t kStart = 1700000000000000;
  ZSpan full = spanhouse::testdata::ZipkinFullSpan();
  ZSpan tagged = full;
  tagged.id = "eee19b7ec3c1b175";
  tagged.kind = "";
  tagged.local = ZEndpoint{"checkout", "", "", 0};
  tagged.remote.reset();
  tagged.debug = false;
  tagged.shared = false;
  tagged.tags = {{"error", "connection refused"},
                 {"otel.status_code", "ERROR"},
                 {"otel.status_description", "upstream failed"},
                 {"otel.scope.name", "io.opentelemetry.okhttp"},
                 {"otel.scope.version", "1.2.0"},
                 {"otel.library.name", "old"},
                 {"otel.library.version", "0.1"},
                 {"w3c.tracestate", "rojo=00f067aa0ba902b7"},
                 {"span.kind", "producer"},
                 {"service.peer.name", "queue"},
                 {"error", "false"}};

  ZSpan client = full;
  client.kind = "CLIENT";
  client.shared = false;
  client.debug = false;
  client.local = ZEndpoint{"frontend", "192.168.99.101", "", 0};
  client.remote = ZEndpoint{"checkout", "", "", 8080};
  ZSpan server = client;
  server.kind = "SERVER";
  server.shared = true;
  server.local = ZEndpoint{"checkout", "10.0.0.1", "", 8080};
  server.remote = ZEndpoint{"", "192.168.99.101", "", 52000};

  std::vector<ZSpan> ids;
  for (int i = 0; i < 4; ++i) {
    ZSpan s;
    s.trace_id = "463ac35c9f6413ad";
    s.id = "000000000000000" + std::to_string(i + 1);
    if (i > 0) s.parent_id = "0000000000000001";
    s.name = "op" + std::to_string(i);
    s.timestamp = kStart + static_cast<uint64_t>(i) * 100;
    s.duration = 50;
    s.local = ZEndpoint{i % 2 == 0 ? "a" : "b", "", "", 0};
    ids.push_back(s);
  }

  // The OTel spec's Zipkin exporter: no kind for INTERNAL, status as tags, scope as tags.
  ZSpan otel;
  otel.trace_id = "48485a3953bb6124463ac35c9f6413ad";
  otel.id = "1c8355eb114c9bb4";
  otel.name = "process order";
  otel.timestamp = kStart;
  otel.duration = 1;
  otel.local = ZEndpoint{"orders", "", "", 0};
  otel.tags = {{"otel.status_code", "ERROR"},
               {"error", "out of stock"},
               {"otel.scope.name", "shop.orders"},
               {"app.items", "[1,2]"}};
  otel.annotations = {{kStart, "\"exception\": {\"type\":\"OutOfStock\"}"}};
  return {{"every-field", {full, tagged}},
          {"shared-rpc", {client, server}},
          {"ids-64-bit", ids},
          {"otel-exporter", {otel}}};
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: make_seeds CORPUS_DIR\n");
    return 2;
  }
  const fs::path root = argv[1];
  const fs::path proto = root / "otlp_proto";
  const fs::path compressed = root / "decompress";
  const fs::path zipkin_json = root / "zipkin_json";
  const fs::path zipkin_proto = root / "zipkin_proto";

  // One loadgen trace per request keeps each seed a few KiB: small inputs mutate faster.
  for (uint64_t seed : {1, 2, 3}) {
    spanhouse::loadgen::TraceGenerator gen({.seed = seed});
    SpanBatch b;
    gen.AppendTrace(1700000000000000000ull, &b);
    Write(proto, "loadgen-" + std::to_string(seed), spanhouse::codec::EncodeOtlpProto(b));
  }
  const std::string sample = spanhouse::codec::EncodeOtlpProto(spanhouse::testdata::SampleBatch(1));
  Write(proto, "sample-batch", sample);
  Write(proto, "empty", "");
  // The hand-made JSON seeds with every field and the deepest values, as protobuf: nested
  // arrays and kvlists holding every value type, which no generated trace has.
  for (const char* name : {"every-field", "nested-values", "deep-16"}) {
    SpanBatch b;
    const std::string json = Read(root / "otlp_json" / (std::string(name) + ".json"));
    if (!spanhouse::codec::DecodeOtlpJson(json, b).ok()) {
      std::fprintf(stderr, "make_seeds: otlp_json/%s.json does not decode\n", name);
      return 1;
    }
    Write(proto, std::string("from-json-") + name, spanhouse::codec::EncodeOtlpProto(b));
  }
  // Old SDKs send instrumentation_library_spans (field 1000, the layout of scope_spans), which
  // the encoder never writes: resource_spans { 1000 { library { name } spans { ids, name } } }.
  const std::string ids = Len(1, std::string(16, '\x5b')) + Len(2, std::string(8, '\xee'));
  Write(proto, "instrumentation-library-spans",
        Len(1, Len(1000, Len(1, Len(1, "io.legacy")) + Len(2, ids + Len(5, "old sdk")))));

  for (const auto& [name, spans] : ZipkinSeeds()) {
    Write(zipkin_json, name + ".json", spanhouse::testdata::ZipkinJson(spans));
    Write(zipkin_proto, name, spanhouse::testdata::ZipkinProto(spans));
  }
  Write(zipkin_proto, "empty", "");

  // Selectors as fuzz_decompress.cc reads them: 0 gzip, 1 deflate, 2 zstd, 3 none; cap 63 is the
  // largest (4 MiB), 40 is 8 KiB.
  Write(compressed, "gzip", DecompressInput(0, 63, Compressed("gzip", sample)));
  Write(compressed, "deflate", DecompressInput(1, 63, Deflate(sample)));
  Write(compressed, "zstd", DecompressInput(2, 63, Compressed("zstd", sample)));
  Write(compressed, "identity", DecompressInput(3, 63, sample));
  const std::string gz = Compressed("gzip", "first member ");
  Write(compressed, "gzip-two-members", DecompressInput(0, 63, gz + Compressed("gzip", "second")));
  // 1 MiB of zeros, over the 8 KiB cap: a small bomb.
  const std::string zeros(1 << 20, '\0');
  Write(compressed, "gzip-bomb", DecompressInput(0, 40, Compressed("gzip", zeros)));
  Write(compressed, "zstd-bomb", DecompressInput(2, 40, Compressed("zstd", zeros)));
  return 0;
}
