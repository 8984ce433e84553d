extern "C" __global__ void __launch_bounds__(160, 1) ws_rows(
    const float* t_x,
    float* t_y,
    const int n_M,
    const int n_N,
    const __grid_constant__ CUtensorMap kir_tmap0) {
    constexpr int p_BM = 64;
    constexpr int p_BN = 64;
    constexpr int p_S = 2;
    const int kir_tid = threadIdx.x;
    const int kir_warp = kir_tid / 32;
    extern __shared__ __align__(1024) unsigned char kir_smem_raw[];
    // the swizzle patterns repeat every 1024 bytes: align the base (the launch adds the slack)
    unsigned char* kir_smem = kir_smem_raw + ((1024 - (kir_smem_u32(kir_smem_raw) & 1023)) & 1023);
    const uint32_t kir_smem_addr = kir_smem_u32(kir_smem);
    if (kir_tid == 0) {
        for (int kir_j = 0; kir_j < 2; ++kir_j) kir_mbar_init(kir_smem_addr + 32768 + 8 * kir_j, 1);
        for (int kir_j = 0; kir_j < 2; ++kir_j) kir_mbar_init(kir_smem_addr + 32784 + 8 * kir_j, 4);
        kir_mbar_init_fence();
    }
    __syncthreads();
    int t = (int)blockIdx.x;
    int v_m0 = ((int)((unsigned int)t * (unsigned int)p_BM));
    __syncthreads();
    if (kir_warp == 0) {  // role load
        if ((kir_tid % 32) == 0) {  // the role holds no tile: one thread runs it
            int t_1 = ((int)(n_N / p_BN));
            for (int v_j = 0; v_j < t_1; v_j += 1) {
                int v_s = ((int)(v_j % p_S));
                int t_2 = ((int)(v_j / p_S));
                int t_3 = ((int)((unsigned int)t_2 + (unsigned int)1));
                int t_4 = ((int)(t_3 % 2));
                kir_mbar_wait(kir_smem_addr + 32784 + 8 * (v_s), t_4);
                kir_mbar_expect(kir_smem_addr + 32768 + 8 * (v_s), 16384);
                int t_5 = ((int)((unsigned int)v_j * (unsigned int)p_BN));
                kir_tma_load_2d(kir_smem_addr + (0 + (v_s) * 16384 + ((0) / 32) * 8192 + (0) * 128 + ((0) % 32) * 4), &kir_tmap0, t_5, v_m0, kir_smem_addr + 32768 + 8 * (v_s));
                kir_tma_load_2d(kir_smem_addr + (0 + (v_s) * 16384 + ((32) / 32) * 8192 + (0) * 128 + ((32) % 32) * 4), &kir_tmap0, t_5 + 32, v_m0, kir_smem_addr + 32768 + 8 * (v_s));
            }
        }
    } else if (kir_warp == 1 || kir_warp == 2 || kir_warp == 3 || kir_warp == 4) {  // role compute
        const int kir_rank_1 = kir_warp - 1;
        int t_6 = ((int)(p_BM / 4));
        int v_r0 = ((int)((unsigned int)kir_rank_1 * (unsigned int)t_6));
        int t_7 = ((int)(n_N / p_BN));
        for (int v_j_1 = 0; v_j_1 < t_7; v_j_1 += 1) {
            int v_s_1 = ((int)(v_j_1 % p_S));
            int t_8 = ((int)(v_j_1 / p_S));
            int t_9 = ((int)(t_8 % 2));
            kir_mbar_wait(kir_smem_addr + 32768 + 8 * (v_s_1), t_9);
            float v_v[32];
            #pragma unroll
            for (int kir_i = 0; kir_i < 32; ++kir_i) {
                const int kir_e = kir_i * 32 + (kir_tid % 32);
                const int kir_x0 = (kir_e / 64);
                const int kir_x1 = (kir_e % 64);
                v_v[kir_i] = *reinterpret_cast<float*>(kir_smem + kir_swz<7>((0 + (v_s_1) * 16384 + ((kir_x1) / 32) * 8192 + (v_r0 + kir_x0) * 128 + ((kir_x1) % 32) * 4)));
            }
            __syncwarp();
            if ((kir_tid % 32) == 0) {
                kir_mbar_arrive(kir_smem_addr + 32784 + 8 * (v_s_1));
            }
            int t_10 = ((int)((unsigned int)v_m0 + (unsigned int)v_r0));
            int t_11 = ((int)((unsigned int)v_j_1 * (unsigned int)p_BN));
            bool t_12[32];
            #pragma unroll
            for (int kir_i = 0; kir_i < 32; ++kir_i) {
                t_12[kir_i] = (v_v[kir_i] > 0.0f);
            }
            float t_13[32];
            #pragma unroll
            for (int kir_i = 0; kir_i < 32; ++kir_i) {
                t_13[kir_i] = (expf(v_v[kir_i]));
            }
            float t_14[32];
            #pragma unroll
            for (int kir_i = 0; kir_i < 32; ++kir_i) {
                t_14[kir_i] = (v_v[kir_i] * 2.0f);
            }
            float t_15[32];
            #pragma unroll
            for (int kir_i = 0; kir_i < 32; ++kir_i) {
                t_15[kir_i] = (t_14[kir_i] - 1.0f);
            }
            float t_16[32];
            #pragma unroll
            for (int kir_i = 0; kir_i < 32; ++kir_i) {
                t_16[kir_i] = (t_12[kir_i] ? t_13[kir_i] : t_15[kir_i]);
            }
            #pragma unroll
            for (int kir_i = 0; kir_i < 32; ++kir_i) {
                const int kir_e = kir_i * 32 + (kir_tid % 32);
                const int kir_x0 = (kir_e / 64);
                const int kir_x1 = (kir_e % 64);
                t_y[(long long)(t_10 + kir_x0) * n_N + (long long)(t_11 + kir_x1)] = t_16[kir_i];
            }
        }
    }
}
