// A project of its own, built against an installed VLRNN: one exact VLRNN iteration on the
// project's own cell (indrnn.h, an IndRNN written as a RecurrentModule), then its gradients
// checked against full BPTT for VLRNN and checkpointing. Shapes: T = 256, B = 4, F = 8, H = 32.
#include "indrnn.h"

#include <vlrnn/verify/report.h>
#include <vlrnn/verify/verify_model.h>
#include <vlrnn/vlrnn.h>

#include <iostream>

int main() {
  torch::manual_seed(0);
  IndRnn model(/*input*/ 8, /*hidden*/ 32);
  auto head = vlrnn::make_head("ce", model.output_size(), /*classes*/ 5);

  vlrnn::SequenceBatch batch;
  batch.inputs = torch::randn({256, 4, 8});          // [T, B, F]
  batch.targets = torch::randint(0, 5, {256, 4});    // [T, B]

  auto method = vlrnn::make_method("vlrnn", {{"block_length", 16}});
  auto result = method->compute({model, *head, batch});
  std::cout << "vlrnn loss " << result.loss.item<double>() << "\n";

  const auto rows = vlrnn::verify::verify_model(model, *head, batch,
                                                {"vlrnn:block_length=16", "checkpoint"});
  std::cout << "client: " << vlrnn::verify::summary_line(rows) << "\n";
  for (const auto& row : rows) {
    if (!row.passed) return 1;
  }
  return 0;
}
