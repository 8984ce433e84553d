extern "C" __global__ void __launch_bounds__(128, 1) vector_add(
    const float* t_x,
    const float* t_y,
    float* t_z,
    const int n_N) {
    constexpr int p_BLOCK = 1024;
    const int kir_tid = threadIdx.x;
    int t = (int)blockIdx.x;
    int t_1 = ((int)((unsigned int)t * (unsigned int)p_BLOCK));
    float v_a[8];
    #pragma unroll
    for (int kir_i = 0; kir_i < 8; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        v_a[kir_i] = ((((int)((unsigned int)t_1 + (unsigned int)(kir_e)))) < n_N) ? t_x[(long long)(((int)((unsigned int)t_1 + (unsigned int)(kir_e))))] : 0.0f;
    }
    float v_b[8];
    #pragma unroll
    for (int kir_i = 0; kir_i < 8; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        v_b[kir_i] = ((((int)((unsigned int)t_1 + (unsigned int)(kir_e)))) < n_N) ? t_y[(long long)(((int)((unsigned int)t_1 + (unsigned int)(kir_e))))] : 0.0f;
    }
    float t_2[8];
    #pragma unroll
    for (int kir_i = 0; kir_i < 8; ++kir_i) {
        t_2[kir_i] = (v_a[kir_i] + v_b[kir_i]);
    }
    #pragma unroll
    for (int kir_i = 0; kir_i < 8; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        if (((((int)((unsigned int)t_1 + (unsigned int)(kir_e)))) < n_N)) t_z[(long long)(((int)((unsigned int)t_1 + (unsigned int)(kir_e))))] = t_2[kir_i];
    }
}
