#include "codec/compressor.h"

#include <zlib.h>
#include <zstd.h>

namespace spanhouse::codec {

struct Compressor::State {
  z_stream z{};
  bool z_ready = false;
  ZSTD_CCtx* zstd = nullptr;

  ~State() {
    if (z_ready) deflateEnd(&z);
    if (zstd != nullptr) ZSTD_freeCCtx(zstd);
  }
};

bool Compressor::Valid(std::string_view kind) {
  return kind == "none" || kind == "gzip" || kind == "zstd";
}

Compressor::Compressor(std::string_view kind) : state_(std::make_unique<State>()) {
  if (kind == "gzip") {
    encoding_ = "gzip";
    // Level 1: a load generator should spend its CPU on sending, not squeezing.
    state_->z_ready =
        deflateInit2(&state_->z, 1, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) == Z_OK;
  } else if (kind == "zstd") {
    encoding_ = "zstd";
    state_->zstd = ZSTD_createCCtx();
    if (state_->zstd != nullptr) ZSTD_CCtx_setParameter(state_->zstd, ZSTD_c_compressionLevel, 1);
  }
}

Compressor::~Compressor() = default;

bool Compressor::Compress(std::string_view in, std::string* out) {
  State& s = *state_;
  if (encoding_ == "gzip") {
    if (!s.z_ready || deflateReset(&s.z) != Z_OK) return false;
    out->resize(deflateBound(&s.z, in.size()));
    s.z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
    s.z.avail_in = static_cast<uInt>(in.size());
    s.z.next_out = reinterpret_cast<Bytef*>(out->data());
    s.z.avail_out = static_cast<uInt>(out->size());
    if (deflate(&s.z, Z_FINISH) != Z_STREAM_END) return false;
    out->resize(out->size() - s.z.avail_out);
    return true;
  }
  if (encoding_ == "zstd") {
    if (s.zstd == nullptr) return false;
    out->resize(ZSTD_compressBound(in.size()));
    const size_t n = ZSTD_compress2(s.zstd, out->data(), out->size(), in.data(), in.size());
    if (ZSTD_isError(n)) return false;
    out->resize(n);
    return true;
  }
  out->assign(in);
  return true;
}

}  // namespace spanhouse::codec
