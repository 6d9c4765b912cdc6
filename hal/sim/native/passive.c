/* The MuJoCo twin's passive-force laws of hal/sim/fastloop.py lean_passive, compiled.

   hal/sim/native.py compiles this file on first use (cc -O2 -shared -fPIC -ffp-contract=off,
   no -ffast-math: IEEE semantics, no contraction into fused multiply-adds), loads it with ctypes
   and installs one of the functions below as mjcb_passive while the fast loop simulates. Each
   performs the numpy callback's operations in the same order; only libm's tanh/exp/sin/cos may
   differ from numpy's in the last bit. The one explicit fma() is the coupling matrix's inexact
   product (matvec below), rounded once as numpy's BLAS does.

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
  /* the general laws (robident_general_ideal_passive, robident_general_passive) */
  int flags;                     /* GEN_* below */
  int te_lines;                  /* transmission error: tooth lines per axis */
  double te_inv_blend;           /* its 1 / flank blend velocity */
  const double* sp_on;           /* springs: 1 where a joint has one, else 0 */
  const double* sp_q0;           /* its rest angle */
  const double* sp_l;            /* its levers l, r */
  const double* sp_r;
  const double* sp_force;        /* its force (0 where none: the spring torque is -shape * force) */
  const double* cm;              /* the coupling matrix C (n x n, row-major) */
  const double* cm_exact;        /* 1 where its entry is 0 or a power of two (the product is exact) */
  const double* ci;              /* C^-1 */
  const double* ci_exact;
  const double* te_w;            /* transmission error: 2 pi k (n x lines) */
  const double* te_phase;        /* phases (n x lines x 2 flanks) */
  const double* te_aw;           /* a w */
  const double* te_aw2;          /* -a w w */
  const double* te_J;            /* the held axis inertia (hal/sim/fastloop.py copies it in) */
} robident_passive_ctx;

/* robident_passive_ctx.flags */
#define GEN_ELASTIC 1      /* rotor dofs n..2n-1 behind a MuJoCo gear spring */
#define GEN_COUPLED 2      /* C is not the identity */
#define GEN_SPRINGS 4      /* gravity-compensation springs */
#define GEN_LINK_FR 8      /* the ideal law has link-side friction */
#define GEN_MOTOR_FR 16    /* ... motor-side friction or offsets */
#define GEN_FE 32          /* the unmodelled friction (FrictionEffect) */
#define GEN_FE_LINK 64     /* ... with a link side (fv, fc, sa, lc) */
#define GEN_FE_MOTOR 128   /* ... with a motor side (fvm, fcm, sam, lcm) */
#define GEN_FUSED 256      /* ... fused into the link side (FrictionEffect.link_total_Nm) */
#define GEN_TE 512         /* the gears' transmission error */
#define GEN_MAXN 16        /* joints at most (native.py checks) */

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

/* ------------------------------------------------------------------ the general laws
   The twins' general numpy callbacks (MujocoTwin._passive_callback's general branch and
   _realistic_passive with its transmission error), for robots with viscous + Coulomb friction:
   springs, coupled joints (numpy's @ with the coupling matrix), the unmodelled friction on
   either side, elastic joints, the transmission error. */

/* y = A x (transpose 0) or A^T x (transpose 1), A n x n row-major: numpy's `A @ x`, `x @ A^T`
   (transpose 0) and `A.T @ x`, `x @ A` (transpose 1). The exact products (an entry 0 or a power
   of two) are summed first in index order, then the others are added with one rounding each
   (fma). With at most one inexact entry per row, as every coupling matrix here (the CLOOS
   differential gear), this is the correctly rounded product that numpy's BLAS returns; all
   products are formed, so 0 x inf gives NaN as numpy's. */
static void matvec(const double* A, const double* exact, const double* x, double* y, int n, int transpose) {
  for (int i = 0; i < n; i++) {
    double acc = 0.0;
    for (int j = 0; j < n; j++) {
      int k = transpose ? j * n + i : i * n + j;
      if (exact[k] != 0.0) acc = acc + A[k] * x[j];
    }
    for (int j = 0; j < n; j++) {
      int k = transpose ? j * n + i : i * n + j;
      if (exact[k] == 0.0) acc = fma(A[k], x[j], acc);
    }
    y[i] = acc;
  }
}

/* robident_twin.model.dynamics.spring_torque_Nm(spec, q)[0]: -shape(q) * force,
   shape = l r sin(a) / sqrt(l l + r r - 2 l r cos(a)), a = q - q0 (0 where no spring) */
static void spring_torque(const robident_passive_ctx* c, const double* q, double* out) {
  for (int i = 0; i < c->n; i++) {
    double shape = 0.0;
    if (c->sp_on[i] != 0.0) {
      double l = c->sp_l[i], r = c->sp_r[i];
      double a = q[i] - c->sp_q0[i];
      double num = (l * r) * sin(a);
      double den = (l * l + r * r) - ((2.0 * l) * r) * cos(a);
      shape = num / sqrt(den);
    }
    out[i] = -shape * c->sp_force[i];
  }
}

/* the ideal law of one side (MujocoTwin._realistic_passive side(), dynamics.link_friction_Nm /
   motor_side_friction_Nm): fv v + fc tanh(v / eps) + o */
static double side(double v, double fv, double fc, double o, double eps) {
  double f = fv * v + fc * tanh(v / eps);
  return f + o;
}

/* FrictionEffect.joint_Nm's g of one side: (scale (fc + sa e^(-x x)) + lc ld) sign v
   - fc tanh(v / eps) + (scale - 1) fv v, x = v / vs */
static double fe_g(double v, double ld, double fc, double fv, double sa, double lc, double inv_vs,
                   double scale, double eps) {
  double x = v * inv_vs;
  double g = fc + sa * exp(-x * x);
  g = scale * g + lc * ld;
  g = g * np_sign(v);
  g = g - fc * tanh(v / eps);
  return g + ((scale - 1.0) * fv) * v;
}

/* FrictionEffect.joint_Nm(dq, t, act) with the sides that `link`/`motor` select, into f
   (f starts at 0.0 as numpy's; no side: zeros) */
static void fe_joint(const robident_passive_ctx* c, const double* dq, const double* act, double scale,
                     int link, int motor, double* f) {
  int n = c->n, coupled = c->flags & GEN_COUPLED;
  double ld[GEN_MAXN], v[GEN_MAXN], g[GEN_MAXN], h[GEN_MAXN];
  for (int i = 0; i < n; i++) f[i] = 0.0;
  if (link && (c->flags & GEN_FE_LINK)) {
    for (int i = 0; i < n; i++) ld[i] = fabs(act[i]);
    if (coupled) {  /* load @ ci */
      double l2[GEN_MAXN];
      matvec(c->ci, c->ci_exact, ld, l2, n, 1);
      for (int i = 0; i < n; i++) ld[i] = l2[i];
    }
    for (int i = 0; i < n; i++)
      f[i] = f[i] + fe_g(dq[i], ld[i], c->fc[i], c->fv[i], c->sa[i], c->lc[i], c->inv_vs[i], scale, c->eps_rad_s);
  }
  if (motor && (c->flags & GEN_FE_MOTOR)) {
    if (coupled) matvec(c->ci, c->ci_exact, dq, v, n, 0);  /* dq @ ci.T */
    else for (int i = 0; i < n; i++) v[i] = dq[i];
    for (int i = 0; i < n; i++)
      g[i] = fe_g(v[i], fabs(act[i]), c->fcm[i], c->fvm[i], c->sam[i], c->lcm[i], c->inv_vs[i], scale, c->eps_rad_s);
    if (coupled) matvec(c->ci, c->ci_exact, g, h, n, 1);  /* g @ ci */
    else for (int i = 0; i < n; i++) h[i] = g[i];
    for (int i = 0; i < n; i++) f[i] = f[i] + h[i];
  }
}

/* TransmissionErrorEffect.motor_Nm(theta, dtheta, ddtheta) with the held inertia, into out */
static void te_motor(const robident_passive_ctx* c, const double* th, const double* v, const double* a,
                     double* out) {
  int k = c->te_lines;
  for (int i = 0; i < c->n; i++) {
    double fl[2];
    for (int s = 0; s < 2; s++) {
      double acc = 0.0;
      for (int j = 0; j < k; j++) {
        int ij = i * k + j, ijs = ij * 2 + s;
        double ph = c->te_w[ij] * th[i] + c->te_phase[ijs];
        double t1 = (c->te_aw2[ijs] * sin(ph)) * (v[i] * v[i]);
        double t2 = ((2.0 * c->te_aw[ijs]) * cos(ph)) * a[i];
        double term = t1 + t2;
        acc = j == 0 ? term : acc + term;  /* numpy's sum over the lines: from the first, in order */
      }
      fl[s] = acc;
    }
    double up = 0.5 * (1.0 + tanh(v[i] * c->te_inv_blend));
    out[i] = c->te_J[i] * (up * fl[0] + (1.0 - up) * fl[1]);
  }
}

/* MujocoTwin._passive_callback, general branch (ideal twin, rigid joints):
   qfrc_passive -= link_friction(v) - spring_torque(q) + C^-T motor_side_friction(C^-1 v) */
void robident_general_ideal_passive(const mjModel* m, mjData* d) {
  const robident_passive_ctx* c = robident_ctx;
  if (foreign(c, m, d)) return;
  int n = c->n;
  const double* v = d->qvel;
  double f[GEN_MAXN], st[GEN_MAXN], vm[GEN_MAXN], fm[GEN_MAXN], g[GEN_MAXN];
  spring_torque(c, d->qpos, st);
  for (int i = 0; i < n; i++) {
    double s = tanh(v[i] / c->eps_rad_s);
    f[i] = c->fv[i] * v[i] + c->fc[i] * s;
    f[i] = f[i] - st[i];
  }
  if (c->flags & GEN_COUPLED) matvec(c->ci, c->ci_exact, v, vm, n, 0);  /* to_motor: v @ ci.T */
  else for (int i = 0; i < n; i++) vm[i] = v[i];
  for (int i = 0; i < n; i++) fm[i] = side(vm[i], c->fvm[i], c->fcm[i], c->offm[i], c->eps_rad_s);
  matvec(c->ci, c->ci_exact, fm, g, n, 1);  /* cinv_t @ fm (also the identity's) */
  for (int i = 0; i < n; i++) {
    f[i] = f[i] + g[i];
    d->qfrc_passive[i] = d->qfrc_passive[i] - f[i];
  }
}

/* MujocoTwin._realistic_passive for viscous + Coulomb friction (its `plain` branches), then
   _with_transmission_error's torque, in the numpy callback's order */
void robident_general_passive(const mjModel* m, mjData* d) {
  const robident_passive_ctx* c = robident_ctx;
  if (foreign(c, m, d)) return;
  int n = c->n, fl = c->flags;
  int el = fl & GEN_ELASTIC, coupled = fl & GEN_COUPLED;
  const double* q = d->qpos;
  const double* v = d->qvel;
  const double* w = d->qvel + n;
  const mjtNum* act = d->act;
  double* qf = d->qfrc_passive;
  double f[GEN_MAXN], st[GEN_MAXN], a[GEN_MAXN], b[GEN_MAXN], e[GEN_MAXN];
  double scale = (fl & GEN_FE) ? drift_scale(c, d->time) : 1.0;
  if (el && (fl & GEN_FE) && (fl & GEN_FE_MOTOR)) {  /* fe.rotor_Nm(w, t, act, C) */
    matvec(c->cm, c->cm_exact, w, a, n, 0);  /* C @ w */
    fe_joint(c, a, act, scale, 0, 1, b);  /* motor_part_Nm */
    if (coupled) matvec(c->cm, c->cm_exact, b, e, n, 1);  /* C.T @ f */
    else for (int i = 0; i < n; i++) e[i] = b[i];
    for (int i = 0; i < n; i++) qf[n + i] = qf[n + i] - e[i];
  }
  if (fl & GEN_SPRINGS) spring_torque(c, q, st);
  if (fl & GEN_FUSED) {  /* uncoupled, the unmodelled law fused into the link side */
    for (int i = 0; i < n; i++) {  /* fe.link_total_Nm */
      double x = v[i] * c->inv_vs[i];
      double sg = np_sign(v[i]);
      double h = (c->fc[i] + c->sa[i] * exp(-x * x)) * sg;
      f[i] = scale * (c->fv[i] * v[i] + h) + (c->lc[i] * fabs(act[i])) * sg;
    }
    if (!el && (fl & GEN_FE_MOTOR)) {  /* + fe.motor_part_Nm */
      fe_joint(c, v, act, scale, 0, 1, b);
      for (int i = 0; i < n; i++) f[i] = f[i] + b[i];
    } else if (!el) {  /* + 0.0 (no motor side) */
      for (int i = 0; i < n; i++) f[i] = f[i] + 0.0;
    }
    if (fl & GEN_SPRINGS) for (int i = 0; i < n; i++) f[i] = f[i] - st[i];
    if (!el && (fl & GEN_MOTOR_FR))
      for (int i = 0; i < n; i++) f[i] = f[i] + side(v[i], c->fvm[i], c->fcm[i], c->offm[i], c->eps_rad_s);
    else if (el && (fl & GEN_MOTOR_FR))
      for (int i = 0; i < n; i++) qf[n + i] = qf[n + i] - side(w[i], c->fvm[i], c->fcm[i], c->offm[i], c->eps_rad_s);
  } else {
    for (int i = 0; i < n; i++)
      f[i] = (fl & GEN_LINK_FR) ? side(v[i], c->fv[i], c->fc[i], 0.0, c->eps_rad_s) : 0.0;
    if (fl & GEN_SPRINGS) for (int i = 0; i < n; i++) f[i] = f[i] - st[i];
    if (!el && (fl & GEN_MOTOR_FR)) {
      if (coupled) matvec(c->ci, c->ci_exact, v, a, n, 0);  /* cinv @ v */
      else for (int i = 0; i < n; i++) a[i] = v[i];
      for (int i = 0; i < n; i++) b[i] = side(a[i], c->fvm[i], c->fcm[i], c->offm[i], c->eps_rad_s);
      if (coupled) matvec(c->ci, c->ci_exact, b, e, n, 1);  /* cinv_t @ fm */
      else for (int i = 0; i < n; i++) e[i] = b[i];
      for (int i = 0; i < n; i++) f[i] = f[i] + e[i];
    }
    if (el && (fl & GEN_MOTOR_FR))
      for (int i = 0; i < n; i++) qf[n + i] = qf[n + i] - side(w[i], c->fvm[i], c->fcm[i], c->offm[i], c->eps_rad_s);
    if (fl & GEN_FE) {  /* fe.joint_Nm (rigid) or fe.link_part_Nm (elastic: 0.0 without a link side) */
      if (el && !(fl & GEN_FE_LINK)) {
        for (int i = 0; i < n; i++) f[i] = f[i] + 0.0;
      } else {
        fe_joint(c, v, act, scale, 1, !el, b);
        for (int i = 0; i < n; i++) f[i] = f[i] + b[i];
      }
    }
  }
  for (int i = 0; i < n; i++) qf[i] = qf[i] - f[i];
  if (fl & GEN_TE) {
    if (el) {  /* on the rotors */
      te_motor(c, d->qpos + n, w, d->qacc + n, e);
      for (int i = 0; i < n; i++) qf[n + i] = qf[n + i] - e[i];
    } else if (coupled) {  /* te.joint_Nm: ci.T @ motor_Nm(ci @ q, ci @ v, ci @ a) */
      double tq[GEN_MAXN], tv[GEN_MAXN], ta[GEN_MAXN];
      matvec(c->ci, c->ci_exact, q, tq, n, 0);
      matvec(c->ci, c->ci_exact, v, tv, n, 0);
      matvec(c->ci, c->ci_exact, d->qacc, ta, n, 0);
      te_motor(c, tq, tv, ta, a);
      matvec(c->ci, c->ci_exact, a, e, n, 1);
      for (int i = 0; i < n; i++) qf[i] = qf[i] - e[i];
    } else {
      te_motor(c, q, v, d->qacc, e);
      for (int i = 0; i < n; i++) qf[i] = qf[i] - e[i];
    }
  }
}

/* ------------------------------------------------------------------ the torque channels' anti-aliasing filter
   Second-order sections run in place over x (n_signals rows of n_samples, C order) from the state zi
   (n_signals x n_sections x 2), transposed direct form II: the operations of scipy.signal.sosfilt's
   kernel (scipy/signal/_sosfilt.pyx) in its order, so the result is the same to the bit. sos: n_sections
   rows (b0 b1 b2 a0 a1 a2), a0 = 1. */
void robident_sosfilt(const double *sos, int n_sections, double *x, int n_signals, long n_samples, double *zi) {
  for (int i = 0; i < n_signals; i++) {
    double *xi = x + (long)i * n_samples, *z = zi + (long)i * n_sections * 2;
    for (long k = 0; k < n_samples; k++) {
      double x_cur = xi[k];
      for (int s = 0; s < n_sections; s++) {
        const double *c = sos + 6 * s;
        double x_new = c[0] * x_cur + z[2 * s];
        z[2 * s] = c[1] * x_cur - c[4] * x_new + z[2 * s + 1];
        z[2 * s + 1] = c[2] * x_cur - c[5] * x_new;
        x_cur = x_new;
      }
      xi[k] = x_cur;
    }
  }
}
