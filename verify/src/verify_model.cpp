#include "vlrnn/verify/verify_model.h"

#include "vlrnn/measure/out_of_memory.h"
#include "vlrnn/registry/methods.h"

namespace vlrnn::verify {

std::vector<VerifyOutcome> verify_model(RecurrentModule& model, OutputModule& head,
                                        const SequenceBatch& batch,
                                        const std::vector<std::string>& specs,
                                        const VerifyModelOptions& options) {
  const Workload workload{model, head, batch, options.h0, options.reduction};
  // What the rows show about the workload (VerifyCase::name()).
  VerifyCase row;
  row.model = options.label;
  row.head = head.name();
  row.reduction = options.reduction == Reduction::kMean ? "mean" : "sum";
  row.dtype = batch.inputs.scalar_type();
  row.h0_with_grad = options.h0.requires_grad();
  row.inputs_with_grad = batch.inputs.requires_grad();
  row.time_steps = batch.time_steps();
  row.batch = batch.batch_size();
  row.input_size = batch.inputs.size(-1);
  row.seed = options.seed;
  if (batch.has_lengths()) {
    const auto lengths = batch.lengths.to(torch::kCPU, torch::kLong).contiguous();
    row.lengths.assign(lengths.data_ptr<int64_t>(), lengths.data_ptr<int64_t>() + lengths.numel());
  }
  std::vector<VerifyOutcome> outcomes;
  for (const auto& spec : specs) {
    VerifyOutcome outcome;
    try {
      auto method = make_method_from_spec(spec);
      outcome = verify_against_full(*method, workload, options.seed);
    } catch (const std::exception& e) {
      outcome.error = measure::short_message(e);
      outcome.tolerance = tolerance_for(batch.inputs.scalar_type());
    }
    outcome.spec = row;
    outcome.spec.method = spec;
    outcomes.push_back(std::move(outcome));
  }
  return outcomes;
}

}  // namespace vlrnn::verify
