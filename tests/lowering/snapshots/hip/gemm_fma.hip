extern "C" __global__ void __launch_bounds__(64, 1) gemm(
    const hip_bfloat16* t_a,
    const hip_bfloat16* t_b,
    float* t_c,
    const int n_M,
    const int n_K,
    const int n_N) {
    constexpr int p_BM = 24;
    constexpr int p_BN = 40;
    constexpr int p_BK = 8;
    const int kir_tid = threadIdx.x;
    __shared__ __align__(16) unsigned char kir_smem[1024];
    int t = (int)blockIdx.x;
    int v_m0 = ((int)((unsigned int)t * (unsigned int)p_BM));
    int t_1 = (int)blockIdx.y;
    int v_n0 = ((int)((unsigned int)t_1 * (unsigned int)p_BN));
    int t_2 = ((int)(n_K / p_BK));
    float v_acc[15];
    #pragma unroll
    for (int kir_i = 0; kir_i < 15; ++kir_i) {
        v_acc[kir_i] = 0.0f;
    }
    for (int v_k = 0; v_k < t_2; v_k += 1) {
        int t_3 = ((int)((unsigned int)v_k * (unsigned int)p_BK));
        hip_bfloat16 v_a_tile[3];
        #pragma unroll
        for (int kir_i = 0; kir_i < 3; ++kir_i) {
            const int kir_e = kir_i * 64 + kir_tid;
            const int kir_x0 = (kir_e / 8);
            const int kir_x1 = (kir_e % 8);
            v_a_tile[kir_i] = t_a[(long long)(v_m0 + kir_x0) * n_K + (long long)(t_3 + kir_x1)];
        }
        int t_4 = ((int)((unsigned int)v_k * (unsigned int)p_BK));
        hip_bfloat16 v_b_tile[5];
        #pragma unroll
        for (int kir_i = 0; kir_i < 5; ++kir_i) {
            const int kir_e = kir_i * 64 + kir_tid;
            const int kir_x0 = (kir_e / 40);
            const int kir_x1 = (kir_e % 40);
            v_b_tile[kir_i] = t_b[(long long)(t_4 + kir_x0) * n_N + (long long)(v_n0 + kir_x1)];
        }
        float v_acc_1[15];
        {
            hip_bfloat16* kir_scr = reinterpret_cast<hip_bfloat16*>(kir_smem + 0);
            hip_bfloat16* kir_scr_1 = reinterpret_cast<hip_bfloat16*>(kir_smem + 384);
            #pragma unroll
            for (int kir_i = 0; kir_i < 3; ++kir_i) {
                const int kir_e = kir_i * 64 + kir_tid;
                kir_scr[kir_e] = v_a_tile[kir_i];
            }
            #pragma unroll
            for (int kir_i = 0; kir_i < 5; ++kir_i) {
                const int kir_e = kir_i * 64 + kir_tid;
                kir_scr_1[kir_e] = v_b_tile[kir_i];
            }
            __syncthreads();
            #pragma unroll
            for (int kir_i = 0; kir_i < 15; ++kir_i) {
                const int kir_e = kir_i * 64 + kir_tid;
                const int kir_x0 = (kir_e / 40);
                const int kir_x1 = (kir_e % 40);
                float kir_s = 0.0f;
                for (int kir_k = 0; kir_k < 8; ++kir_k) {
                    kir_s += kir_bf16_to_f32(kir_scr[kir_x0 * 8 + kir_k]) * kir_bf16_to_f32(kir_scr_1[kir_k * 40 + kir_x1]);
                }
                kir_s += v_acc[kir_i];
                v_acc_1[kir_i] = kir_s;
            }
            __syncthreads();
        }
        for (int kir_i = 0; kir_i < 15; ++kir_i) v_acc[kir_i] = v_acc_1[kir_i];
    }
    #pragma unroll
    for (int kir_i = 0; kir_i < 15; ++kir_i) {
        const int kir_e = kir_i * 64 + kir_tid;
        const int kir_x0 = (kir_e / 40);
        const int kir_x1 = (kir_e % 40);
        t_c[(long long)(v_m0 + kir_x0) * n_N + (long long)(v_n0 + kir_x1)] = v_acc[kir_i];
    }
}
