extern "C" __global__ void __launch_bounds__(128, 1) probe_dot(
    const float* t_a,
    const float* t_b,
    float* t_c,
    float* t_rs,
    float* t_cm,
    const int n_M,
    const int n_K,
    const int n_N) {
    constexpr int p_BM = 32;
    constexpr int p_BN = 16;
    constexpr int p_BK = 32;
    const int kir_tid = threadIdx.x;
    extern __shared__ __align__(1024) unsigned char kir_smem_raw[];
    // the swizzle patterns repeat every 1024 bytes: align the base (the launch adds the slack)
    unsigned char* kir_smem = kir_smem_raw + ((1024 - (kir_smem_u32(kir_smem_raw) & 1023)) & 1023);
    int t = (int)blockIdx.x;
    int t_1 = ((int)((unsigned int)t * (unsigned int)p_BM));
    int t_2 = (int)blockIdx.y;
    int t_3 = ((int)((unsigned int)t_2 * (unsigned int)p_BN));
    int t_4 = ((int)(n_K / p_BK));
    float v_acc[4];
    #pragma unroll
    for (int kir_i = 0; kir_i < 4; ++kir_i) {
        v_acc[kir_i] = 0.0f;
    }
    for (int v_k = 0; v_k < t_4; v_k += 1) {
        int t_5 = ((int)((unsigned int)v_k * (unsigned int)p_BK));
        float v_at[8];
        #pragma unroll
        for (int kir_i = 0; kir_i < 8; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            const int kir_x0 = (kir_e / 32);
            const int kir_x1 = (kir_e % 32);
            v_at[kir_i] = t_a[(long long)(((int)((unsigned int)t_1 + (unsigned int)(kir_x0)))) * n_K + (long long)(((int)((unsigned int)t_5 + (unsigned int)(kir_x1))))];
        }
        float v_bt[4];
        #pragma unroll
        for (int kir_i = 0; kir_i < 4; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            const int kir_x0 = (kir_e / 32);
            const int kir_x1 = (kir_e % 32);
            v_bt[kir_i] = t_b[(long long)(((int)((unsigned int)t_3 + (unsigned int)(kir_x0)))) * n_K + (long long)(((int)((unsigned int)t_5 + (unsigned int)(kir_x1))))];
        }
        float t_6[4];
        {
            float* kir_scr = reinterpret_cast<float*>(kir_smem + 0);
            #pragma unroll
            for (int kir_i = 0; kir_i < 4; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                kir_scr[kir_e] = v_bt[kir_i];
            }
            __syncthreads();
            #pragma unroll
            for (int kir_i = 0; kir_i < 4; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                const int kir_x0 = (kir_e / 16);
                const int kir_x1 = (kir_e % 16);
                t_6[kir_i] = kir_scr[(kir_x1 * 32 + kir_x0)];
            }
            __syncthreads();
        }
        float v_acc_1[4];
        {
            float* kir_scr_1 = reinterpret_cast<float*>(kir_smem + 0);
            float* kir_scr_2 = reinterpret_cast<float*>(kir_smem + 4096);
            #pragma unroll
            for (int kir_i = 0; kir_i < 8; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                kir_scr_1[kir_e] = v_at[kir_i];
            }
            #pragma unroll
            for (int kir_i = 0; kir_i < 4; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                kir_scr_2[kir_e] = t_6[kir_i];
            }
            __syncthreads();
            #pragma unroll
            for (int kir_i = 0; kir_i < 4; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                const int kir_x0 = (kir_e / 16);
                const int kir_x1 = (kir_e % 16);
                float kir_s = 0.0f;
                for (int kir_k = 0; kir_k < 32; ++kir_k) {
                    kir_s += kir_scr_1[kir_x0 * 32 + kir_k] * kir_scr_2[kir_k * 16 + kir_x1];
                }
                kir_s += v_acc[kir_i];
                v_acc_1[kir_i] = kir_s;
            }
            __syncthreads();
        }
        for (int kir_i = 0; kir_i < 4; ++kir_i) v_acc[kir_i] = v_acc_1[kir_i];
    }
    #pragma unroll
    for (int kir_i = 0; kir_i < 4; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        const int kir_x0 = (kir_e / 16);
        const int kir_x1 = (kir_e % 16);
        t_c[(long long)(((int)((unsigned int)t_1 + (unsigned int)(kir_x0)))) * n_N + (long long)(((int)((unsigned int)t_3 + (unsigned int)(kir_x1))))] = v_acc[kir_i];
    }
    int t_7 = (int)blockIdx.y;
    bool t_8 = (t_7 == 0);
    if (t_8) {
        float t_9[1];
        {
            float* kir_scr_3 = reinterpret_cast<float*>(kir_smem + 0);
            #pragma unroll
            for (int kir_i = 0; kir_i < 4; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                kir_scr_3[kir_e] = v_acc[kir_i];
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 256; kir_t += 128) {
                const int kir_p = (kir_t / 8) * 16 + kir_t % 8;
                const float kir_a = kir_scr_3[kir_p], kir_b = kir_scr_3[kir_p + 8];
                kir_scr_3[kir_p] = (kir_a + kir_b);
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 128; kir_t += 128) {
                const int kir_p = (kir_t / 4) * 16 + kir_t % 4;
                const float kir_a = kir_scr_3[kir_p], kir_b = kir_scr_3[kir_p + 4];
                kir_scr_3[kir_p] = (kir_a + kir_b);
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 64; kir_t += 128) {
                const int kir_p = (kir_t / 2) * 16 + kir_t % 2;
                const float kir_a = kir_scr_3[kir_p], kir_b = kir_scr_3[kir_p + 2];
                kir_scr_3[kir_p] = (kir_a + kir_b);
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 32; kir_t += 128) {
                const int kir_p = (kir_t / 1) * 16 + kir_t % 1;
                const float kir_a = kir_scr_3[kir_p], kir_b = kir_scr_3[kir_p + 1];
                kir_scr_3[kir_p] = (kir_a + kir_b);
            }
            __syncthreads();
            #pragma unroll
            for (int kir_i = 0; kir_i < 1; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                if (kir_e < 32) {
                    t_9[kir_i] = kir_scr_3[(kir_e / 1) * 16 + kir_e % 1];
                }
            }
            __syncthreads();
        }
        #pragma unroll
        for (int kir_i = 0; kir_i < 1; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            if (kir_e < 32) {
                t_rs[(long long)(((int)((unsigned int)t_1 + (unsigned int)(kir_e))))] = t_9[kir_i];
            }
        }
    }
    int t_10 = (int)blockIdx.x;
    bool t_11 = (t_10 == 0);
    if (t_11) {
        float t_12[1];
        {
            float* kir_scr_4 = reinterpret_cast<float*>(kir_smem + 0);
            #pragma unroll
            for (int kir_i = 0; kir_i < 4; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                kir_scr_4[kir_e] = v_acc[kir_i];
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 256; kir_t += 128) {
                const int kir_p = (kir_t / 256) * 512 + kir_t % 256;
                const float kir_a = kir_scr_4[kir_p], kir_b = kir_scr_4[kir_p + 256];
                kir_scr_4[kir_p] = (kir_fmax(kir_a, kir_b));
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 128; kir_t += 128) {
                const int kir_p = (kir_t / 128) * 512 + kir_t % 128;
                const float kir_a = kir_scr_4[kir_p], kir_b = kir_scr_4[kir_p + 128];
                kir_scr_4[kir_p] = (kir_fmax(kir_a, kir_b));
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 64; kir_t += 128) {
                const int kir_p = (kir_t / 64) * 512 + kir_t % 64;
                const float kir_a = kir_scr_4[kir_p], kir_b = kir_scr_4[kir_p + 64];
                kir_scr_4[kir_p] = (kir_fmax(kir_a, kir_b));
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 32; kir_t += 128) {
                const int kir_p = (kir_t / 32) * 512 + kir_t % 32;
                const float kir_a = kir_scr_4[kir_p], kir_b = kir_scr_4[kir_p + 32];
                kir_scr_4[kir_p] = (kir_fmax(kir_a, kir_b));
            }
            __syncthreads();
            for (int kir_t = kir_tid; kir_t < 16; kir_t += 128) {
                const int kir_p = (kir_t / 16) * 512 + kir_t % 16;
                const float kir_a = kir_scr_4[kir_p], kir_b = kir_scr_4[kir_p + 16];
                kir_scr_4[kir_p] = (kir_fmax(kir_a, kir_b));
            }
            __syncthreads();
            #pragma unroll
            for (int kir_i = 0; kir_i < 1; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                if (kir_e < 16) {
                    t_12[kir_i] = kir_scr_4[(kir_e / 16) * 512 + kir_e % 16];
                }
            }
            __syncthreads();
        }
        #pragma unroll
        for (int kir_i = 0; kir_i < 1; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            if (kir_e < 16) {
                t_cm[(long long)(((int)((unsigned int)t_3 + (unsigned int)(kir_e))))] = t_12[kir_i];
            }
        }
    }
}
