extern "C" __global__ void __launch_bounds__(128, 1) softmax(
    const hip_bfloat16* t_x,
    hip_bfloat16* t_y,
    const int n_M,
    const int n_N) {
    const int kir_tid = threadIdx.x;
    __shared__ __align__(16) unsigned char kir_smem[4096];
    int v_row = (int)blockIdx.x;
    hip_bfloat16 t[8];
    #pragma unroll
    for (int kir_i = 0; kir_i < 8; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        t[kir_i] = ((kir_e) < n_N) ? t_x[(long long)(v_row) * n_N + (long long)(kir_e)] : kir_bf16_bits(0xff80);
    }
    float v_v[8];
    #pragma unroll
    for (int kir_i = 0; kir_i < 8; ++kir_i) {
        v_v[kir_i] = kir_bf16_to_f32(t[kir_i]);
    }
    float t_1;
    {
        float* kir_scr = reinterpret_cast<float*>(kir_smem + 0);
        #pragma unroll
        for (int kir_i = 0; kir_i < 8; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            kir_scr[kir_e] = v_v[kir_i];
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 512; kir_t += 128) {
            const int kir_p = (kir_t / 512) * 1024 + kir_t % 512;
            const float kir_a = kir_scr[kir_p], kir_b = kir_scr[kir_p + 512];
            kir_scr[kir_p] = (kir_fmax(kir_a, kir_b));
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 256; kir_t += 128) {
            const int kir_p = (kir_t / 256) * 1024 + kir_t % 256;
            const float kir_a = kir_scr[kir_p], kir_b = kir_scr[kir_p + 256];
            kir_scr[kir_p] = (kir_fmax(kir_a, kir_b));
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 128; kir_t += 128) {
            const int kir_p = (kir_t / 128) * 1024 + kir_t % 128;
            const float kir_a = kir_scr[kir_p], kir_b = kir_scr[kir_p + 128];
            kir_scr[kir_p] = (kir_fmax(kir_a, kir_b));
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 64; kir_t += 128) {
            const int kir_p = (kir_t / 64) * 1024 + kir_t % 64;
            const float kir_a = kir_scr[kir_p], kir_b = kir_scr[kir_p + 64];
            kir_scr[kir_p] = (kir_fmax(kir_a, kir_b));
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 32; kir_t += 128) {
            const int kir_p = (kir_t / 32) * 1024 + kir_t % 32;
            const float kir_a = kir_scr[kir_p], kir_b = kir_scr[kir_p + 32];
            kir_scr[kir_p] = (kir_fmax(kir_a, kir_b));
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 16; kir_t += 128) {
            const int kir_p = (kir_t / 16) * 1024 + kir_t % 16;
            const float kir_a = kir_scr[kir_p], kir_b = kir_scr[kir_p + 16];
            kir_scr[kir_p] = (kir_fmax(kir_a, kir_b));
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 8; kir_t += 128) {
            const int kir_p = (kir_t / 8) * 1024 + kir_t % 8;
            const float kir_a = kir_scr[kir_p], kir_b = kir_scr[kir_p + 8];
            kir_scr[kir_p] = (kir_fmax(kir_a, kir_b));
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 4; kir_t += 128) {
            const int kir_p = (kir_t / 4) * 1024 + kir_t % 4;
            const float kir_a = kir_scr[kir_p], kir_b = kir_scr[kir_p + 4];
            kir_scr[kir_p] = (kir_fmax(kir_a, kir_b));
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 2; kir_t += 128) {
            const int kir_p = (kir_t / 2) * 1024 + kir_t % 2;
            const float kir_a = kir_scr[kir_p], kir_b = kir_scr[kir_p + 2];
            kir_scr[kir_p] = (kir_fmax(kir_a, kir_b));
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 1; kir_t += 128) {
            const int kir_p = (kir_t / 1) * 1024 + kir_t % 1;
            const float kir_a = kir_scr[kir_p], kir_b = kir_scr[kir_p + 1];
            kir_scr[kir_p] = (kir_fmax(kir_a, kir_b));
        }
        __syncthreads();
        t_1 = kir_scr[0];
        __syncthreads();
    }
    float t_2[8];
    #pragma unroll
    for (int kir_i = 0; kir_i < 8; ++kir_i) {
        t_2[kir_i] = (v_v[kir_i] - t_1);
    }
    float v_e[8];
    #pragma unroll
    for (int kir_i = 0; kir_i < 8; ++kir_i) {
        v_e[kir_i] = (expf(t_2[kir_i]));
    }
    float t_3;
    {
        float* kir_scr_1 = reinterpret_cast<float*>(kir_smem + 0);
        #pragma unroll
        for (int kir_i = 0; kir_i < 8; ++kir_i) {
            const int kir_e = kir_i * 128 + kir_tid;
            kir_scr_1[kir_e] = v_e[kir_i];
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 512; kir_t += 128) {
            const int kir_p = (kir_t / 512) * 1024 + kir_t % 512;
            const float kir_a = kir_scr_1[kir_p], kir_b = kir_scr_1[kir_p + 512];
            kir_scr_1[kir_p] = (kir_a + kir_b);
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 256; kir_t += 128) {
            const int kir_p = (kir_t / 256) * 1024 + kir_t % 256;
            const float kir_a = kir_scr_1[kir_p], kir_b = kir_scr_1[kir_p + 256];
            kir_scr_1[kir_p] = (kir_a + kir_b);
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 128; kir_t += 128) {
            const int kir_p = (kir_t / 128) * 1024 + kir_t % 128;
            const float kir_a = kir_scr_1[kir_p], kir_b = kir_scr_1[kir_p + 128];
            kir_scr_1[kir_p] = (kir_a + kir_b);
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 64; kir_t += 128) {
            const int kir_p = (kir_t / 64) * 1024 + kir_t % 64;
            const float kir_a = kir_scr_1[kir_p], kir_b = kir_scr_1[kir_p + 64];
            kir_scr_1[kir_p] = (kir_a + kir_b);
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 32; kir_t += 128) {
            const int kir_p = (kir_t / 32) * 1024 + kir_t % 32;
            const float kir_a = kir_scr_1[kir_p], kir_b = kir_scr_1[kir_p + 32];
            kir_scr_1[kir_p] = (kir_a + kir_b);
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 16; kir_t += 128) {
            const int kir_p = (kir_t / 16) * 1024 + kir_t % 16;
            const float kir_a = kir_scr_1[kir_p], kir_b = kir_scr_1[kir_p + 16];
            kir_scr_1[kir_p] = (kir_a + kir_b);
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 8; kir_t += 128) {
            const int kir_p = (kir_t / 8) * 1024 + kir_t % 8;
            const float kir_a = kir_scr_1[kir_p], kir_b = kir_scr_1[kir_p + 8];
            kir_scr_1[kir_p] = (kir_a + kir_b);
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 4; kir_t += 128) {
            const int kir_p = (kir_t / 4) * 1024 + kir_t % 4;
            const float kir_a = kir_scr_1[kir_p], kir_b = kir_scr_1[kir_p + 4];
            kir_scr_1[kir_p] = (kir_a + kir_b);
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 2; kir_t += 128) {
            const int kir_p = (kir_t / 2) * 1024 + kir_t % 2;
            const float kir_a = kir_scr_1[kir_p], kir_b = kir_scr_1[kir_p + 2];
            kir_scr_1[kir_p] = (kir_a + kir_b);
        }
        __syncthreads();
        for (int kir_t = kir_tid; kir_t < 1; kir_t += 128) {
            const int kir_p = (kir_t / 1) * 1024 + kir_t % 1;
            const float kir_a = kir_scr_1[kir_p], kir_b = kir_scr_1[kir_p + 1];
            kir_scr_1[kir_p] = (kir_a + kir_b);
        }
        __syncthreads();
        t_3 = kir_scr_1[0];
        __syncthreads();
    }
    float t_4[8];
    #pragma unroll
    for (int kir_i = 0; kir_i < 8; ++kir_i) {
        t_4[kir_i] = (v_e[kir_i] / t_3);
    }
    hip_bfloat16 t_5[8];
    #pragma unroll
    for (int kir_i = 0; kir_i < 8; ++kir_i) {
        t_5[kir_i] = kir_f32_to_bf16(t_4[kir_i]);
    }
    #pragma unroll
    for (int kir_i = 0; kir_i < 8; ++kir_i) {
        const int kir_e = kir_i * 128 + kir_tid;
        if (((kir_e) < n_N)) t_y[(long long)(v_row) * n_N + (long long)(kir_e)] = t_5[kir_i];
    }
}
