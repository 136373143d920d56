// Trains nothing: one exact VLRNN iteration on a built-in LSTM, from an installed VLRNN.
#include <vlrnn/vlrnn.h>

#include <iostream>

int main() {
  torch::manual_seed(0);
  auto model = vlrnn::make_model({"lstm", /*input*/ 8, /*hidden*/ 32, /*layers*/ 1});
  auto head = vlrnn::make_head("ce", model->output_size(), /*classes*/ 5);

  vlrnn::SequenceBatch batch;
  batch.inputs = torch::randn({256, 4, 8});          // [T, B, F]
  batch.targets = torch::randint(0, 5, {256, 4});    // [T, B]

  auto method = vlrnn::make_method("vlrnn", {{"block", 16}});
  auto result = method->compute({*model, *head, batch});
  std::cout << "vlrnn loss " << result.loss.item<double>() << "\n";
  return 0;
}
