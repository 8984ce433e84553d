extern "C" __global__ void __launch_bounds__(128, 1) embedding_bag(
    const hip_bfloat16* t_table,
    const long long* t_idx,
    hip_bfloat16* t_out,
    const int n_R,
    const int n_D,
    const int n_NB,
    const int n_L) {
    const int kir_tid = threadIdx.x;
    __shared__ __align__(16) unsigned char kir_smem[16384];
    int v_bag = (int)blockIdx.x;
    long long v_rows[1];
    #pragma unroll
    for (int kir_i = 0; kir_i < 1; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        if (kir_e < 32) {
            v_rows[kir_i] = ((kir_e) < n_L) ? t_idx[(long long)(v_bag) * n_L + (long long)(kir_e)] : 0LL;
        }
    }
    hip_bfloat16 v_vals[32];
    {
        long long* kir_scr = reinterpret_cast<long long*>(kir_smem + 0);
        #pragma unroll
        for (int kir_i = 0; kir_i < 1; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            if (kir_e < 32) {
                kir_scr[kir_e] = v_rows[kir_i];
            }
        }
        __syncthreads();
        #pragma unroll
        for (int kir_i = 0; kir_i < 32; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            const int kir_x0 = (kir_e / 128);
            const int kir_x1 = (kir_e % 128);
            v_vals[kir_i] = ((((kir_x0) < n_L)) && (((kir_x1) < n_D))) ? t_table[(long long)(kir_scr[(kir_x0)]) * n_D + (long long)(kir_x1)] : kir_bf16_bits(0x0);
        }
        __syncthreads();
    }
    float t[32];
    #pragma unroll
    for (int kir_i = 0; kir_i < 32; ++kir_i) {
        t[kir_i] = kir_bf16_to_f32(v_vals[kir_i]);
    }
    float t_1[1];
    {
        float* kir_scr_1 = reinterpret_cast<float*>(kir_smem + 0);
        #pragma unroll
        for (int kir_i = 0; kir_i < 32; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            kir_scr_1[kir_e] = t[kir_i];
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 2048; kir_t += 128) {
            const int kir_p = (kir_t / 2048) * 4096 + kir_t % 2048;
            const float kir_a = kir_scr_1[kir_p], kir_b = kir_scr_1[kir_p + 2048];
            kir_scr_1[kir_p] = (kir_a + kir_b);
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 1024; kir_t += 128) {
            const int kir_p = (kir_t / 1024) * 4096 + kir_t % 1024;
            const float kir_a = kir_scr_1[kir_p], kir_b = kir_scr_1[kir_p + 1024];
            kir_scr_1[kir_p] = (kir_a + kir_b);
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 512; kir_t += 128) {
            const int kir_p = (kir_t / 512) * 4096 + kir_t % 512;
            const float kir_a = kir_scr_1[kir_p], kir_b = kir_scr_1[kir_p + 512];
            kir_scr_1[kir_p] = (kir_a + kir_b);
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 256; kir_t += 128) {
            const int kir_p = (kir_t / 256) * 4096 + kir_t % 256;
            const float kir_a = kir_scr_1[kir_p], kir_b = kir_scr_1[kir_p + 256];
            kir_scr_1[kir_p] = (kir_a + kir_b);
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 128; kir_t += 128) {
            const int kir_p = (kir_t / 128) * 4096 + kir_t % 128;
            const float kir_a = kir_scr_1[kir_p], kir_b = kir_scr_1[kir_p + 128];
            kir_scr_1[kir_p] = (kir_a + kir_b);
        }
        __syncthreads();
        #pragma unroll
        for (int kir_i = 0; kir_i < 1; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            t_1[kir_i] = kir_scr_1[(kir_e / 128) * 4096 + kir_e % 128];
        }
        __syncthreads();
    }
    hip_bfloat16 t_2[1];
    #pragma unroll
    for (int kir_i = 0; kir_i < 1; ++kir_i) {
        t_2[kir_i] = kir_f32_to_bf16(t_1[kir_i]);
    }
    #pragma unroll
    for (int kir_i = 0; kir_i < 1; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        if (((kir_e) < n_D)) t_out[(long long)(v_bag) * n_D + (long long)(kir_e)] = t_2[kir_i];
    }
}
