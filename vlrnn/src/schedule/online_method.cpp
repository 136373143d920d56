#include "vlrnn/schedule/online_method.h"

#include "vlrnn/schedule/online.h"

#include <fmt/format.h>

namespace vlrnn {

int64_t state_slot_bytes(const State& h0) {
  int64_t bytes = 0;
  for (const auto& t : h0) bytes += int64_t(t.numel()) * int64_t(t.element_size());
  return bytes;
}

OnlineOptions checked_online_options(OnlineOptions options) {
  TORCH_CHECK(options.slots >= 1, "online slots: expected s >= 1 state slots (h0's included), got ",
              options.slots);
  TORCH_CHECK(options.budget_bytes >= 0, "online budget_bytes: expected a number of bytes >= 1 "
              "(or 0: use slots), got ", options.budget_bytes);
  return options;
}

int64_t online_slots(const OnlineOptions& options, const State& h0) {
  if (options.budget_bytes == 0) return options.slots;
  return schedule::online_slots_for_bytes(options.budget_bytes, state_slot_bytes(h0),
                                          "online budget_bytes");
}

namespace {

std::string online_description(const OnlineOptions& options) {
  if (options.budget_bytes > 0) return fmt::format("online(bytes={})", options.budget_bytes);
  return fmt::format("online(s={})", options.slots);
}

}  // namespace

OnlineMethod::OnlineMethod(OnlineOptions options)
    : ScheduleMethod("online", online_description(checked_online_options(options)),
                     [options](const Workload& w) {
                       return schedule::online_schedule(w.batch.time_steps(),
                                                        online_slots(options, w.h0));
                     }) {}

}  // namespace vlrnn
