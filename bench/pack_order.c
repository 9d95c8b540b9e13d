/*
 * pack_order.c: the B pack of the 16x4096x4096 GEMM as the generated kernel writes it
 * (generator 5, AVX2 entry's config with pack.1=1: panels of 8 columns, K blocks of 512,
 * copy loops in the order of the packed layout), against the same copy with the loops
 * over a panel's columns moved inside the loop over k, so that each source row is read
 * 256 contiguous bytes at a time instead of 32. Pages warm, 1 thread.
 *   gcc -O3 -std=gnu99 -fno-math-errno -ffp-contract=fast -mavx2 -mfma bench/pack_order.c -o /tmp/pack_order && taskset -c 1 /tmp/pack_order
 */
#include <stdio.h>
#include <stdlib.h>
#include <stdint.h>
#include <time.h>
static double now(void){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
__attribute__((noinline)) void pack_layout_order(const float*restrict in_b,float*restrict pk){
 for (int64_t q0 = 0; q0 < 64; ++q0)
    for (int64_t q1 = 0; q1 < 8; ++q1)
      for (int64_t q2 = 0; q2 < 8; ++q2)
        for (int64_t q3 = 0; q3 < 512; ++q3)
          for (int64_t q4 = 0; q4 < 8; ++q4)
            if (q0 * 64 + q2 * 8 + q4 < 4096 && q1 * 512 + q3 < 4096)
              pk[(((q0 * 8 + q1) * 8 + q2) * 512 + q3) * 8 + q4] = in_b[(q1 * 512 + q3) * 4096 + q0 * 64 + q2 * 8 + q4];
            else pk[(((q0 * 8 + q1) * 8 + q2) * 512 + q3) * 8 + q4] = 0.0f;
}
__attribute__((noinline)) void pack_row_runs(const float*restrict in_b,float*restrict pk){
 for (int64_t q0 = 0; q0 < 64; ++q0)
    for (int64_t q1 = 0; q1 < 8; ++q1)
        for (int64_t q3 = 0; q3 < 512; ++q3)
      for (int64_t q2 = 0; q2 < 8; ++q2)
          for (int64_t q4 = 0; q4 < 8; ++q4)
            if (q0 * 64 + q2 * 8 + q4 < 4096 && q1 * 512 + q3 < 4096)
              pk[(((q0 * 8 + q1) * 8 + q2) * 512 + q3) * 8 + q4] = in_b[(q1 * 512 + q3) * 4096 + q0 * 64 + q2 * 8 + q4];
            else pk[(((q0 * 8 + q1) * 8 + q2) * 512 + q3) * 8 + q4] = 0.0f;
}
int main(){ float*b=malloc(4096*4096*4),*p=malloc(4096*4096*4); for(int i=0;i<4096*4096;i++)b[i]=i; pack_layout_order(b,p);pack_row_runs(b,p);
 for(int r=0;r<3;r++){double t=now();pack_layout_order(b,p);double a=now()-t;t=now();pack_row_runs(b,p);double bb=now()-t;printf("dest order %.1f ms, row-run order %.1f ms\n",a*1e3,bb*1e3);} return p[12345]==0;}
