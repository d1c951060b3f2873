#include "codec/compression.h"

#include <zlib.h>
#include <zstd.h>
#include <zstd_errors.h>

#include <cctype>
#include <memory>

namespace spanhouse::codec {

namespace {

Status TooLarge(size_t max_bytes) {
  return Status::TooLarge("decompressed body exceeds " + std::to_string(max_bytes) + " bytes");
}

Status Inflate(std::string_view in, size_t max_bytes, std::string* out) {
  z_stream zs{};
  // 15 + 32: a gzip or a zlib ("deflate" in HTTP) header, detected.
  if (inflateInit2(&zs, 15 + 32) != Z_OK) return Status::Internal("inflateInit failed");
  zs.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  zs.avail_in = static_cast<uInt>(in.size());
  out->clear();
  char buf[64 * 1024];
  int ret = Z_OK;
  while (true) {
    if (ret == Z_STREAM_END) {
      if (zs.avail_in == 0) break;
      // A gzip body may hold several members back to back (RFC 1952); any
      // other bytes after the end of the stream are garbage.
      if (zs.avail_in < 2 || zs.next_in[0] != 0x1f || zs.next_in[1] != 0x8b) {
        inflateEnd(&zs);
        return Status::Invalid("trailing bytes after the end of the compressed body");
      }
      inflateReset(&zs);
    }
    zs.next_out = reinterpret_cast<Bytef*>(buf);
    zs.avail_out = sizeof(buf);
    ret = inflate(&zs, Z_NO_FLUSH);
    if (ret != Z_OK && ret != Z_STREAM_END) {
      inflateEnd(&zs);
      if (ret == Z_BUF_ERROR) return Status::Invalid("truncated gzip body");
      return Status::Invalid(std::string("corrupt gzip body: ") +
                             (zs.msg ? zs.msg : "inflate failed"));
    }
    size_t produced = sizeof(buf) - zs.avail_out;
    if (out->size() + produced > max_bytes) {
      inflateEnd(&zs);
      return TooLarge(max_bytes);
    }
    out->append(buf, produced);
    if (ret == Z_OK && zs.avail_in == 0 && produced == 0) {
      inflateEnd(&zs);
      return Status::Invalid("truncated gzip body");
    }
  }
  inflateEnd(&zs);
  return Status::Ok();
}

Status Unzstd(std::string_view in, size_t max_bytes, std::string* out) {
  std::unique_ptr<ZSTD_DCtx, size_t (*)(ZSTD_DCtx*)> ctx(ZSTD_createDCtx(), ZSTD_freeDCtx);
  if (!ctx) return Status::Internal("ZSTD_createDCtx failed");
  ZSTD_DCtx_setParameter(ctx.get(), ZSTD_d_windowLogMax, kZstdMaxWindowLog);
  ZSTD_inBuffer input{in.data(), in.size(), 0};
  out->clear();
  char buf[64 * 1024];
  size_t ret = 1;
  while (input.pos < input.size || ret != 0) {
    ZSTD_outBuffer output{buf, sizeof(buf), 0};
    ret = ZSTD_decompressStream(ctx.get(), &output, &input);
    if (ZSTD_isError(ret)) {
      // A frame that asks for a bigger window than we allow is not corrupt:
      // it is too large for this server, like a body over the size cap.
      if (ZSTD_getErrorCode(ret) == ZSTD_error_frameParameter_windowTooLarge) {
        return Status::TooLarge("zstd frame needs a window over " +
                                std::to_string(1u << kZstdMaxWindowLog >> 20) +
                                " MiB (window log " + std::to_string(kZstdMaxWindowLog) +
                                "): compress with a smaller window");
      }
      return Status::Invalid(std::string("corrupt zstd body: ") + ZSTD_getErrorName(ret));
    }
    if (out->size() + output.pos > max_bytes) return TooLarge(max_bytes);
    out->append(buf, output.pos);
    if (input.pos == input.size && output.pos == 0 && ret != 0) {
      return Status::Invalid("truncated zstd body");
    }
  }
  return Status::Ok();
}

}  // namespace

Status Decompress(std::string_view encoding_as_sent, std::string_view in, size_t max_bytes,
                  std::string* out) {
  // Content codings are case-insensitive (RFC 9110).
  std::string encoding(encoding_as_sent);
  for (char& c : encoding) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  if (encoding.empty() || encoding == "identity") {
    if (in.size() > max_bytes) return TooLarge(max_bytes);
    out->assign(in);
    return Status::Ok();
  }
  if (encoding == "gzip" || encoding == "x-gzip") return Inflate(in, max_bytes, out);
  if (encoding == "deflate") return Inflate(in, max_bytes, out);
  if (encoding == "zstd") return Unzstd(in, max_bytes, out);
  return {StatusCode::kUnsupportedMedia, "unsupported Content-Encoding '" +
                                             std::string(encoding_as_sent) +
                                             "' (use gzip, zstd or none)"};
}

}  // namespace spanhouse::codec
