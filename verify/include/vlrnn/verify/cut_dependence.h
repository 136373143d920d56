#pragma once
// Does a model's output depend on where the sequence is cut into blocks (forward() calls)?
// A block method is exact only for a model that computes the same function wherever a
// block starts; the usual way to break that is drawing random numbers (dropout) once per
// call instead of once per step. Shapes: T steps, B sequences.
//
// NOTE [ Cut dependence, whatever the generator's layout ]
// The direct check runs, from one generator state, one forward over [0, T) and two
// forwards over [0, c) and [c, T), c = T / 2, and compares outputs and final states. It
// sees per-call draws only where this build lays the random numbers out differently for
// one [T, B, H] draw than for draws of [c, B, H] and [T - c, B, H]. Debian's CPU LibTorch
// does not: its Bernoulli (dropout) consumes the generator element by element, so one
// [Tb, B, H] mask per call equals Tb masks of [B, H] drawn step by step, and such a model
// passes here while a CUDA build (Philox offsets reserved per call) or an MKL build (a
// stream seeded per call) gives other masks for other cuts.
//
// The layout-independent check repeats the comparison with every random operation (an
// ATen op taking a Generator, seen through a thread-local RecordFunction observer) followed
// by one extra draw from the generator. A model that keeps the contract draws step by step:
// the same random operations in the same order however the sequence is cut, so the extra
// draws shift both runs alike and they still agree. A model that draws once per call makes
// one draw in the uncut run and two in the cut one, so its second piece starts from another
// generator position and the runs differ, whatever the layout of one draw. No model is
// called with a block offset or a mask: only the generator is perturbed, between random
// operations, as a generator that reserves numbers per call does.

#include "vlrnn/methods/gradient_method.h"

#include <cstdint>
#include <string>

namespace vlrnn::verify {

struct CutDependence {
  int64_t cut = 0;            // c: the second forward starts at this step (0: T < 2, unchecked)
  double here = 0.0;          // relative difference, cut vs uncut, with this build's generator
  double any_layout = 0.0;    // the same with each random operation shifting the generator
  int64_t random_ops = 0;     // random operations the perturbed forwards made (0: no draws)
};

// Both checks of the NOTE on `workload`'s model, inputs and h0, from generator seed `seed`
// (no gradients; the generators are restored afterwards). Relative differences are the
// largest over z and the final state, each relative to its largest entry.
CutDependence measure_cut_dependence(const Workload& workload, uint64_t seed);

// For a failing case: the plain-words cause when the outputs depend on the cut on this
// build (`here` beyond `tolerance`), else "".
std::string cut_dependence_diagnosis(const CutDependence& cut, int64_t time_steps,
                                     double tolerance);

// For a model that passes here but draws per call (`any_layout` beyond `tolerance` while
// `here` is not): a warning that the pass does not carry over to a GPU or an MKL build;
// else "".
std::string per_call_draws_warning(const CutDependence& cut, double tolerance);

}  // namespace vlrnn::verify
