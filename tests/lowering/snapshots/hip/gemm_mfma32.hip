extern "C" __global__ void __launch_bounds__(128, 1) gemm(
    const hip_bfloat16* t_a,
    const hip_bfloat16* t_b,
    float* t_c,
    const int n_M,
    const int n_K,
    const int n_N) {
    constexpr int p_BM = 32;
    constexpr int p_BN = 32;
    constexpr int p_BK = 32;
    const int kir_tid = threadIdx.x;
    __shared__ __align__(16) unsigned char kir_smem[8192];
    int t = (int)blockIdx.x;
    int v_m0 = ((int)((unsigned int)t * (unsigned int)p_BM));
    int t_1 = (int)blockIdx.y;
    int v_n0 = ((int)((unsigned int)t_1 * (unsigned int)p_BN));
    int t_2 = ((int)(n_K / p_BK));
    float v_acc[8];
    #pragma unroll
    for (int kir_i = 0; kir_i < 8; ++kir_i) {
        v_acc[kir_i] = 0.0f;
    }
    for (int v_k = 0; v_k < t_2; v_k += 1) {
        int t_3 = ((int)((unsigned int)v_k * (unsigned int)p_BK));
        hip_bfloat16 v_a_tile[8];
        #pragma unroll
        for (int kir_i = 0; kir_i < 8; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            const int kir_x0 = (kir_e / 32);
            const int kir_x1 = (kir_e % 32);
            v_a_tile[kir_i] = t_a[(long long)(v_m0 + kir_x0) * n_K + (long long)(t_3 + kir_x1)];
        }
        int t_4 = ((int)((unsigned int)v_k * (unsigned int)p_BK));
        hip_bfloat16 v_b_tile[8];
        #pragma unroll
        for (int kir_i = 0; kir_i < 8; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            const int kir_x0 = (kir_e / 32);
            const int kir_x1 = (kir_e % 32);
            v_b_tile[kir_i] = t_b[(long long)(t_4 + kir_x0) * n_N + (long long)(v_n0 + kir_x1)];
        }
        float v_acc_1[8];
        {
            hip_bfloat16* kir_scr = reinterpret_cast<hip_bfloat16*>(kir_smem + 0);
            hip_bfloat16* kir_scr_1 = reinterpret_cast<hip_bfloat16*>(kir_smem + 2048);
            float* kir_scr_2 = reinterpret_cast<float*>(kir_smem + 4096);
            #pragma unroll
            for (int kir_i = 0; kir_i < 8; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                kir_scr[kir_e] = v_a_tile[kir_i];
            }
            #pragma unroll
            for (int kir_i = 0; kir_i < 8; ++kir_i) {
                const int kir_e = kir_i * 128 + kir_tid;
                kir_scr_1[kir_e] = v_b_tile[kir_i];
            }
            __syncthreads();
            const int kir_wave = kir_tid / 64, kir_l = kir_tid % 64;
            const int kir_r = kir_l % 32, kir_kq = (kir_l / 32) * 4;
            for (int kir_br = 0; kir_br < 1; ++kir_br) {
                #pragma unroll
                for (int kir_j = 0; kir_j < 1; ++kir_j) {
                    const int kir_bc = kir_j * 2 + kir_wave;
                    if (kir_bc < 1) {
                        kir_float16 kir_d = {};
                        for (int kir_k0 = 0; kir_k0 < 32; kir_k0 += 8) {
                            kir_short4 kir_va, kir_vb;
                            kir_va[0] = kir_bitcast<short>(kir_scr[(kir_br * 32 + kir_r) * 32 + kir_k0 + kir_kq + 0]);
                            kir_vb[0] = kir_bitcast<short>(kir_scr_1[(kir_k0 + kir_kq + 0) * 32 + kir_bc * 32 + kir_r]);
                            kir_va[1] = kir_bitcast<short>(kir_scr[(kir_br * 32 + kir_r) * 32 + kir_k0 + kir_kq + 1]);
                            kir_vb[1] = kir_bitcast<short>(kir_scr_1[(kir_k0 + kir_kq + 1) * 32 + kir_bc * 32 + kir_r]);
                            kir_va[2] = kir_bitcast<short>(kir_scr[(kir_br * 32 + kir_r) * 32 + kir_k0 + kir_kq + 2]);
                            kir_vb[2] = kir_bitcast<short>(kir_scr_1[(kir_k0 + kir_kq + 2) * 32 + kir_bc * 32 + kir_r]);
                            kir_va[3] = kir_bitcast<short>(kir_scr[(kir_br * 32 + kir_r) * 32 + kir_k0 + kir_kq + 3]);
                            kir_vb[3] = kir_bitcast<short>(kir_scr_1[(kir_k0 + kir_kq + 3) * 32 + kir_bc * 32 + kir_r]);
                            kir_d = __builtin_amdgcn_mfma_f32_32x32x8bf16_1k(kir_va, kir_vb, kir_d, 0, 0, 0);
                        }
                        #pragma unroll
                        for (int kir_q = 0; kir_q < 16; ++kir_q) {
                            const int kir_row = 8 * (kir_q / 4) + 4 * (kir_l / 32) + kir_q % 4;
                            kir_scr_2[kir_row * 32 + kir_bc * 32 + kir_r] = kir_d[kir_q];
                        }
                    }
                }
                __syncthreads();
                #pragma unroll
                for (int kir_i = 0; kir_i < 8; ++kir_i) {
                    const int kir_e = kir_i * 128 + kir_tid - kir_br * 1024;
                    if (kir_e >= 0 && kir_e < 1024) {
                        v_acc_1[kir_i] = kir_scr_2[kir_e] + v_acc[kir_i];
                    }
                }
                __syncthreads();
            }
        }
        for (int kir_i = 0; kir_i < 8; ++kir_i) v_acc[kir_i] = v_acc_1[kir_i];
    }
    #pragma unroll
    for (int kir_i = 0; kir_i < 8; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        const int kir_x0 = (kir_e / 32);
        const int kir_x1 = (kir_e % 32);
        t_c[(long long)(v_m0 + kir_x0) * n_N + (long long)(v_n0 + kir_x1)] = v_acc[kir_i];
    }
}
