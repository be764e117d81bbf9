#pragma once
// Forward-mode dual numbers for the float64 reference: running the reference on
// Dual = (value, tangent) gives the exact directional derivative of its output along
// the tangent seeded into the inputs. Tests compare <kernel gradient, direction> with it,
// which checks every backward at any size with one reference evaluation.
#include <cmath>

namespace lcr::ref {

struct Dual {
  double v = 0, t = 0;
  Dual() = default;
  Dual(double value) : v(value) {}  // NOLINT: constants lift implicitly
  Dual(double value, double tangent) : v(value), t(tangent) {}
  Dual& operator+=(Dual o) { return *this = *this + o; }
  Dual& operator-=(Dual o) { return *this = *this - o; }
  Dual& operator*=(Dual o) { return *this = *this * o; }
  Dual& operator/=(Dual o) { return *this = *this / o; }
  friend Dual operator+(Dual a, Dual b) { return {a.v + b.v, a.t + b.t}; }
  friend Dual operator-(Dual a, Dual b) { return {a.v - b.v, a.t - b.t}; }
  friend Dual operator-(Dual a) { return {-a.v, -a.t}; }
  friend Dual operator*(Dual a, Dual b) { return {a.v * b.v, a.t * b.v + a.v * b.t}; }
  friend Dual operator/(Dual a, Dual b) {
    return {a.v / b.v, (a.t * b.v - a.v * b.t) / (b.v * b.v)};
  }
  friend bool operator<(Dual a, Dual b) { return a.v < b.v; }
  friend bool operator>(Dual a, Dual b) { return a.v > b.v; }
  friend bool operator<=(Dual a, Dual b) { return a.v <= b.v; }
  friend bool operator>=(Dual a, Dual b) { return a.v >= b.v; }
};

inline double value(double x) { return x; }
inline double value(Dual x) { return x.v; }
inline double tangent(double) { return 0; }
inline double tangent(Dual x) { return x.t; }

inline Dual exp(Dual a) {
  const double e = std::exp(a.v);
  return {e, e * a.t};
}
inline Dual log(Dual a) { return {std::log(a.v), a.t / a.v}; }
inline Dual log1p(Dual a) { return {std::log1p(a.v), a.t / (1 + a.v)}; }
inline Dual sin(Dual a) { return {std::sin(a.v), std::cos(a.v) * a.t}; }
inline Dual cos(Dual a) { return {std::cos(a.v), -std::sin(a.v) * a.t}; }
inline Dual sqrt(Dual a) {
  const double s = std::sqrt(a.v);
  return {s, a.t / (2 * s)};
}
inline Dual tanh(Dual a) {
  const double th = std::tanh(a.v);
  return {th, (1 - th * th) * a.t};
}
using std::cos;
using std::exp;
using std::log;
using std::log1p;
using std::sin;
using std::sqrt;
using std::tanh;

// The smooth functions the schemes use, written once for double and Dual.
template <class T>
T sigmoid(T x) {
  return T(1) / (T(1) + exp(-x));
}
template <class T>
T softplus(T x) {
  return x > T(0) ? x + log1p(exp(-x)) : log1p(exp(x));
}
template <class T>
T silu(T x) {
  return x * sigmoid(x);
}

}  // namespace lcr::ref
