extern "C" __global__ void __launch_bounds__(128, 1) kmeans_assign(
    const float* t_x,
    const float* t_cent,
    int* t_assign,
    const int n_P,
    const int n_D,
    const int n_C) {
    constexpr int p_BP = 32;
    constexpr int p_BC = 64;
    const int kir_tid = threadIdx.x;
    extern __shared__ __align__(1024) unsigned char kir_smem_raw[];
    // the swizzle patterns repeat every 1024 bytes: align the base (the launch adds the slack)
    unsigned char* kir_smem = kir_smem_raw + ((1024 - (kir_smem_u32(kir_smem_raw) & 1023)) & 1023);
    int t = (int)blockIdx.x;
    int t_1 = ((int)((unsigned int)t * (unsigned int)p_BP));
    float v_xt[32];
    #pragma unroll
    for (int kir_i = 0; kir_i < 32; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        const int kir_x0 = (kir_e / 128);
        const int kir_x1 = (kir_e % 128);
        v_xt[kir_i] = ((((((int)((unsigned int)t_1 + (unsigned int)(kir_x0)))) < n_P)) && (((kir_x1) < n_D))) ? t_x[(long long)(((int)((unsigned int)t_1 + (unsigned int)(kir_x0)))) * n_D + (long long)(kir_x1)] : 0.0f;
    }
    int t_2 = ((int)((unsigned int)n_C + (unsigned int)p_BC));
    int t_3 = ((int)((unsigned int)t_2 - (unsigned int)1));
    int t_4 = ((int)(t_3 / p_BC));
    int v_best_idx[1];
    #pragma unroll
    for (int kir_i = 0; kir_i < 1; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        if (kir_e < 32) {
            v_best_idx[kir_i] = 0;
        }
    }
    float v_best[1];
    #pragma unroll
    for (int kir_i = 0; kir_i < 1; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        if (kir_e < 32) {
            v_best[kir_i] = kir_f32_bits(2139095040u);
        }
    }
    for (int v_j = 0; v_j < t_4; v_j += 1) {
        int t_5 = ((int)((unsigned int)v_j * (unsigned int)p_BC));
        float v_ct[64];
        #pragma unroll
        for (int kir_i = 0; kir_i < 64; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            const int kir_x0 = (kir_e / 128);
            const int kir_x1 = (kir_e % 128);
            v_ct[kir_i] = ((((((int)((unsigned int)t_5 + (unsigned int)(kir_x0)))) < n_C)) && (((kir_x1) < n_D))) ? t_cent[(long long)(((int)((unsigned int)t_5 + (unsigned int)(kir_x0)))) * n_D + (long long)(kir_x1)] : 0.0f;
        }
        float t_6[64];
        #pragma unroll
        for (int kir_i = 0; kir_i < 64; ++kir_i) {
            t_6[kir_i] = (v_ct[kir_i] * v_ct[kir_i]);
        }
        float t_7[1];
        {
            float* kir_scr = reinterpret_cast<float*>(kir_smem + 0);
            #pragma unroll
            for (int kir_i = 0; kir_i < 64; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                kir_scr[kir_e] = t_6[kir_i];
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 4096; kir_t += 128) {
                const int kir_p = (kir_t / 64) * 128 + kir_t % 64;
                const float kir_a = kir_scr[kir_p], kir_b = kir_scr[kir_p + 64];
                kir_scr[kir_p] = (kir_a + kir_b);
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 2048; kir_t += 128) {
                const int kir_p = (kir_t / 32) * 128 + kir_t % 32;
                const float kir_a = kir_scr[kir_p], kir_b = kir_scr[kir_p + 32];
                kir_scr[kir_p] = (kir_a + kir_b);
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 1024; kir_t += 128) {
                const int kir_p = (kir_t / 16) * 128 + kir_t % 16;
                const float kir_a = kir_scr[kir_p], kir_b = kir_scr[kir_p + 16];
                kir_scr[kir_p] = (kir_a + kir_b);
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 512; kir_t += 128) {
                const int kir_p = (kir_t / 8) * 128 + kir_t % 8;
                const float kir_a = kir_scr[kir_p], kir_b = kir_scr[kir_p + 8];
                kir_scr[kir_p] = (kir_a + kir_b);
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 256; kir_t += 128) {
                const int kir_p = (kir_t / 4) * 128 + kir_t % 4;
                const float kir_a = kir_scr[kir_p], kir_b = kir_scr[kir_p + 4];
                kir_scr[kir_p] = (kir_a + kir_b);
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 128; kir_t += 128) {
                const int kir_p = (kir_t / 2) * 128 + kir_t % 2;
                const float kir_a = kir_scr[kir_p], kir_b = kir_scr[kir_p + 2];
                kir_scr[kir_p] = (kir_a + kir_b);
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 64; kir_t += 128) {
                const int kir_p = (kir_t / 1) * 128 + kir_t % 1;
                const float kir_a = kir_scr[kir_p], kir_b = kir_scr[kir_p + 1];
                kir_scr[kir_p] = (kir_a + kir_b);
            }
            __syncthreads();
            #pragma unroll
            for (int kir_i = 0; kir_i < 1; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                if (kir_e < 64) {
                    t_7[kir_i] = kir_scr[(kir_e / 1) * 128 + kir_e % 1];
                }
            }
            __syncthreads();
        }
        float t_8[64];
        {
            float* kir_scr_1 = reinterpret_cast<float*>(kir_smem + 0);
            #pragma unroll
            for (int kir_i = 0; kir_i < 64; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                kir_scr_1[kir_e] = v_ct[kir_i];
            }
            __syncthreads();
            #pragma unroll
            for (int kir_i = 0; kir_i < 64; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                const int kir_x0 = (kir_e / 64);
                const int kir_x1 = (kir_e % 64);
                t_8[kir_i] = kir_scr_1[(kir_x1 * 128 + kir_x0)];
            }
            __syncthreads();
        }
        float t_9[16];
        {
            float* kir_scr_2 = reinterpret_cast<float*>(kir_smem + 0);
            float* kir_scr_3 = reinterpret_cast<float*>(kir_smem + 16384);
            #pragma unroll
            for (int kir_i = 0; kir_i < 32; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                kir_scr_2[kir_e] = v_xt[kir_i];
            }
            #pragma unroll
            for (int kir_i = 0; kir_i < 64; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                kir_scr_3[kir_e] = t_8[kir_i];
            }
            __syncthreads();
            #pragma unroll
            for (int kir_i = 0; kir_i < 16; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                const int kir_x0 = (kir_e / 64);
                const int kir_x1 = (kir_e % 64);
                float kir_s = 0.0f;
                for (int kir_k = 0; kir_k < 128; ++kir_k) {
                    kir_s += kir_scr_2[kir_x0 * 128 + kir_k] * kir_scr_3[kir_k * 64 + kir_x1];
                }
                t_9[kir_i] = kir_s;
            }
            __syncthreads();
        }
        float t_10[16];
        #pragma unroll
        for (int kir_i = 0; kir_i < 16; ++kir_i) {
            t_10[kir_i] = (2.0f * t_9[kir_i]);
        }
        float v_dist[16];
        {
            float* kir_scr_4 = reinterpret_cast<float*>(kir_smem + 0);
            #pragma unroll
            for (int kir_i = 0; kir_i < 1; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                if (kir_e < 64) {
                    kir_scr_4[kir_e] = t_7[kir_i];
                }
            }
            __syncthreads();
            #pragma unroll
            for (int kir_i = 0; kir_i < 16; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                const int kir_x1 = (kir_e % 64);
                const float kir_a0 = kir_scr_4[(kir_x1)];
                v_dist[kir_i] = (kir_a0 - t_10[kir_i]);
            }
            __syncthreads();
        }
        float v_dist_1[16];
        #pragma unroll
        for (int kir_i = 0; kir_i < 16; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            const int kir_x1 = (kir_e % 64);
            const bool kir_a0 = ((((int)((unsigned int)t_5 + (unsigned int)(kir_x1)))) < n_C);
            v_dist_1[kir_i] = (kir_a0 ? v_dist[kir_i] : kir_f32_bits(2139095040u));
        }
        float v_dmin[1];
        {
            float* kir_scr_5 = reinterpret_cast<float*>(kir_smem + 0);
            #pragma unroll
            for (int kir_i = 0; kir_i < 16; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                kir_scr_5[kir_e] = v_dist_1[kir_i];
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 1024; kir_t += 128) {
                const int kir_p = (kir_t / 32) * 64 + kir_t % 32;
                const float kir_a = kir_scr_5[kir_p], kir_b = kir_scr_5[kir_p + 32];
                kir_scr_5[kir_p] = (kir_fmin(kir_a, kir_b));
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 512; kir_t += 128) {
                const int kir_p = (kir_t / 16) * 64 + kir_t % 16;
                const float kir_a = kir_scr_5[kir_p], kir_b = kir_scr_5[kir_p + 16];
                kir_scr_5[kir_p] = (kir_fmin(kir_a, kir_b));
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 256; kir_t += 128) {
                const int kir_p = (kir_t / 8) * 64 + kir_t % 8;
                const float kir_a = kir_scr_5[kir_p], kir_b = kir_scr_5[kir_p + 8];
                kir_scr_5[kir_p] = (kir_fmin(kir_a, kir_b));
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 128; kir_t += 128) {
                const int kir_p = (kir_t / 4) * 64 + kir_t % 4;
                const float kir_a = kir_scr_5[kir_p], kir_b = kir_scr_5[kir_p + 4];
                kir_scr_5[kir_p] = (kir_fmin(kir_a, kir_b));
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 64; kir_t += 128) {
                const int kir_p = (kir_t / 2) * 64 + kir_t % 2;
                const float kir_a = kir_scr_5[kir_p], kir_b = kir_scr_5[kir_p + 2];
                kir_scr_5[kir_p] = (kir_fmin(kir_a, kir_b));
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 32; kir_t += 128) {
                const int kir_p = (kir_t / 1) * 64 + kir_t % 1;
                const float kir_a = kir_scr_5[kir_p], kir_b = kir_scr_5[kir_p + 1];
                kir_scr_5[kir_p] = (kir_fmin(kir_a, kir_b));
            }
            __syncthreads();
            #pragma unroll
            for (int kir_i = 0; kir_i < 1; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                if (kir_e < 32) {
                    v_dmin[kir_i] = kir_scr_5[(kir_e / 1) * 64 + kir_e % 1];
                }
            }
            __syncthreads();
        }
        bool v_better[1];
        #pragma unroll
        for (int kir_i = 0; kir_i < 1; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            if (kir_e < 32) {
                v_better[kir_i] = (v_dmin[kir_i] < v_best[kir_i]);
            }
        }
        int t_11 = ((int)((unsigned int)v_j * (unsigned int)p_BC));
        int t_12[1];
        {
            float* kir_scr_6 = reinterpret_cast<float*>(kir_smem + 0);
            int* kir_scr_7 = reinterpret_cast<int*>(kir_smem + 8192);
            #pragma unroll
            for (int kir_i = 0; kir_i < 16; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                kir_scr_6[kir_e] = v_dist_1[kir_i];
                kir_scr_7[kir_e] = (kir_e / 1) % 64;
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 1024; kir_t += 128) {
                const int kir_p = (kir_t / 32) * 64 + kir_t % 32;
                const float kir_a = kir_scr_6[kir_p], kir_b = kir_scr_6[kir_p + 32];
                if ((kir_a == kir_a) && (kir_b != kir_b || kir_b < kir_a)) {
                    kir_scr_6[kir_p] = kir_b;
                    kir_scr_7[kir_p] = kir_scr_7[kir_p + 32];
                }
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 512; kir_t += 128) {
                const int kir_p = (kir_t / 16) * 64 + kir_t % 16;
                const float kir_a = kir_scr_6[kir_p], kir_b = kir_scr_6[kir_p + 16];
                if ((kir_a == kir_a) && (kir_b != kir_b || kir_b < kir_a)) {
                    kir_scr_6[kir_p] = kir_b;
                    kir_scr_7[kir_p] = kir_scr_7[kir_p + 16];
                }
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 256; kir_t += 128) {
                const int kir_p = (kir_t / 8) * 64 + kir_t % 8;
                const float kir_a = kir_scr_6[kir_p], kir_b = kir_scr_6[kir_p + 8];
                if ((kir_a == kir_a) && (kir_b != kir_b || kir_b < kir_a)) {
                    kir_scr_6[kir_p] = kir_b;
                    kir_scr_7[kir_p] = kir_scr_7[kir_p + 8];
                }
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 128; kir_t += 128) {
                const int kir_p = (kir_t / 4) * 64 + kir_t % 4;
                const float kir_a = kir_scr_6[kir_p], kir_b = kir_scr_6[kir_p + 4];
                if ((kir_a == kir_a) && (kir_b != kir_b || kir_b < kir_a)) {
                    kir_scr_6[kir_p] = kir_b;
                    kir_scr_7[kir_p] = kir_scr_7[kir_p + 4];
                }
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 64; kir_t += 128) {
                const int kir_p = (kir_t / 2) * 64 + kir_t % 2;
                const float kir_a = kir_scr_6[kir_p], kir_b = kir_scr_6[kir_p + 2];
                if ((kir_a == kir_a) && (kir_b != kir_b || kir_b < kir_a)) {
                    kir_scr_6[kir_p] = kir_b;
                    kir_scr_7[kir_p] = kir_scr_7[kir_p + 2];
                }
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 32; kir_t += 128) {
                const int kir_p = (kir_t / 1) * 64 + kir_t % 1;
                const float kir_a = kir_scr_6[kir_p], kir_b = kir_scr_6[kir_p + 1];
                if ((kir_a == kir_a) && (kir_b != kir_b || kir_b < kir_a)) {
                    kir_scr_6[kir_p] = kir_b;
                    kir_scr_7[kir_p] = kir_scr_7[kir_p + 1];
                }
            }
            __syncthreads();
            #pragma unroll
            for (int kir_i = 0; kir_i < 1; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                if (kir_e < 32) {
                    t_12[kir_i] = kir_scr_7[(kir_e / 1) * 64 + kir_e % 1];
                }
            }
            __syncthreads();
        }
        int t_13[1];
        #pragma unroll
        for (int kir_i = 0; kir_i < 1; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            if (kir_e < 32) {
                t_13[kir_i] = ((int)((unsigned int)t_11 + (unsigned int)t_12[kir_i]));
            }
        }
        int v_best_idx_1[1];
        #pragma unroll
        for (int kir_i = 0; kir_i < 1; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            if (kir_e < 32) {
                v_best_idx_1[kir_i] = (v_better[kir_i] ? t_13[kir_i] : v_best_idx[kir_i]);
            }
        }
        float v_best_1[1];
        #pragma unroll
        for (int kir_i = 0; kir_i < 1; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            if (kir_e < 32) {
                v_best_1[kir_i] = (v_better[kir_i] ? v_dmin[kir_i] : v_best[kir_i]);
            }
        }
        for (int kir_i = 0; kir_i < 1; ++kir_i) v_best_idx[kir_i] = v_best_idx_1[kir_i];
        for (int kir_i = 0; kir_i < 1; ++kir_i) v_best[kir_i] = v_best_1[kir_i];
    }
    #pragma unroll
    for (int kir_i = 0; kir_i < 1; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        if (kir_e < 32) {
            if (((((int)((unsigned int)t_1 + (unsigned int)(kir_e)))) < n_P)) t_assign[(long long)(((int)((unsigned int)t_1 + (unsigned int)(kir_e))))] = v_best_idx[kir_i];
        }
    }
}
