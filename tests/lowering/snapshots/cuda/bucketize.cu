extern "C" __global__ void __launch_bounds__(128, 1) bucketize(
    const float* t_x,
    const float* t_bounds,
    int* t_out,
    const int n_N,
    const int n_B) {
    constexpr int p_BLOCK = 1024;
    constexpr int p_STEPS = 11;
    const int kir_tid = threadIdx.x;
    int t = (int)blockIdx.x;
    int t_1 = ((int)((unsigned int)t * (unsigned int)p_BLOCK));
    float v_v[8];
    #pragma unroll
    for (int kir_i = 0; kir_i < 8; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        v_v[kir_i] = ((((int)((unsigned int)t_1 + (unsigned int)(kir_e)))) < n_N) ? t_x[(long long)(((int)((unsigned int)t_1 + (unsigned int)(kir_e))))] : 0.0f;
    }
    int v_lo[8];
    #pragma unroll
    for (int kir_i = 0; kir_i < 8; ++kir_i) {
        v_lo[kir_i] = 0;
    }
    int v_hi[8];
    #pragma unroll
    for (int kir_i = 0; kir_i < 8; ++kir_i) {
        v_hi[kir_i] = n_B;
    }
    for (int v_it = 0; v_it < p_STEPS; v_it += 1) {
        int t_2[8];
        #pragma unroll
        for (int kir_i = 0; kir_i < 8; ++kir_i) {
            t_2[kir_i] = ((int)((unsigned int)v_lo[kir_i] + (unsigned int)v_hi[kir_i]));
        }
        int v_mid[8];
        #pragma unroll
        for (int kir_i = 0; kir_i < 8; ++kir_i) {
            v_mid[kir_i] = ((int)(t_2[kir_i] / 2));
        }
        bool t_3[8];
        #pragma unroll
        for (int kir_i = 0; kir_i < 8; ++kir_i) {
            t_3[kir_i] = (v_mid[kir_i] < n_B);
        }
        float v_bm[8];
        #pragma unroll
        for (int kir_i = 0; kir_i < 8; ++kir_i) {
            v_bm[kir_i] = t_3[kir_i] ? t_bounds[(long long)(v_mid[kir_i])] : kir_f32_bits(2139095040u);
        }
        bool t_4[8];
        #pragma unroll
        for (int kir_i = 0; kir_i < 8; ++kir_i) {
            t_4[kir_i] = (v_bm[kir_i] >= v_v[kir_i]);
        }
        bool v_right[8];
        #pragma unroll
        for (int kir_i = 0; kir_i < 8; ++kir_i) {
            v_right[kir_i] = (!t_4[kir_i]);
        }
        int t_5[8];
        #pragma unroll
        for (int kir_i = 0; kir_i < 8; ++kir_i) {
            t_5[kir_i] = ((int)((unsigned int)v_mid[kir_i] + (unsigned int)1));
        }
        int v_lo_1[8];
        #pragma unroll
        for (int kir_i = 0; kir_i < 8; ++kir_i) {
            v_lo_1[kir_i] = (v_right[kir_i] ? t_5[kir_i] : v_lo[kir_i]);
        }
        int v_hi_1[8];
        #pragma unroll
        for (int kir_i = 0; kir_i < 8; ++kir_i) {
            v_hi_1[kir_i] = (v_right[kir_i] ? v_hi[kir_i] : v_mid[kir_i]);
        }
        for (int kir_i = 0; kir_i < 8; ++kir_i) v_lo[kir_i] = v_lo_1[kir_i];
        for (int kir_i = 0; kir_i < 8; ++kir_i) v_hi[kir_i] = v_hi_1[kir_i];
    }
    int t_6[8];
    #pragma unroll
    for (int kir_i = 0; kir_i < 8; ++kir_i) {
        t_6[kir_i] = (v_lo[kir_i] < n_B ? v_lo[kir_i] : n_B);
    }
    #pragma unroll
    for (int kir_i = 0; kir_i < 8; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        if (((((int)((unsigned int)t_1 + (unsigned int)(kir_e)))) < n_N)) t_out[(long long)(((int)((unsigned int)t_1 + (unsigned int)(kir_e))))] = t_6[kir_i];
    }
}
