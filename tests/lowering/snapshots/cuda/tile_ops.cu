extern "C" __global__ void __launch_bounds__(128, 1) tile_ops(
    const float* t_x,
    float* t_cs,
    float* t_tv,
    int* t_ti,
    int* t_hist,
    float* t_g,
    const int n_M,
    const int n_N) {
    constexpr int p_K = 4;
    const int kir_tid = threadIdx.x;
    extern __shared__ __align__(1024) unsigned char kir_smem_raw[];
    // the swizzle patterns repeat every 1024 bytes: align the base (the launch adds the slack)
    unsigned char* kir_smem = kir_smem_raw + ((1024 - (kir_smem_u32(kir_smem_raw) & 1023)) & 1023);
    int v_row = (int)blockIdx.x;
    float v_v[1];
    #pragma unroll
    for (int kir_i = 0; kir_i < 1; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        v_v[kir_i] = ((kir_e) < n_N) ? t_x[(long long)(v_row) * n_N + (long long)(kir_e)] : kir_f32_bits(4286578688u);
    }
    float t[1];
    #pragma unroll
    for (int kir_i = 0; kir_i < 1; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        const bool kir_a0 = ((kir_e) < n_N);
        t[kir_i] = (kir_a0 ? v_v[kir_i] : 0.0f);
    }
    float t_1[1];
    {
        float* kir_scr = reinterpret_cast<float*>(kir_smem + 0);
        #pragma unroll
        for (int kir_i = 0; kir_i < 1; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            kir_scr[kir_e] = t[kir_i];
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 1; kir_t += 128) {
            const int kir_p = (kir_t / 1) * 128 + kir_t % 1;
            float kir_acc = kir_scr[kir_p + 127];
            for (int kir_j = 126; kir_j != -1; kir_j += -1) {
                const float kir_b = kir_scr[kir_p + kir_j * 1];
                kir_acc = (kir_acc + kir_b);
                kir_scr[kir_p + kir_j * 1] = kir_acc;
            }
        }
        __syncthreads();
        #pragma unroll
        for (int kir_i = 0; kir_i < 1; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            t_1[kir_i] = kir_scr[kir_e];
        }
        __syncthreads();
    }
    #pragma unroll
    for (int kir_i = 0; kir_i < 1; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        if (((kir_e) < n_N)) t_cs[(long long)(v_row) * n_N + (long long)(kir_e)] = t_1[kir_i];
    }
    float v_vals[1];
    int v_idx[1];
    {
        float* kir_scr_1 = reinterpret_cast<float*>(kir_smem + 0);
        float* kir_scr_2 = reinterpret_cast<float*>(kir_smem + 512);
        int* kir_scr_3 = reinterpret_cast<int*>(kir_smem + 528);
        #pragma unroll
        for (int kir_i = 0; kir_i < 1; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            kir_scr_1[kir_e] = v_v[kir_i];
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 128; kir_t += 128) {
            const int kir_row = kir_t / 128, kir_j = kir_t % 128;
            const float kir_v = kir_scr_1[kir_t];
            int kir_rank = 0;
            for (int kir_m = 0; kir_m < 128; ++kir_m) {
                const float kir_u = kir_scr_1[kir_row * 128 + kir_m];
                kir_rank += ((kir_u != kir_u && kir_v == kir_v) || (kir_u > kir_v) || (((kir_u == kir_v) || (kir_u != kir_u && kir_v != kir_v)) && kir_m < kir_j));
            }
            if (kir_rank < 4) {
                kir_scr_2[kir_row * 4 + kir_rank] = kir_v;
                kir_scr_3[kir_row * 4 + kir_rank] = kir_j;
            }
        }
        __syncthreads();
        #pragma unroll
        for (int kir_i = 0; kir_i < 1; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            if (kir_e < 4) {
                v_vals[kir_i] = kir_scr_2[kir_e];
            }
        }
        #pragma unroll
        for (int kir_i = 0; kir_i < 1; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            if (kir_e < 4) {
                v_idx[kir_i] = kir_scr_3[kir_e];
            }
        }
        __syncthreads();
    }
    #pragma unroll
    for (int kir_i = 0; kir_i < 1; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        if (kir_e < 4) {
            t_tv[(long long)(v_row) * p_K + (long long)(kir_e)] = v_vals[kir_i];
        }
    }
    #pragma unroll
    for (int kir_i = 0; kir_i < 1; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        if (kir_e < 4) {
            t_ti[(long long)(v_row) * p_K + (long long)(kir_e)] = v_idx[kir_i];
        }
    }
    int t_2;
    {
        float* kir_scr_4 = reinterpret_cast<float*>(kir_smem + 0);
        int* kir_scr_5 = reinterpret_cast<int*>(kir_smem + 512);
        #pragma unroll
        for (int kir_i = 0; kir_i < 1; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            kir_scr_4[kir_e] = v_v[kir_i];
            kir_scr_5[kir_e] = (kir_e / 1) % 128;
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 64; kir_t += 128) {
            const int kir_p = (kir_t / 64) * 128 + kir_t % 64;
            const float kir_a = kir_scr_4[kir_p], kir_b = kir_scr_4[kir_p + 64];
            if ((kir_a == kir_a) && (kir_b != kir_b || kir_b > kir_a)) {
                kir_scr_4[kir_p] = kir_b;
                kir_scr_5[kir_p] = kir_scr_5[kir_p + 64];
            }
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 32; kir_t += 128) {
            const int kir_p = (kir_t / 32) * 128 + kir_t % 32;
            const float kir_a = kir_scr_4[kir_p], kir_b = kir_scr_4[kir_p + 32];
            if ((kir_a == kir_a) && (kir_b != kir_b || kir_b > kir_a)) {
                kir_scr_4[kir_p] = kir_b;
                kir_scr_5[kir_p] = kir_scr_5[kir_p + 32];
            }
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 16; kir_t += 128) {
            const int kir_p = (kir_t / 16) * 128 + kir_t % 16;
            const float kir_a = kir_scr_4[kir_p], kir_b = kir_scr_4[kir_p + 16];
            if ((kir_a == kir_a) && (kir_b != kir_b || kir_b > kir_a)) {
                kir_scr_4[kir_p] = kir_b;
                kir_scr_5[kir_p] = kir_scr_5[kir_p + 16];
            }
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 8; kir_t += 128) {
            const int kir_p = (kir_t / 8) * 128 + kir_t % 8;
            const float kir_a = kir_scr_4[kir_p], kir_b = kir_scr_4[kir_p + 8];
            if ((kir_a == kir_a) && (kir_b != kir_b || kir_b > kir_a)) {
                kir_scr_4[kir_p] = kir_b;
                kir_scr_5[kir_p] = kir_scr_5[kir_p + 8];
            }
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 4; kir_t += 128) {
            const int kir_p = (kir_t / 4) * 128 + kir_t % 4;
            const float kir_a = kir_scr_4[kir_p], kir_b = kir_scr_4[kir_p + 4];
            if ((kir_a == kir_a) && (kir_b != kir_b || kir_b > kir_a)) {
                kir_scr_4[kir_p] = kir_b;
                kir_scr_5[kir_p] = kir_scr_5[kir_p + 4];
            }
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 2; kir_t += 128) {
            const int kir_p = (kir_t / 2) * 128 + kir_t % 2;
            const float kir_a = kir_scr_4[kir_p], kir_b = kir_scr_4[kir_p + 2];
            if ((kir_a == kir_a) && (kir_b != kir_b || kir_b > kir_a)) {
                kir_scr_4[kir_p] = kir_b;
                kir_scr_5[kir_p] = kir_scr_5[kir_p + 2];
            }
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 1; kir_t += 128) {
            const int kir_p = (kir_t / 1) * 128 + kir_t % 1;
            const float kir_a = kir_scr_4[kir_p], kir_b = kir_scr_4[kir_p + 1];
            if ((kir_a == kir_a) && (kir_b != kir_b || kir_b > kir_a)) {
                kir_scr_4[kir_p] = kir_b;
                kir_scr_5[kir_p] = kir_scr_5[kir_p + 1];
            }
        }
        __syncthreads();
        t_2 = kir_scr_5[0];
        __syncthreads();
    }
    int v_old;
    {
        int* kir_scr_6 = reinterpret_cast<int*>(kir_smem + 0);
        if (kir_tid == 0) {
            kir_scr_6[0] = (int)atomicAdd(reinterpret_cast<int*>(&t_hist[(long long)(t_2)]), (int)1);
        }
        __syncthreads();
        v_old = kir_scr_6[0];
        __syncthreads();
    }
    float t_3[1];
    #pragma unroll
    for (int kir_i = 0; kir_i < 1; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        const bool kir_a0 = ((kir_e) < n_N);
        t_3[kir_i] = (kir_a0 ? v_v[kir_i] : 0.0f);
    }
    float t_4[1];
    {
        float* kir_scr_7 = reinterpret_cast<float*>(kir_smem + 0);
        #pragma unroll
        for (int kir_i = 0; kir_i < 1; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            kir_scr_7[kir_e] = t_3[kir_i];
        }
        __syncthreads();
        #pragma unroll
        for (int kir_i = 0; kir_i < 1; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            const int kir_x0 = (kir_e / 16);
            const int kir_x1 = (kir_e % 16);
            t_4[kir_i] = kir_scr_7[(kir_x1 * 8 + kir_x0)];
        }
        __syncthreads();
    }
    float t_5[1];
    {
        float* kir_scr_8 = reinterpret_cast<float*>(kir_smem + 0);
        float* kir_scr_9 = reinterpret_cast<float*>(kir_smem + 512);
        #pragma unroll
        for (int kir_i = 0; kir_i < 1; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            kir_scr_8[kir_e] = t_4[kir_i];
        }
        #pragma unroll
        for (int kir_i = 0; kir_i < 1; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            kir_scr_9[kir_e] = t_3[kir_i];
        }
        __syncthreads();
        #pragma unroll
        for (int kir_i = 0; kir_i < 1; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            const int kir_x0 = (kir_e / 8);
            const int kir_x1 = (kir_e % 8);
            if (kir_e < 64) {
                float kir_s = 0.0f;
                for (int kir_k = 0; kir_k < 16; ++kir_k) {
                    kir_s += kir_scr_8[kir_x0 * 16 + kir_k] * kir_scr_9[kir_k * 8 + kir_x1];
                }
                t_5[kir_i] = kir_s;
            }
        }
        __syncthreads();
    }
    float t_6[1];
    {
        float* kir_scr_10 = reinterpret_cast<float*>(kir_smem + 0);
        #pragma unroll
        for (int kir_i = 0; kir_i < 1; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            if (kir_e < 64) {
                kir_scr_10[kir_e] = t_5[kir_i];
            }
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 32; kir_t += 128) {
            const int kir_p = (kir_t / 32) * 64 + kir_t % 32;
            const float kir_a = kir_scr_10[kir_p], kir_b = kir_scr_10[kir_p + 32];
            kir_scr_10[kir_p] = (kir_a + kir_b);
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 16; kir_t += 128) {
            const int kir_p = (kir_t / 16) * 64 + kir_t % 16;
            const float kir_a = kir_scr_10[kir_p], kir_b = kir_scr_10[kir_p + 16];
            kir_scr_10[kir_p] = (kir_a + kir_b);
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 8; kir_t += 128) {
            const int kir_p = (kir_t / 8) * 64 + kir_t % 8;
            const float kir_a = kir_scr_10[kir_p], kir_b = kir_scr_10[kir_p + 8];
            kir_scr_10[kir_p] = (kir_a + kir_b);
        }
        __syncthreads();
        #pragma unroll
        for (int kir_i = 0; kir_i < 1; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            if (kir_e < 8) {
                t_6[kir_i] = kir_scr_10[(kir_e / 8) * 64 + kir_e % 8];
            }
        }
        __syncthreads();
    }
    #pragma unroll
    for (int kir_i = 0; kir_i < 1; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        if (kir_e < 8) {
            t_g[(long long)(v_row) * 8 + (long long)(kir_e)] = t_6[kir_i];
        }
    }
}
