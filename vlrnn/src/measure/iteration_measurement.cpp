#include "vlrnn/measure/iteration_measurement.h"

#include "vlrnn/measure/timer.h"

namespace vlrnn::measure {
namespace {

void drop_grad(const torch::Tensor& t) {
  if (t.defined() && t.grad().defined()) t.mutable_grad() = torch::Tensor();
}

}  // namespace

void clear_gradients(const Workload& workload) {
  for (const auto& p : workload.model.parameters()) drop_grad(p);
  for (const auto& p : workload.head.parameters()) drop_grad(p);
  for (const auto& h : workload.h0) drop_grad(h);
  drop_grad(workload.batch.inputs);
}

IterationMeasurement measure_iteration(GradientMethod& method, const Workload& workload,
                             torch::Device device) {
  // NOTE [ Preparing is not the step ]: the planner's calibration, for instance, happens
  // here, outside the timer and the memory scope.
  method.prepare(workload);
  clear_gradients(workload);
  IterationMeasurement out;
  DeviceTimer timer(device);
  IterationMemoryScope memory(device);
  timer.start();
  {
    const GradientResult result = method.compute(workload);
    out.counters = result.counters;
    out.loss = result.loss;
  }
  out.seconds = timer.stop();
  out.memory = memory.finish();
  return out;
}

}  // namespace vlrnn::measure
