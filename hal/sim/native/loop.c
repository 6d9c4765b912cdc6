/* The MuJoCo twin's control loop of hal/sim/fastloop.py simulate, compiled, for the paths that
   need no matrix product: uncoupled joints, no transmission error, a PD law (no PI velocity loop).
   That is the ideal twin (MujocoTwin.control_step) and the realistic twin's LoopController
   (quantised position, with closed_loop the encoder noise, the drive's first-order velocity
   filter and the delay line), rigid or elastic (the uncoupled elastic twin's "direct" recording:
   the state itself), with the torque ramp into d->ctrl and the recording of each period.

   hal/sim/native.py compiles it as passive.c (cc -O2 -shared -fPIC -ffp-contract=off, no
   -ffast-math) and hal/sim/native_loop.py calls robident_loop_run for chunks of control periods.
   Each period performs the Python loop's operations on the same operands in the same order;
   IEEE add, subtract, multiply, divide and rint are exact, so the recordings are bit-identical
   to the Python loop's (tests/test_native_loop.py). MuJoCo's passive-force callback is whatever
   the caller installed (the compiled one of passive.c); libmujoco's functions come from the
   context (found next to the mujoco package by hal/sim/native_loop.py), not from linking.

   An mju_error inside MuJoCo (which would end the process from C) is intercepted as the Python
   bindings do: a thread-local log handler jumps back here and robident_loop_run returns 1 with
   the message in the context; warnings go on to the handler that would have had them. */
#include <math.h>
#include <setjmp.h>
#include <stdio.h>
#include <string.h>

#include <mujoco/mujoco.h>

typedef void (*robident_step_t)(const mjModel* m, mjData* d);
typedef void (*robident_rk_t)(const mjModel* m, mjData* d, int n);
typedef mjfLogHandler (*robident_set_log_t)(mjfLogHandler handler);
typedef mjfLogHandler (*robident_get_log_t)(void);

/* set from Python (hal/sim/native_loop.py _Context: the same fields in the same order) */
typedef struct {
  robident_step_t step;          /* libmujoco's mj_step */
  robident_step_t forward;       /* mj_forward */
  robident_rk_t runge_kutta;     /* mj_RungeKutta */
  robident_set_log_t set_tls_log;  /* _mjPRIVATE_setTlsLogHandler (what the bindings use) */
  robident_get_log_t global_log;   /* _mjPRIVATE_getGlobalLogHandler */
  const mjModel* m;
  mjData* d;
  int n;                         /* joints; ctrl[0..n), act[0..n) */
  int substeps;                  /* engine steps per control period */
  int rk4;                       /* RK4: a recorded sample's mj_forward is the step's first stage */
  int realistic;                 /* 0: the ideal twin's control_step (quantised qpos, true qvel) */
  int elastic;                   /* the loop reads the rotors: qpos[n..2n), qvel[n..2n) */
  int closed;                    /* measured position = quantised + noise; filtered velocity */
  int direct;                    /* record qpos, qvel (2n each) and act; else mj_forward's sample */
  int delay;                     /* commands in the delay line (queue rows) */
  int head;                      /* the delay line's oldest row */
  int has_prev;                  /* q_prev holds the last measured position */
  int record_from, record_to;    /* the recorded window of control periods */
  double rate_hz;                /* control rate (the torque ramp, the velocity difference) */
  const double* res;             /* encoder resolution (quantised where > 0) */
  const double* kp;              /* PD gains (n) */
  const double* kd;
  const double* alpha;           /* the velocity filter's coefficient (n) */
  const double* qref;            /* reference rows (N x n, row-major) */
  const double* dqref;
  const double* ff;              /* feed-forward rows */
  const double* noise;           /* encoder noise rows (closed) */
  double* queue;                 /* delay x n */
  double* q_prev;                /* n */
  double* v_f;                   /* n: the filtered velocity */
  double* pos_out;               /* direct: rows of qpos (2n), qvel (2n) */
  double* vel_out;
  double* act_out;               /* rows of act (n) */
  double* q_out;                 /* sampled: rows of qpos[0..n), qacc[0..n), qvel[0..n) */
  double* a_out;
  double* b_out;
  double* qloop;                 /* closed: rows of the measured position */
  char error[1024];              /* the intercepted mju_error's message */
} robident_loop_ctx;

#define LOOP_MAXN 64             /* joints at most (hal/sim/native_loop.py checks) */

static _Thread_local jmp_buf loop_jump;
static _Thread_local char loop_message[1024];
static _Thread_local mjfLogHandler loop_previous;
static _Thread_local robident_get_log_t loop_global;

static void loop_log(const mjLogMessage* msg) {
  if (msg->level >= mjLOG_ERROR) {  /* "mj_step: invalid integrator", as the bindings' message */
    if (msg->func != NULL && msg->func[0] != '\0') {
      snprintf(loop_message, sizeof(loop_message), "%s: %s", msg->func, msg->subject);
    } else {
      snprintf(loop_message, sizeof(loop_message), "%s", msg->subject);
    }
    longjmp(loop_jump, 1);
  }
  mjfLogHandler h = loop_previous != NULL ? loop_previous : (loop_global != NULL ? loop_global() : NULL);
  if (h != NULL) h(msg);
}

static void steps(const robident_loop_ctx* c, int count) {
  for (int s = 0; s < count; s++) c->step(c->m, c->d);
}

/* one control period k */
static void period(robident_loop_ctx* c, int k) {
  const int n = c->n;
  mjData* d = c->d;
  const double rate = c->rate_hz;
  const int rec = c->record_from <= k && k < c->record_to;
  const int i = k - c->record_from;
  const double* qc = d->qpos + (c->elastic ? n : 0);
  const double* vc = d->qvel + (c->elastic ? n : 0);
  const double* qref = c->qref + (size_t)k * n;
  const double* dqref = c->dqref + (size_t)k * n;
  const double* ff = c->ff + (size_t)k * n;
  double q[LOOP_MAXN], u[LOOP_MAXN];
  const double* v = vc;
  for (int j = 0; j < n; j++) {  /* SensorNoise.quantise: rint(q / res) res where res > 0 */
    double r = c->res[j];
    q[j] = r > 0.0 ? rint(qc[j] / r) * r : qc[j];
  }
  if (c->realistic && c->closed) {  /* the measured position, the drive's filtered velocity */
    const double* noise = c->noise + (size_t)k * n;
    for (int j = 0; j < n; j++) q[j] = q[j] + noise[j];
    if (c->has_prev) {  /* v_f + alpha ((q - q_prev) rate - v_f) */
      for (int j = 0; j < n; j++) {
        double t = q[j] - c->q_prev[j];
        t = t * rate;
        t = t - c->v_f[j];
        t = c->alpha[j] * t;
        c->v_f[j] = c->v_f[j] + t;
      }
    }
    memcpy(c->q_prev, q, sizeof(double) * n);
    c->has_prev = 1;
    v = c->v_f;
    if (rec) memcpy(c->qloop + (size_t)i * n, q, sizeof(double) * n);
  }
  for (int j = 0; j < n; j++) {  /* ff + (kp (qref - q) + kd (dqref - v)) */
    double e = qref[j] - q[j];
    double ev = dqref[j] - v[j];
    e = c->kp[j] * e;
    ev = c->kd[j] * ev;
    u[j] = ff[j] + (e + ev);
  }
  if (c->realistic && c->delay > 0) {  /* queue.append(u); u = queue.pop(0) */
    double* row = c->queue + (size_t)c->head * n;
    for (int j = 0; j < n; j++) {
      double oldest = row[j];
      row[j] = u[j];
      u[j] = oldest;
    }
    c->head = (c->head + 1) % c->delay;
  }
  for (int j = 0; j < n; j++) {  /* the torque ramps to u over the period */
    double r = u[j] - d->act[j];
    d->ctrl[j] = r * rate;
  }
  if (rec && c->direct) {  /* uncoupled elastic twin: the sample is the state itself */
    memcpy(c->pos_out + (size_t)i * 2 * n, d->qpos, sizeof(double) * 2 * n);
    memcpy(c->vel_out + (size_t)i * 2 * n, d->qvel, sizeof(double) * 2 * n);
    memcpy(c->act_out + (size_t)i * n, d->act, sizeof(double) * n);
    steps(c, c->substeps);
  } else if (rec) {  /* the sample at instant k from one mj_forward */
    c->forward(c->m, d);
    memcpy(c->q_out + (size_t)i * n, d->qpos, sizeof(double) * n);
    memcpy(c->act_out + (size_t)i * n, d->act, sizeof(double) * n);
    memcpy(c->a_out + (size_t)i * n, d->qacc, sizeof(double) * n);
    memcpy(c->b_out + (size_t)i * n, d->qvel, sizeof(double) * n);
    if (c->rk4) {
      c->runge_kutta(c->m, d, 4);  /* = mj_step after the mj_forward just done */
      steps(c, c->substeps - 1);
    } else {
      steps(c, c->substeps);
    }
  } else {
    steps(c, c->substeps);
  }
}

/* control periods [k0, k1); 0, or 1 after an mju_error (message in c->error: the state is then
   that of the interrupted step, as after the bindings' mujoco.FatalError) */
int robident_loop_run(robident_loop_ctx* c, int k0, int k1) {
  mjfLogHandler previous = c->set_tls_log(loop_log);
  loop_previous = previous;
  loop_global = c->global_log;
  if (setjmp(loop_jump) != 0) {
    c->set_tls_log(previous);
    strncpy(c->error, loop_message, sizeof(c->error) - 1);
    c->error[sizeof(c->error) - 1] = '\0';
    return 1;
  }
  for (int k = k0; k < k1; k++) period(c, k);
  c->set_tls_log(previous);
  return 0;
}
