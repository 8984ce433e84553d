extern "C" __global__ void __launch_bounds__(128, 1) gemm_bias_gelu(
    const hip_bfloat16* t_a,
    const hip_bfloat16* t_b,
    const hip_bfloat16* t_bias,
    hip_bfloat16* t_c,
    const int n_M,
    const int n_K,
    const int n_N) {
    constexpr int p_BM = 64;
    constexpr int p_BN = 64;
    constexpr int p_BK = 32;
    const int kir_tid = threadIdx.x;
    __shared__ __align__(16) unsigned char kir_smem[16384];
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
        hip_bfloat16 v_at[16];
        #pragma unroll
        for (int kir_i = 0; kir_i < 16; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            const int kir_x0 = (kir_e / 32);
            const int kir_x1 = (kir_e % 32);
            v_at[kir_i] = ((((int)((unsigned int)t_1 + (unsigned int)(kir_x0)))) < n_M) ? t_a[(long long)(((int)((unsigned int)t_1 + (unsigned int)(kir_x0)))) * n_K + (long long)(((int)((unsigned int)t_5 + (unsigned int)(kir_x1))))] : kir_bf16_bits(0x0);
        }
        hip_bfloat16 v_bt[16];
        #pragma unroll
        for (int kir_i = 0; kir_i < 16; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            const int kir_x0 = (kir_e / 64);
            const int kir_x1 = (kir_e % 64);
            v_bt[kir_i] = ((((int)((unsigned int)t_3 + (unsigned int)(kir_x1)))) < n_N) ? t_b[(long long)(((int)((unsigned int)t_5 + (unsigned int)(kir_x0)))) * n_N + (long long)(((int)((unsigned int)t_3 + (unsigned int)(kir_x1))))] : kir_bf16_bits(0x0);
        }
        float v_acc_1[32];
        {
            hip_bfloat16* kir_scr = reinterpret_cast<hip_bfloat16*>(kir_smem + 0);
            hip_bfloat16* kir_scr_1 = reinterpret_cast<hip_bfloat16*>(kir_smem + 4096);
            float* kir_scr_2 = reinterpret_cast<float*>(kir_smem + 8192);
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
            const int kir_wave = kir_tid / 64, kir_l = kir_tid % 64;
            const int kir_r = kir_l % 32, kir_kq = (kir_l / 32) * 4;
            for (int kir_br = 0; kir_br < 2; ++kir_br) {
                #pragma unroll
                for (int kir_j = 0; kir_j < 1; ++kir_j) {
                    const int kir_bc = kir_j * 2 + kir_wave;
                    kir_float16 kir_d = {};
                    for (int kir_k0 = 0; kir_k0 < 32; kir_k0 += 8) {
                        kir_short4 kir_va, kir_vb;
                        kir_va[0] = kir_bitcast<short>(kir_scr[(kir_br * 32 + kir_r) * 32 + kir_k0 + kir_kq + 0]);
                        kir_vb[0] = kir_bitcast<short>(kir_scr_1[(kir_k0 + kir_kq + 0) * 64 + kir_bc * 32 + kir_r]);
                        kir_va[1] = kir_bitcast<short>(kir_scr[(kir_br * 32 + kir_r) * 32 + kir_k0 + kir_kq + 1]);
                        kir_vb[1] = kir_bitcast<short>(kir_scr_1[(kir_k0 + kir_kq + 1) * 64 + kir_bc * 32 + kir_r]);
                        kir_va[2] = kir_bitcast<short>(kir_scr[(kir_br * 32 + kir_r) * 32 + kir_k0 + kir_kq + 2]);
                        kir_vb[2] = kir_bitcast<short>(kir_scr_1[(kir_k0 + kir_kq + 2) * 64 + kir_bc * 32 + kir_r]);
                        kir_va[3] = kir_bitcast<short>(kir_scr[(kir_br * 32 + kir_r) * 32 + kir_k0 + kir_kq + 3]);
                        kir_vb[3] = kir_bitcast<short>(kir_scr_1[(kir_k0 + kir_kq + 3) * 64 + kir_bc * 32 + kir_r]);
                        kir_d = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(kir_va, kir_vb, kir_d, 0, 0, 0);
                    }
                    #pragma unroll
                    for (int kir_q = 0; kir_q < 16; ++kir_q) {
                        const int kir_row = 8 * (kir_q / 4) + 4 * (kir_l / 32) + kir_q % 4;
                        kir_scr_2[kir_row * 64 + kir_bc * 32 + kir_r] = kir_d[kir_q];
                    }
                }
                __syncthreads();
                #pragma unroll
                for (int kir_i = 0; kir_i < 32; ++kir_i) {
                    const int kir_e = kir_i * 128 + kir_tid - kir_br * 2048;
                    if (kir_e >= 0 && kir_e < 2048) {
                        v_acc_1[kir_i] = kir_scr_2[kir_e] + v_acc[kir_i];
                    }
                }
                __syncthreads();
            }
        }
        for (int kir_i = 0; kir_i < 32; ++kir_i) v_acc[kir_i] = v_acc_1[kir_i];
    }
    hip_bfloat16 t_6[1];
    #pragma unroll
    for (int kir_i = 0; kir_i < 1; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        if (kir_e < 64) {
            t_6[kir_i] = ((((int)((unsigned int)t_3 + (unsigned int)(kir_e)))) < n_N) ? t_bias[(long long)(((int)((unsigned int)t_3 + (unsigned int)(kir_e))))] : kir_bf16_bits(0x0);
        }
    }
    float t_7[1];
    #pragma unroll
    for (int kir_i = 0; kir_i < 1; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        if (kir_e < 64) {
            t_7[kir_i] = kir_bf16_to_f32(t_6[kir_i]);
        }
    }
    float v_h[32];
    {
        float* kir_scr_3 = reinterpret_cast<float*>(kir_smem + 0);
        #pragma unroll
        for (int kir_i = 0; kir_i < 1; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            if (kir_e < 64) {
                kir_scr_3[kir_e] = t_7[kir_i];
            }
        }
        __syncthreads();
        #pragma unroll
        for (int kir_i = 0; kir_i < 32; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            const int kir_x1 = (kir_e % 64);
            const float kir_a1 = kir_scr_3[(kir_x1)];
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
    hip_bfloat16 t_12[32];
    #pragma unroll
    for (int kir_i = 0; kir_i < 32; ++kir_i) {
        t_12[kir_i] = kir_f32_to_bf16(v_g[kir_i]);
    }
    #pragma unroll
    for (int kir_i = 0; kir_i < 32; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        const int kir_x0 = (kir_e / 64);
        const int kir_x1 = (kir_e % 64);
        if (((((((int)((unsigned int)t_1 + (unsigned int)(kir_x0)))) < n_M)) && (((((int)((unsigned int)t_3 + (unsigned int)(kir_x1)))) < n_N)))) t_c[(long long)(((int)((unsigned int)t_1 + (unsigned int)(kir_x0)))) * n_N + (long long)(((int)((unsigned int)t_3 + (unsigned int)(kir_x1))))] = t_12[kir_i];
    }
}
