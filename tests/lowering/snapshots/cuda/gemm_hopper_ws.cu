extern "C" __global__ void __launch_bounds__(384, 1) gemm_hopper_ws(
    const __nv_bfloat16* t_a,
    const __nv_bfloat16* t_b,
    __nv_bfloat16* t_c,
    const int n_M,
    const int n_K,
    const int n_N,
    const __grid_constant__ CUtensorMap kir_tmap0,
    const __grid_constant__ CUtensorMap kir_tmap1) {
    constexpr int p_BM = 128;
    constexpr int p_BN = 256;
    constexpr int p_BK = 64;
    constexpr int p_S = 4;
    const int kir_tid = threadIdx.x;
    const int kir_lane = kir_tid % 32;
    const int kir_wl = (kir_tid / 32) % 4;  // warp in its warpgroup
    const int kir_wg = kir_tid / 128;
    extern __shared__ __align__(1024) unsigned char kir_smem_raw[];
    // the swizzle patterns repeat every 1024 bytes: align the base (the launch adds the slack)
    unsigned char* kir_smem = kir_smem_raw + ((1024 - (kir_smem_u32(kir_smem_raw) & 1023)) & 1023);
    const uint32_t kir_smem_addr = kir_smem_u32(kir_smem);
    if (kir_tid == 0) {
        for (int kir_j = 0; kir_j < 4; ++kir_j) kir_mbar_init(kir_smem_addr + 196608 + 8 * kir_j, 1);
        for (int kir_j = 0; kir_j < 4; ++kir_j) kir_mbar_init(kir_smem_addr + 196640 + 8 * kir_j, 2);
        kir_mbar_init_fence();
    }
    __syncthreads();
    int t = (int)blockIdx.x;
    int v_m0 = ((int)((unsigned int)t * (unsigned int)p_BM));
    int t_1 = (int)blockIdx.y;
    int v_n0 = ((int)((unsigned int)t_1 * (unsigned int)p_BN));
    __syncthreads();
    if (kir_wg == 0) {  // role load
        kir_setmaxnreg_dec<40>();
        if ((kir_tid % 128) == 0) {  // the role holds no tile: one thread runs it
            int t_2 = ((int)(n_K / p_BK));
            for (int v_k = 0; v_k < t_2; v_k += 1) {
                int v_s = ((int)(v_k % p_S));
                int t_3 = ((int)(v_k / p_S));
                int t_4 = ((int)((unsigned int)t_3 + (unsigned int)1));
                int t_5 = ((int)(t_4 % 2));
                kir_mbar_wait(kir_smem_addr + 196640 + 8 * (v_s), t_5);
                int t_6 = ((int)((unsigned int)16384 + (unsigned int)32768));
                kir_mbar_expect(kir_smem_addr + 196608 + 8 * (v_s), t_6);
                int t_7 = ((int)((unsigned int)v_k * (unsigned int)p_BK));
                kir_tma_load_2d(kir_smem_addr + (0 + (v_s) * 16384 + (0) * 128 + (0) * 2), &kir_tmap0, t_7, v_m0, kir_smem_addr + 196608 + 8 * (v_s));
                int t_8 = ((int)((unsigned int)v_k * (unsigned int)p_BK));
                kir_tma_load_2d(kir_smem_addr + (65536 + (v_s) * 32768 + ((0) / 64) * 8192 + (0) * 128 + ((0) % 64) * 2), &kir_tmap1, v_n0, t_8, kir_smem_addr + 196608 + 8 * (v_s));
                kir_tma_load_2d(kir_smem_addr + (65536 + (v_s) * 32768 + ((64) / 64) * 8192 + (0) * 128 + ((64) % 64) * 2), &kir_tmap1, v_n0 + 64, t_8, kir_smem_addr + 196608 + 8 * (v_s));
                kir_tma_load_2d(kir_smem_addr + (65536 + (v_s) * 32768 + ((128) / 64) * 8192 + (0) * 128 + ((128) % 64) * 2), &kir_tmap1, v_n0 + 128, t_8, kir_smem_addr + 196608 + 8 * (v_s));
                kir_tma_load_2d(kir_smem_addr + (65536 + (v_s) * 32768 + ((192) / 64) * 8192 + (0) * 128 + ((192) % 64) * 2), &kir_tmap1, v_n0 + 192, t_8, kir_smem_addr + 196608 + 8 * (v_s));
            }
        }
    } else if (kir_wg == 1 || kir_wg == 2) {  // role mma
        kir_setmaxnreg_inc<232>();
        const int kir_rank_1 = kir_wg - 1;
        int t_9 = ((int)(p_BM / 2));
        int v_r0 = ((int)((unsigned int)kir_rank_1 * (unsigned int)t_9));
        int t_10 = ((int)(n_K / p_BK));
        float v_acc[128];
        if (!(0 < t_10)) {  // the loop runs no step: its result is the zeros
            #pragma unroll
            for (int kir_i = 0; kir_i < 128; ++kir_i) {
                v_acc[kir_i] = 0.0f;
            }
        }
        for (int v_k_1 = 0; v_k_1 < t_10; v_k_1 += 1) {
            int v_s_1 = ((int)(v_k_1 % p_S));
            int t_11 = ((int)(v_k_1 / p_S));
            int t_12 = ((int)(t_11 % 2));
            kir_mbar_wait(kir_smem_addr + 196608 + 8 * (v_s_1), t_12);
            kir_fence_regs<128>(v_acc);
            kir_wgmma_fence();
            {
                const uint32_t kir_a = kir_smem_addr + (0 + (v_s_1) * 16384 + (v_r0) * 128 + (0) * 2);
                const uint32_t kir_b = kir_smem_addr + (65536 + (v_s_1) * 32768 + ((0) / 64) * 8192 + (0) * 128 + ((0) % 64) * 2);
                kir_wgmma_m64n256k16_bf16(v_acc + 0, kir_wgmma_desc(kir_a + 0, 16, 1024, 1), kir_wgmma_desc(kir_b + 0, 8192, 1024, 1), v_k_1 != 0);
                kir_wgmma_m64n256k16_bf16(v_acc + 0, kir_wgmma_desc(kir_a + 32, 16, 1024, 1), kir_wgmma_desc(kir_b + 2048, 8192, 1024, 1), 1);
                kir_wgmma_m64n256k16_bf16(v_acc + 0, kir_wgmma_desc(kir_a + 64, 16, 1024, 1), kir_wgmma_desc(kir_b + 4096, 8192, 1024, 1), 1);
                kir_wgmma_m64n256k16_bf16(v_acc + 0, kir_wgmma_desc(kir_a + 96, 16, 1024, 1), kir_wgmma_desc(kir_b + 6144, 8192, 1024, 1), 1);
            }
            kir_wgmma_commit();
            kir_fence_regs<128>(v_acc);
            kir_wgmma_wait<0>();
            kir_fence_regs<128>(v_acc);
            if ((kir_tid % 128) == 0) {
                kir_mbar_arrive(kir_smem_addr + 196640 + 8 * (v_s_1));
            }
        }
        int t_13 = ((int)((unsigned int)v_m0 + (unsigned int)v_r0));
        __nv_bfloat16 t_14[128];
        #pragma unroll
        for (int kir_i = 0; kir_i < 128; ++kir_i) {
            t_14[kir_i] = __float2bfloat16_rn(v_acc[kir_i]);
        }
        #pragma unroll
        for (int kir_i = 0; kir_i < 128; kir_i += 2) {
            const int kir_x0 = (kir_i / 128) * 64 + kir_wl * 16 + (kir_lane >> 2) + ((kir_i >> 1) & 1) * 8;
            const int kir_x1 = ((kir_i % 128) >> 2) * 8 + (kir_lane & 3) * 2;
            __nv_bfloat16* kir_p = &t_c[(long long)(t_13 + kir_x0) * n_N + (long long)(v_n0 + kir_x1)];
            if ((reinterpret_cast<uintptr_t>(kir_p) & 3) == 0) {
                *reinterpret_cast<kir_pair<__nv_bfloat16>*>(kir_p) = kir_pair<__nv_bfloat16>{t_14[kir_i], t_14[kir_i + 1]};
            } else {
                kir_p[0] = t_14[kir_i];
                kir_p[1] = t_14[kir_i + 1];
            }
        }
    }
}
