extern "C" __global__ void __launch_bounds__(64, 1) gemm(
    const __half* t_a,
    const __half* t_b,
    float* t_c,
    const int n_M,
    const int n_K,
    const int n_N) {
    constexpr int p_BM = 16;
    constexpr int p_BN = 48;
    constexpr int p_BK = 16;
    const int kir_tid = threadIdx.x;
    __shared__ __align__(16) unsigned char kir_smem[5120];
    int t = (int)blockIdx.x;
    int v_m0 = ((int)((unsigned int)t * (unsigned int)p_BM));
    int t_1 = (int)blockIdx.y;
    int v_n0 = ((int)((unsigned int)t_1 * (unsigned int)p_BN));
    int t_2 = ((int)(n_K / p_BK));
    float v_acc[12];
    #pragma unroll
    for (int kir_i = 0; kir_i < 12; ++kir_i) {
        v_acc[kir_i] = 0.0f;
    }
    for (int v_k = 0; v_k < t_2; v_k += 1) {
        int t_3 = ((int)((unsigned int)v_k * (unsigned int)p_BK));
        __half v_a_tile[4];
        #pragma unroll
        for (int kir_i = 0; kir_i < 4; ++kir_i) {
            const int kir_e = kir_i * 64 + kir_tid;
            const int kir_x0 = (kir_e / 16);
            const int kir_x1 = (kir_e % 16);
            v_a_tile[kir_i] = t_a[(long long)(v_m0 + kir_x0) * n_K + (long long)(t_3 + kir_x1)];
        }
        int t_4 = ((int)((unsigned int)v_k * (unsigned int)p_BK));
        __half v_b_tile[12];
        #pragma unroll
        for (int kir_i = 0; kir_i < 12; ++kir_i) {
            const int kir_e = kir_i * 64 + kir_tid;
            const int kir_x0 = (kir_e / 48);
            const int kir_x1 = (kir_e % 48);
            v_b_tile[kir_i] = t_b[(long long)(t_4 + kir_x0) * n_N + (long long)(v_n0 + kir_x1)];
        }
        float v_acc_1[12];
        {
            __half* kir_scr = reinterpret_cast<__half*>(kir_smem + 0);
            __half* kir_scr_1 = reinterpret_cast<__half*>(kir_smem + 512);
            float* kir_scr_2 = reinterpret_cast<float*>(kir_smem + 2048);
            #pragma unroll
            for (int kir_i = 0; kir_i < 4; ++kir_i) {
                const int kir_e = kir_i * 64 + kir_tid;
                kir_scr[kir_e] = v_a_tile[kir_i];
            }
            #pragma unroll
            for (int kir_i = 0; kir_i < 12; ++kir_i) {
                const int kir_e = kir_i * 64 + kir_tid;
                kir_scr_1[kir_e] = v_b_tile[kir_i];
            }
            __syncthreads();
            const int kir_wave = kir_tid / 64, kir_l = kir_tid % 64;
            const int kir_r = kir_l % 16, kir_kq = (kir_l / 16) * 4;
            for (int kir_br = 0; kir_br < 1; ++kir_br) {
                #pragma unroll
                for (int kir_j = 0; kir_j < 3; ++kir_j) {
                    const int kir_bc = kir_j * 1 + kir_wave;
                    kir_float4 kir_d = {};
                    for (int kir_k0 = 0; kir_k0 < 16; kir_k0 += 16) {
                        kir_half4 kir_va, kir_vb;
                        kir_va[0] = kir_bitcast<_Float16>(kir_scr[(kir_br * 16 + kir_r) * 16 + kir_k0 + kir_kq + 0]);
                        kir_vb[0] = kir_bitcast<_Float16>(kir_scr_1[(kir_k0 + kir_kq + 0) * 48 + kir_bc * 16 + kir_r]);
                        kir_va[1] = kir_bitcast<_Float16>(kir_scr[(kir_br * 16 + kir_r) * 16 + kir_k0 + kir_kq + 1]);
                        kir_vb[1] = kir_bitcast<_Float16>(kir_scr_1[(kir_k0 + kir_kq + 1) * 48 + kir_bc * 16 + kir_r]);
                        kir_va[2] = kir_bitcast<_Float16>(kir_scr[(kir_br * 16 + kir_r) * 16 + kir_k0 + kir_kq + 2]);
                        kir_vb[2] = kir_bitcast<_Float16>(kir_scr_1[(kir_k0 + kir_kq + 2) * 48 + kir_bc * 16 + kir_r]);
                        kir_va[3] = kir_bitcast<_Float16>(kir_scr[(kir_br * 16 + kir_r) * 16 + kir_k0 + kir_kq + 3]);
                        kir_vb[3] = kir_bitcast<_Float16>(kir_scr_1[(kir_k0 + kir_kq + 3) * 48 + kir_bc * 16 + kir_r]);
                        kir_d = __builtin_amdgcn_mfma_f32_16x16x16f16(kir_va, kir_vb, kir_d, 0, 0, 0);
                    }
                    #pragma unroll
                    for (int kir_q = 0; kir_q < 4; ++kir_q) {
                        const int kir_row = 4 * (kir_l / 16) + kir_q;
                        kir_scr_2[kir_row * 48 + kir_bc * 16 + kir_r] = kir_d[kir_q];
                    }
                }
                __syncthreads();
                #pragma unroll
                for (int kir_i = 0; kir_i < 12; ++kir_i) {
                    const int kir_e = kir_i * 64 + kir_tid - kir_br * 768;
                    if (kir_e >= 0 && kir_e < 768) {
                        v_acc_1[kir_i] = kir_scr_2[kir_e] + v_acc[kir_i];
                    }
                }
                __syncthreads();
            }
        }
        for (int kir_i = 0; kir_i < 12; ++kir_i) v_acc[kir_i] = v_acc_1[kir_i];
    }
    #pragma unroll
    for (int kir_i = 0; kir_i < 12; ++kir_i) {
        const int kir_e = kir_i * 64 + kir_tid;
        const int kir_x0 = (kir_e / 48);
        const int kir_x1 = (kir_e % 48);
        t_c[(long long)(v_m0 + kir_x0) * n_N + (long long)(v_n0 + kir_x1)] = v_acc[kir_i];
    }
}
