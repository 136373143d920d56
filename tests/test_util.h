#pragma once
// Helpers shared by the tests.

#include "vlrnn/vlrnn.h"

#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <vector>

namespace vlrnn::testing {

// Expects `fn` to throw, with a message holding every one of `fragments` (the argument's
// name, what was expected, what came).
inline void expect_error_mentions(const std::function<void()>& fn,
                                  const std::vector<std::string>& fragments) {
  try {
    fn();
  } catch (const std::exception& e) {
    const std::string message = e.what();
    for (const auto& fragment : fragments) {
      EXPECT_NE(message.find(fragment), std::string::npos)
          << "error message lacks \"" << fragment << "\":\n" << message;
    }
    return;
  }
  ADD_FAILURE() << "expected an error mentioning \"" << fragments.front() << "\", got none";
}

// A small model, head and batch for tests: F = 3, H = 4, classes = 3.
struct SmallProblem {
  std::shared_ptr<RecurrentModule> model;
  std::shared_ptr<OutputModule> head;
  SequenceBatch batch;

  explicit SmallProblem(const std::string& kind = "lstm", int64_t steps = 12, int64_t batch_size = 2,
                        torch::ScalarType dtype = torch::kFloat64, int64_t layers = 1) {
    torch::manual_seed(7);
    model = make_model({kind, 3, 4, layers});
    model->to(dtype);
    head = make_head("ce", model->output_size(), 3);
    head->to(dtype);
    batch.inputs = torch::randn({steps, batch_size, 3}, torch::dtype(dtype));
    batch.targets = torch::randint(0, 3, {steps, batch_size}, torch::kLong);
  }
  Workload workload(State h0 = {}, Reduction reduction = Reduction::kMean) const {
    return Workload{*model, *head, batch, std::move(h0), reduction};
  }
};

}  // namespace vlrnn::testing
