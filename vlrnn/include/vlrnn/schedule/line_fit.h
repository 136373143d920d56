#pragma once
// A least-squares line y = intercept + slope · x through points added one at a time: the cost
// model's fits over measured steps (NOTE [ Other batches of the workload ] in cost_model.cpp)
// and over measured tapes (the tape growth, cost_measurement.cpp).

namespace vlrnn::schedule {

struct LineFit {
  void add(double x, double y) {
    n_ += 1, sx_ += x, sy_ += y, sxx_ += x * x, sxy_ += x * y;
  }
  // 0 when the points have fewer than two distinct x (a flat line at their mean).
  double slope() const {
    const double spread = n_ * sxx_ - sx_ * sx_;
    return spread > 0 ? (n_ * sxy_ - sx_ * sy_) / spread : 0.0;
  }
  // `if_empty` when no point was added.
  double intercept(double if_empty) const {
    return n_ > 0 ? (sy_ - slope() * sx_) / n_ : if_empty;
  }

 private:
  double n_ = 0, sx_ = 0, sy_ = 0, sxx_ = 0, sxy_ = 0;
};

}  // namespace vlrnn::schedule
