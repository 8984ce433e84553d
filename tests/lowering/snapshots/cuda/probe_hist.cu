extern "C" __global__ void __launch_bounds__(128, 1) probe_hist(
    const int* t_x,
    int* t_hist,
    int* t_first,
    const int n_N) {
    constexpr int p_BLOCK = 256;
    const int kir_tid = threadIdx.x;
    int t = (int)blockIdx.x;
    int t_1 = ((int)((unsigned int)t * (unsigned int)p_BLOCK));
    int v_v[2];
    #pragma unroll
    for (int kir_i = 0; kir_i < 2; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        v_v[kir_i] = ((((int)((unsigned int)t_1 + (unsigned int)(kir_e)))) < n_N) ? t_x[(long long)(((int)((unsigned int)t_1 + (unsigned int)(kir_e))))] : 0;
    }
    int v_old[2];
    #pragma unroll
    for (int kir_i = 0; kir_i < 2; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        v_old[kir_i] = 0;
        if (((((int)((unsigned int)t_1 + (unsigned int)(kir_e)))) < n_N)) {
            v_old[kir_i] = (int)atomicAdd(reinterpret_cast<int*>(&t_hist[(long long)(v_v[kir_i])]), (int)1);
        }
    }
    bool t_2[2];
    #pragma unroll
    for (int kir_i = 0; kir_i < 2; ++kir_i) {
        t_2[kir_i] = (v_old[kir_i] >= 0);
    }
    int t_3[2];
    #pragma unroll
    for (int kir_i = 0; kir_i < 2; ++kir_i) {
        t_3[kir_i] = (t_2[kir_i] ? 1 : 0);
    }
    #pragma unroll
    for (int kir_i = 0; kir_i < 2; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        if (((((int)((unsigned int)t_1 + (unsigned int)(kir_e)))) < n_N)) t_first[(long long)(((int)((unsigned int)t_1 + (unsigned int)(kir_e))))] = t_3[kir_i];
    }
}
