// What an AMX prefill path could reach (docs/gguf.md, "Not yet", AMX): one `tdpbusd` per
// 32-value chunk gives each (token, row) pair its exact i32 chunk sum, as Pagoda's other
// integer paths do; the sums are stored and scaled into f32 accumulators with AVX-512.
// Int8 weights already laid out for AMX (no 4-bit decoding), one Qwen2.5-0.5B q-projection
// shape (896 x 896) times 64 tokens, one thread. Not part of the build; run on a CPU whose
// kernel grants AMX tile data:
//
//     gcc -O2 -march=native scripts/amx_chunk_sketch.c -o /tmp/amx_chunk_sketch
//     /tmp/amx_chunk_sketch 50
//
// and compare with `RAYON_NUM_THREADS=1 target/release/examples/quant_prefill q8_0 64 20`.
#include <stdio.h>
#include <stdint.h>
#include <string.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#include <sys/syscall.h>
#include <immintrin.h>
#define K 896
#define CH (K/32)
#define ROWS 896
#define TOK 64
static double now(){struct timespec t;clock_gettime(CLOCK_MONOTONIC,&t);return t.tv_sec+t.tv_nsec*1e-9;}
typedef struct __attribute__((aligned(64))) { uint8_t pal, start; uint8_t res[14]; uint16_t colsb[16]; uint8_t rows[16]; } cfg_t;
static uint8_t act[TOK*K] __attribute__((aligned(64)));
static int8_t wpk[ROWS/16][CH][8*64] __attribute__((aligned(64))); // per 16-row block, per chunk: 8 rows x 64 bytes (vnni)
static float wsc[ROWS/16][CH][16] __attribute__((aligned(64)));
static float out[TOK][ROWS] __attribute__((aligned(64)));
// The chunk sum computed one product at a time from the packed layout (B row kk holds values
// 4kk..4kk+3 of each of the 16 rows).
static int32_t ref_sum(int t, int r, int c) {
  int32_t s = 0;
  for (int k = 0; k < 32; k++)
    s += act[t * K + c * 32 + k] * (int)wpk[r / 16][c][(k / 4) * 64 + (r % 16) * 4 + k % 4];
  return s;
}
int main(int argc,char**argv){
  int reps = argc>1?atoi(argv[1]):20;
  if (syscall(SYS_arch_prctl, 0x1023 /* ARCH_REQ_XCOMP_PERM */, 18 /* XTILEDATA */)) {
    fprintf(stderr, "no AMX tile data permission\n"); return 1;
  }
  for(int i=0;i<TOK*K;i++) act[i]=rand()&255;
  for(size_t i=0;i<sizeof wpk;i++) ((int8_t*)wpk)[i]=(rand()&255)-128;
  for(size_t i=0;i<sizeof wsc/4;i++) ((float*)wsc)[i]=(rand()%1000)*1e-3f;
  cfg_t cfg; memset(&cfg,0,sizeof cfg); cfg.pal=1;
  for(int i=0;i<2;i++){cfg.colsb[i]=32;cfg.rows[i]=16;}      // A: 16 tokens x 32 bytes
  for(int i=2;i<4;i++){cfg.colsb[i]=64;cfg.rows[i]=8;}       // B: 8 x (16 rows x 4 bytes)
  for(int i=4;i<8;i++){cfg.colsb[i]=64;cfg.rows[i]=16;}      // C: 16 x 16 i32
  _tile_loadconfig(&cfg);
  static int32_t ct[4][16][16] __attribute__((aligned(64)));
  double best=1e9;
  for(int rep=0;rep<reps;rep++){
    double t0=now();
    for(int tb=0;tb<TOK;tb+=32) for(int rb=0;rb<ROWS/16;rb+=2){
      __m512 acc[32][2]; for(int m=0;m<32;m++){acc[m][0]=_mm512_setzero_ps();acc[m][1]=_mm512_setzero_ps();}
      for(int c=0;c<CH;c++){
        _tile_loadd(0, act+(tb)*K+c*32, K);
        _tile_loadd(1, act+(tb+16)*K+c*32, K);
        _tile_loadd(2, wpk[rb][c], 64);
        _tile_loadd(3, wpk[rb+1][c], 64);
        _tile_zero(4);_tile_zero(5);_tile_zero(6);_tile_zero(7);
        _tile_dpbusd(4,0,2); _tile_dpbusd(5,0,3); _tile_dpbusd(6,1,2); _tile_dpbusd(7,1,3);
        _tile_stored(4,ct[0],64); _tile_stored(5,ct[1],64); _tile_stored(6,ct[2],64); _tile_stored(7,ct[3],64);
        __m512 s0=_mm512_load_ps(wsc[rb][c]), s1=_mm512_load_ps(wsc[rb+1][c]);
        for(int m=0;m<16;m++){
          acc[m][0]=_mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(ct[0][m])),s0,acc[m][0]);
          acc[m][1]=_mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(ct[1][m])),s1,acc[m][1]);
          acc[16+m][0]=_mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(ct[2][m])),s0,acc[16+m][0]);
          acc[16+m][1]=_mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(ct[3][m])),s1,acc[16+m][1]);
        }
        if(rep==0 && tb==0 && rb==0){ // every chunk sum of the first tile, exactly
          for(int m=0;m<16;m++) for(int n=0;n<16;n++) if(ct[0][m][n]!=ref_sum(m,n,c)){printf("mismatch: token %d row %d chunk %d\n",m,n,c);return 1;}
        }
      }
      for(int m=0;m<32;m++){_mm512_storeu_ps(&out[tb+m][rb*16],acc[m][0]);_mm512_storeu_ps(&out[tb+m][rb*16+16],acc[m][1]);}
    }
    double dt=now()-t0; if(dt<best)best=dt;
  }
  _tile_release();
  double ops=2.0*TOK*ROWS*K;
  printf("amx per-chunk: %.1f GOP/s (best of %d, %.3f ms per %dx%dx%d)\n", ops/best*1e-9, reps, best*1e3, TOK, ROWS, K);
  return 0;
}
