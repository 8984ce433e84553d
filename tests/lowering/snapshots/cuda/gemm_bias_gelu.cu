extern "C" __global__ void __launch_bounds__(128, 1) gemm_bias_gelu(
    const __nv_bfloat16* t_a,
    const __nv_bfloat16* t_b,
    const __nv_bfloat16* t_bias,
    __nv_bfloat16* t_c,
    const int n_M,
    const int n_K,
    const int n_N) {
    constexpr int p_BM = 64;
    constexpr int p_BN = 64;
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
    float v_acc[32];
    #pragma unroll
    for (int kir_i = 0; kir_i < 32; ++kir_i) {
        v_acc[kir_i] = 0.0f;
    }
    for (int v_k = 0; v_k < t_4; v_k += 1) {
        int t_5 = ((int)((unsigned int)v_k * (unsigned int)p_BK));
        __nv_bfloat16 v_at[16];
        #pragma unroll
        for (int kir_i = 0; kir_i < 16; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            const int kir_x0 = (kir_e / 32);
            const int kir_x1 = (kir_e % 32);
            v_at[kir_i] = ((((int)((unsigned int)t_1 + (unsigned int)(kir_x0)))) < n_M) ? t_a[(long long)(((int)((unsigned int)t_1 + (unsigned int)(kir_x0)))) * n_K + (long long)(((int)((unsigned int)t_5 + (unsigned int)(kir_x1))))] : __ushort_as_bfloat16(0x0);
        }
        __nv_bfloat16 v_bt[16];
        #pragma unroll
        for (int kir_i = 0; kir_i < 16; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            const int kir_x0 = (kir_e / 64);
            const int kir_x1 = (kir_e % 64);
            v_bt[kir_i] = ((((int)((unsigned int)t_3 + (unsigned int)(kir_x1)))) < n_N) ? t_b[(long long)(((int)((unsigned int)t_5 + (unsigned int)(kir_x0)))) * n_N + (long long)(((int)((unsigned int)t_3 + (unsigned int)(kir_x1))))] : __ushort_as_bfloat16(0x0);
        }
        float v_acc_1[32];
        {
            __nv_bfloat16* kir_scr = reinterpret_cast<__nv_bfloat16*>(kir_smem + 0);
            __nv_bfloat16* kir_scr_1 = reinterpret_cast<__nv_bfloat16*>(kir_smem + 4096);
            #pragma unroll
            for (int kir_i = 0; kir_i < 16; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                kir_scr[kir_e] = v_at[kir_i];
            }
            #pragma unroll
            for (int kir_i = 0; kir_i < 16; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                kir_scr_1[kir_e] = v_bt[kir_i];
            }
            __syncthreads();
            #pragma unroll
            for (int kir_i = 0; kir_i < 32; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                const int kir_x0 = (kir_e / 64);
                const int kir_x1 = (kir_e % 64);
                float kir_s = 0.0f;
                for (int kir_k = 0; kir_k < 32; ++kir_k) {
                    kir_s += __bfloat162float(kir_scr[kir_x0 * 32 + kir_k]) * __bfloat162float(kir_scr_1[kir_k * 64 + kir_x1]);
                }
                kir_s += v_acc[kir_i];
                v_acc_1[kir_i] = kir_s;
            }
            __syncthreads();
        }
        for (int kir_i = 0; kir_i < 32; ++kir_i) v_acc[kir_i] = v_acc_1[kir_i];
    }
    __nv_bfloat16 t_6[1];
    #pragma unroll
    for (int kir_i = 0; kir_i < 1; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        if (kir_e < 64) {
            t_6[kir_i] = ((((int)((unsigned int)t_3 + (unsigned int)(kir_e)))) < n_N) ? t_bias[(long long)(((int)((unsigned int)t_3 + (unsigned int)(kir_e))))] : __ushort_as_bfloat16(0x0);
        }
    }
    float t_7[1];
    #pragma unroll
    for (int kir_i = 0; kir_i < 1; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        if (kir_e < 64) {
            t_7[kir_i] = __bfloat162float(t_6[kir_i]);
        }
    }
    float v_h[32];
    {
        float* kir_scr_2 = reinterpret_cast<float*>(kir_smem + 0);
        #pragma unroll
        for (int kir_i = 0; kir_i < 1; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            if (kir_e < 64) {
                kir_scr_2[kir_e] = t_7[kir_i];
            }
        }
        __syncthreads();
        #pragma unroll
        for (int kir_i = 0; kir_i < 32; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            const int kir_x1 = (kir_e % 64);
            const float kir_a1 = kir_scr_2[(kir_x1)];
            v_h[kir_i] = (v_acc[kir_i] + kir_a1);
        }
        __syncthreads();
    }
    float t_8[32];
    #pragma unroll
    for (int kir_i = 0; kir_i < 32; ++kir_i) {
        t_8[kir_i] = (0.5f * v_h[kir_i]);
    }
    float t_9[32];
    #pragma unroll
    for (int kir_i = 0; kir_i < 32; ++kir_i) {
        t_9[kir_i] = (v_h[kir_i] * 0.7071067690849304f);
    }
    float t_10[32];
    #pragma unroll
    for (int kir_i = 0; kir_i < 32; ++kir_i) {
        t_10[kir_i] = (erff(t_9[kir_i]));
    }
    float t_11[32];
    #pragma unroll
    for (int kir_i = 0; kir_i < 32; ++kir_i) {
        t_11[kir_i] = (1.0f + t_10[kir_i]);
    }
    float v_g[32];
    #pragma unroll
    for (int kir_i = 0; kir_i < 32; ++kir_i) {
        v_g[kir_i] = (t_8[kir_i] * t_11[kir_i]);
    }
    __nv_bfloat16 t_12[32];
    #pragma unroll
    for (int kir_i = 0; kir_i < 32; ++kir_i) {
        t_12[kir_i] = __float2bfloat16_rn(v_g[kir_i]);
    }
    #pragma unroll
    for (int kir_i = 0; kir_i < 32; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        const int kir_x0 = (kir_e / 64);
        const int kir_x1 = (kir_e % 64);
        if (((((((int)((unsigned int)t_1 + (unsigned int)(kir_x0)))) < n_M)) && (((((int)((unsigned int)t_3 + (unsigned int)(kir_x1)))) < n_N)))) t_c[(long long)(((int)((unsigned int)t_1 + (unsigned int)(kir_x0)))) * n_N + (long long)(((int)((unsigned int)t_3 + (unsigned int)(kir_x1))))] = t_12[kir_i];
    }
}
