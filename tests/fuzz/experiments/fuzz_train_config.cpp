// Fuzz target: a training config file's text (`vlrnn train CONFIG`): JSON with comments,
// then parse_train_config (which also builds the task, model and head once to check that
// they fit together) and every run's label and learning rate.
#include "fuzz_util.h"

#include "lib/json_fields.h"
#include "lib/train_config.h"

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  vlrnn::fuzz::skip_error_backtraces();
  return 0;
}

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace vlrnn::experiments;
  try {
    const auto json = json_fields::parse_json_text(vlrnn::fuzz::as_text(data, size), "fuzz.json");
    const auto config = parse_train_config(json, "fuzz");
    for (const auto& run : config.runs) {
      run.label();
      config.optimizer.lr_for_batch(run.batch);
      config.lr_schedule.lr_at(config.optimizer.lr, config.optimizer_steps - 1,
                               config.optimizer_steps);
    }
  } catch (const c10::Error&) {
  }
  return 0;
}
