/* The MuJoCo twin's passive-force laws of hal/sim/fastloop.py lean_passive, compiled.

   hal/sim/native.py compiles this file on first use (cc -O2 -shared -fPIC -ffp-contract=off,
   no -ffast-math: IEEE semantics, no fused multiply-add), loads it with ctypes and installs one of
   the two functions below as mjcb_passive while the fast loop simulates. Each performs the
   numpy callback's operations in the same order; only libm's tanh/exp may differ from numpy's
   in the last bit.

   MuJoCo's callback is process-global: the context names the mjData it belongs to. Called with
   another mjData, a function calls the context's fallback (the Python bindings' trampoline,
   which runs the Python callback), as the numpy callback's `if dd is not d: return slow(m, dd)`. */
#include <math.h>
#include <stddef.h>

#include <mujoco/mujoco.h>

typedef void (*robident_fallback_t)(const mjModel* m, mjData* d);

/* set from Python (hal/sim/native.py _Context: the same fields in the same order) */
typedef struct {
  const mjData* data;            /* the twin's mjData */
  robident_fallback_t fallback;  /* called for any other mjData */
  int n;                         /* joints: qvel[0..n), qfrc_passive[0..n), act[0..n) */
  double eps_rad_s;              /* ideal: Coulomb smoothing velocity */
  double drift_fraction;         /* link: the friction's drift over the run */
  double drift_time_s;
  const double* fv;              /* viscous coefficients (ideal: link + motor) */
  const double* fc;              /* Coulomb levels (ideal: link + motor) */
  const double* off;             /* ideal: the motor side's offset */
  const double* inv_vs;          /* link: 1 / Stribeck velocity */
  const double* sa;              /* link: Stribeck amplitude */
  const double* lc;              /* link: load coefficient */
  /* elastic joints with motor-side friction: the rotor dofs n..2n-1 */
  const double* fvm;             /* the motor side's viscous coefficients */
  const double* fcm;             /* its Coulomb levels */
  const double* offm;            /* its offsets */
  const double* sam;             /* its Stribeck amplitude */
  const double* lcm;             /* its load coefficient */
} robident_passive_ctx;

/* the context of the callback installed now (NULL: none) */
robident_passive_ctx* robident_ctx = NULL;

/* numpy's sign: -1, 0 or 1, NaN for NaN (np.sign(-0.0) is 0.0) */
static double np_sign(double v) {
  if (v > 0.0) return 1.0;
  if (v < 0.0) return -1.0;
  if (v == 0.0) return 0.0;
  return v;
}

static int foreign(const robident_passive_ctx* c, const mjModel* m, mjData* d) {
  if (c != NULL && d == c->data) return 0;
  if (c != NULL && c->fallback != NULL) c->fallback(m, d);
  return 1;
}

/* ideal twin: qfrc_passive -= fv v + fc tanh(v / eps) + off */
void robident_ideal_passive(const mjModel* m, mjData* d) {
  const robident_passive_ctx* c = robident_ctx;
  if (foreign(c, m, d)) return;
  const double* v = d->qvel;
  double* qf = d->qfrc_passive;
  for (int i = 0; i < c->n; i++) {
    double coulomb = tanh(v[i] / c->eps_rad_s) * c->fc[i];
    double f = v[i] * c->fv[i];
    f = f + coulomb;
    f = f + c->off[i];
    qf[i] = qf[i] - f;
  }
}

static double drift_scale(const robident_passive_ctx* c, double t) {
  double r = (0.0 > t ? 0.0 : t) / c->drift_time_s;  /* Python's min(max(t, 0.0) / dts, 1.0) */
  r = 1.0 < r ? 1.0 : r;
  return 1.0 + c->drift_fraction * r;
}

/* realistic twin, link side (FrictionEffect.link_total_Nm):
   qfrc_passive -= scale (fv v + (fc + sa exp(-(v / vs)^2)) sign v) + lc |act| sign v + 0.0,
   scale = 1 + drift_fraction min(max(t, 0) / drift_time, 1) */
void robident_link_passive(const mjModel* m, mjData* d) {
  const robident_passive_ctx* c = robident_ctx;
  if (foreign(c, m, d)) return;
  double scale = drift_scale(c, d->time);
  const double* v = d->qvel;
  const mjtNum* act = d->act;
  double* qf = d->qfrc_passive;
  for (int i = 0; i < c->n; i++) {
    double x = v[i] * c->inv_vs[i];
    double mx = v[i] * -c->inv_vs[i];
    double strib = exp(mx * x) * c->sa[i];
    double load = fabs(act[i]) * c->lc[i];
    double visc = v[i] * c->fv[i];
    double sg = np_sign(v[i]);
    strib = strib + c->fc[i];
    strib = strib * sg;
    load = load * sg;
    visc = visc + strib;
    visc = visc * scale;
    visc = visc + load;
    visc = visc + 0.0;
    qf[i] = qf[i] - visc;
  }
}

/* realistic twin with elastic joints and motor-side friction (uncoupled; MujocoTwin._realistic_passive):
   the rotors (dofs n..2n-1, velocity w) first lose the motor side's unmodelled part
   (FrictionEffect.rotor_Nm: (scale (fc + sa exp(-(w / vs)^2)) + lc |act|) sign w - fc tanh(w / eps)
   + (scale - 1) fv w), then its ideal law fv w + fc tanh(w / eps) + off; the links lose the
   link-side law of robident_link_passive without its final + 0.0 */
void robident_elastic_motor_passive(const mjModel* m, mjData* d) {
  const robident_passive_ctx* c = robident_ctx;
  if (foreign(c, m, d)) return;
  double scale = drift_scale(c, d->time);
  int n = c->n;
  const double* w = d->qvel + n;
  const mjtNum* act = d->act;
  double* qf = d->qfrc_passive + n;
  for (int i = 0; i < n; i++) {
    double sg = np_sign(w[i]);
    double x = w[i] * c->inv_vs[i];
    double g = exp(-x * x) * c->sam[i];
    g = c->fcm[i] + g;
    g = scale * g;
    g = g + c->lcm[i] * fabs(act[i]);
    g = g * sg;
    g = g - c->fcm[i] * tanh(w[i] / c->eps_rad_s);
    g = g + (scale - 1.0) * c->fvm[i] * w[i];
    g = 0.0 + g;
    qf[i] = qf[i] - g;
    double side = c->fvm[i] * w[i] + c->fcm[i] * tanh(w[i] / c->eps_rad_s);
    side = side + c->offm[i];
    qf[i] = qf[i] - side;
  }
  const double* v = d->qvel;
  qf = d->qfrc_passive;
  for (int i = 0; i < n; i++) {
    double x = v[i] * c->inv_vs[i];
    double visc = c->fv[i] * v[i];
    double strib = c->fc[i] + c->sa[i] * exp(-x * x);
    double sg = np_sign(v[i]);
    visc = visc + strib * sg;
    visc = scale * visc;
    visc = visc + c->lc[i] * fabs(act[i]) * sg;
    qf[i] = qf[i] - visc;
  }
}
