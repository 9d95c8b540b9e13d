/* The inner loop of a blocked variant's 3x3 conv (issue 19, deliverable 3), alone:
 * one vector of 16 weights, then 14 FMAs each broadcasting one input value, the 14
 * values S floats apart (S = 16: one pixel of an nChw16c input per cache line; S = 1:
 * a plain input's row), everything in L1. Timing it against S says whether broadcasts
 * from 14 lines cost more than from one.
 *   gcc -O3 -mavx512f -mfma bench/broadcast_stride.c -o /tmp/bs && taskset -c 1 /tmp/bs 16 144
 */
#include <immintrin.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
/* 14 accumulators; per step one weight vector and 14 broadcasts at stride S floats. */
__attribute__((noinline)) void run(const float *x, const float *w, float *out, int steps, int S, int reps) {
  for (int r = 0; r < reps; ++r) {
    __m512 a0=_mm512_setzero_ps(),a1=a0,a2=a0,a3=a0,a4=a0,a5=a0,a6=a0,a7=a0,a8=a0,a9=a0,a10=a0,a11=a0,a12=a0,a13=a0;
    for (int i = 0; i < steps; ++i) {
      __m512 v = _mm512_loadu_ps(w + 16*i);
      const float *p = x + i;
#define B(k) _mm512_set1_ps(p[(k)*S])
      a0=_mm512_fmadd_ps(v,B(0),a0); a1=_mm512_fmadd_ps(v,B(1),a1); a2=_mm512_fmadd_ps(v,B(2),a2);
      a3=_mm512_fmadd_ps(v,B(3),a3); a4=_mm512_fmadd_ps(v,B(4),a4); a5=_mm512_fmadd_ps(v,B(5),a5);
      a6=_mm512_fmadd_ps(v,B(6),a6); a7=_mm512_fmadd_ps(v,B(7),a7); a8=_mm512_fmadd_ps(v,B(8),a8);
      a9=_mm512_fmadd_ps(v,B(9),a9); a10=_mm512_fmadd_ps(v,B(10),a10); a11=_mm512_fmadd_ps(v,B(11),a11);
      a12=_mm512_fmadd_ps(v,B(12),a12); a13=_mm512_fmadd_ps(v,B(13),a13);
    }
    __m512 s=_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a0,a1),_mm512_add_ps(a2,a3)),_mm512_add_ps(_mm512_add_ps(a4,a5),_mm512_add_ps(a6,a7)));
    s=_mm512_add_ps(s,_mm512_add_ps(_mm512_add_ps(_mm512_add_ps(a8,a9),_mm512_add_ps(a10,a11)),_mm512_add_ps(a12,a13)));
    _mm512_storeu_ps(out, _mm512_add_ps(_mm512_loadu_ps(out), s));
  }
}
int main(int argc, char **argv) {
  int S = atoi(argv[1]), steps = atoi(argv[2]);
  float *x = aligned_alloc(64, sizeof(float)*(steps + 16*64 + 64)), *w = aligned_alloc(64, sizeof(float)*16*steps), out[16]={0};
  for (int i=0;i<steps+16*64+64;i++) x[i]=1e-3f*(i%7); for (int i=0;i<16*steps;i++) w[i]=1e-3f*(i%5);
  int reps = 200000000 / (steps*14);
  run(x,w,out,steps,S,reps/10);
  double t=now(); run(x,w,out,steps,S,reps); t=now()-t;
  printf("S=%2d steps=%d: %.1f GFLOP/s (%g)\n", S, steps, 2.0*16*14*steps*(double)reps/t/1e9, out[0]);
}
