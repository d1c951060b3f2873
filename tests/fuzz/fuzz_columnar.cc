// libFuzzer target: a SpanBatch's columnar bytes (model/columnar.cc), what the durable queue
// logs for a request it reads back, read from whatever the input is.
//
// Invariants besides "no crash, no UB, nothing read out of bounds": bytes that are refused
// leave the batch empty; a batch read back is whole (every string, range and index inside
// it: reading every span's strings, attributes, events and links touches only its memory),
// and written again and read back it is the same batch.
#include <string>
#include <string_view>

#include "invariants.h"
#include "model/span_batch.h"

namespace spanhouse::fuzz {

int TestOne(std::string_view data) {
  std::string bytes(data);
  SpanBatch b;
  std::string why;
  if (!b.ReadColumnar(bytes, &why)) {
    if (!b.empty()) Fail("refused bytes left spans", why);
    return 0;
  }
  // Each string's first and last byte read: ASan reports one that lies outside.
  unsigned touched = 0;
  auto str = [&](StrRef ref) {
    const std::string_view v = b.Str(ref);
    if (!v.empty()) touched += static_cast<unsigned char>(v.front()) ^ v.back();
  };
  auto attrs = [&](const AttrColumns& cols, Range r) {
    for (uint32_t a = r.begin; a < r.end; ++a) {
      str(cols.key[a]);
      str(cols.value[a]);
    }
  };
  for (uint32_t s = 0; s < b.span_count(); ++s) {
    str(b.spans.name[s]);
    str(b.spans.trace_state[s]);
    str(b.spans.status_message[s]);
    attrs(b.span_attrs, b.spans.attrs[s]);
    const uint32_t r = b.spans.resource[s];
    str(b.resources.service_name[r]);
    attrs(b.resource_attrs, b.resources.attrs[r]);
    attrs(b.scope_attrs, b.scopes.attrs[b.spans.scope[s]]);
    for (uint32_t e = b.spans.events[s].begin; e < b.spans.events[s].end; ++e) {
      attrs(b.event_attrs, b.events.attrs[e]);
    }
    for (uint32_t l = b.spans.links[s].begin; l < b.spans.links[s].end; ++l) {
      attrs(b.link_attrs, b.links.attrs[l]);
    }
  }
  volatile unsigned keep = touched;
  (void)keep;
  std::string again;
  b.AppendColumnar(&again);
  SpanBatch back;
  if (!back.ReadColumnar(again, &why)) Fail("a batch read back does not read back again", why);
  if (!b.LogicallyEquals(back, &why)) Fail("a batch read back reads back differently", why);
  return 0;
}

}  // namespace spanhouse::fuzz
