#include "pipeline/filter/span_name_cap.h"

#include <vector>

namespace spanhouse::pipeline {

uint64_t SpanNameCap::Apply(SpanBatch& batch) {
  if (max_per_service_ == 0 || batch.empty()) return 0;
  // The set of each of the batch's resources, found once per resource.
  std::vector<NameSet*> sets(batch.resources.service_name.size(), nullptr);
  StrRef other{};
  bool other_added = false;
  uint64_t renamed = 0;
  // SDKs send runs of spans with one name: their check is done once.
  std::string_view last_name;
  uint32_t last_resource = UINT32_MAX;
  bool last_kept = false;

  std::lock_guard<std::mutex> lock(mu_);
  for (size_t i = 0; i < batch.span_count(); ++i) {
    const uint32_t r = batch.spans.resource[i];
    const std::string_view name = batch.Str(batch.spans.name[i]);
    bool kept;
    if (r == last_resource && name == last_name) {
      kept = last_kept;
    } else {
      NameSet*& set = sets[r];
      if (set == nullptr) {
        const std::string_view service = batch.Str(batch.resources.service_name[r]);
        auto it = services_.find(service);
        if (it == services_.end()) it = services_.emplace(std::string(service), NameSet()).first;
        set = &it->second;
      }
      kept = set->find(name) != set->end();
      if (!kept && set->size() < max_per_service_ && tracked_ < kMaxTrackedNames) {
        set->emplace(name);
        ++tracked_;
        kept = true;
      }
      last_resource = r;
      last_name = name;
      last_kept = kept;
    }
    if (!kept) {
      if (!other_added) {
        other = batch.AddString(kOtherSpanName);
        other_added = true;
        last_resource = UINT32_MAX;  // the arena may have moved: `last_name` is stale
      }
      batch.spans.name[i] = other;
      ++renamed;
    }
  }
  return renamed;
}

}  // namespace spanhouse::pipeline
