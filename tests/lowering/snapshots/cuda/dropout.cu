extern "C" __global__ void __launch_bounds__(128, 1) dropout(
    const float* t_x,
    const long long* t_seed,
    float* t_y,
    const int n_N) {
    constexpr int p_BLOCK = 1024;
    const int kir_tid = threadIdx.x;
    int t = (int)blockIdx.x;
    int t_1 = ((int)((unsigned int)t * (unsigned int)p_BLOCK));
    long long v_s = t_seed[(long long)(0)];
    float v_v[8];
    #pragma unroll
    for (int kir_i = 0; kir_i < 8; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        v_v[kir_i] = ((((int)((unsigned int)t_1 + (unsigned int)(kir_e)))) < n_N) ? t_x[(long long)(((int)((unsigned int)t_1 + (unsigned int)(kir_e))))] : 0.0f;
    }
    float t_2[8];
    #pragma unroll
    for (int kir_i = 0; kir_i < 8; ++kir_i) {
        t_2[kir_i] = (v_v[kir_i] * 1.25f);
    }
    float t_3[8];
    #pragma unroll
    for (int kir_i = 0; kir_i < 8; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        const bool kir_a0 = ((kir_rand((unsigned long long)(long long)v_s, (unsigned int)(((int)((unsigned int)t_1 + (unsigned int)(kir_e)))), 0u)) >= 0.20000000298023224f);
        t_3[kir_i] = (kir_a0 ? t_2[kir_i] : 0.0f);
    }
    #pragma unroll
    for (int kir_i = 0; kir_i < 8; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        if (((((int)((unsigned int)t_1 + (unsigned int)(kir_e)))) < n_N)) t_y[(long long)(((int)((unsigned int)t_1 + (unsigned int)(kir_e))))] = t_3[kir_i];
    }
}
