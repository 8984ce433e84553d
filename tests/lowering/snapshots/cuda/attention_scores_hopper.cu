extern "C" __global__ void __launch_bounds__(384, 1) attention_scores_hopper(
    const __nv_bfloat16* t_q,
    const __nv_bfloat16* t_k,
    float* t_out,
    const int n_L,
    const __grid_constant__ CUtensorMap kir_tmap0,
    const __grid_constant__ CUtensorMap kir_tmap1) {
    constexpr int p_BM = 128;
    constexpr int p_BN = 64;
    constexpr int p_S = 2;
    const int kir_tid = threadIdx.x;
    const int kir_lane = kir_tid % 32;
    const int kir_wl = (kir_tid / 32) % 4;  // warp in its warpgroup
    const int kir_wg = kir_tid / 128;
    extern __shared__ __align__(1024) unsigned char kir_smem_raw[];
    // the swizzle patterns repeat every 1024 bytes: align the base (the launch adds the slack)
    unsigned char* kir_smem = kir_smem_raw + ((1024 - (kir_smem_u32(kir_smem_raw) & 1023)) & 1023);
    const uint32_t kir_smem_addr = kir_smem_u32(kir_smem);
    if (kir_tid == 0) {
        for (int kir_j = 0; kir_j < 1; ++kir_j) kir_mbar_init(kir_smem_addr + 32768 + 8 * kir_j, 1);
        for (int kir_j = 0; kir_j < 2; ++kir_j) kir_mbar_init(kir_smem_addr + 32776 + 8 * kir_j, 1);
        for (int kir_j = 0; kir_j < 2; ++kir_j) kir_mbar_init(kir_smem_addr + 32792 + 8 * kir_j, 2);
        kir_mbar_init_fence();
    }
    __syncthreads();
    int t = (int)blockIdx.x;
    int v_m0 = ((int)((unsigned int)t * (unsigned int)p_BM));
    __syncthreads();
    if (kir_wg == 0) {  // role load
        kir_setmaxnreg_dec<40>();
        if ((kir_tid % 128) == 0) {  // the role holds no tile: one thread runs it
            kir_mbar_expect(kir_smem_addr + 32768 + 8 * (0), 16384);
            kir_tma_load_2d(kir_smem_addr + (0 + (0) * 128 + (0) * 2), &kir_tmap0, 0, v_m0, kir_smem_addr + 32768 + 8 * (0));
            int t_1 = ((int)(n_L / p_BN));
            for (int v_j = 0; v_j < t_1; v_j += 1) {
                int v_st = ((int)(v_j % p_S));
                int t_2 = ((int)(v_j / p_S));
                int t_3 = ((int)((unsigned int)t_2 + (unsigned int)1));
                int t_4 = ((int)(t_3 % 2));
                kir_mbar_wait(kir_smem_addr + 32792 + 8 * (v_st), t_4);
                kir_mbar_expect(kir_smem_addr + 32776 + 8 * (v_st), 8192);
                int t_5 = ((int)((unsigned int)v_j * (unsigned int)p_BN));
                kir_tma_load_2d(kir_smem_addr + (16384 + (v_st) * 8192 + (0) * 128 + (0) * 2), &kir_tmap1, 0, t_5, kir_smem_addr + 32776 + 8 * (v_st));
            }
        }
    } else if (kir_wg == 1 || kir_wg == 2) {  // role mma
        kir_setmaxnreg_inc<232>();
        const int kir_rank_1 = kir_wg - 1;
        int t_6 = ((int)(p_BM / 2));
        int v_r0 = ((int)((unsigned int)kir_rank_1 * (unsigned int)t_6));
        kir_mbar_wait(kir_smem_addr + 32768 + 8 * (0), 0);
        int t_7 = ((int)(n_L / p_BN));
        for (int v_j_1 = 0; v_j_1 < t_7; v_j_1 += 1) {
            int v_st_1 = ((int)(v_j_1 % p_S));
            int t_8 = ((int)(v_j_1 / p_S));
            int t_9 = ((int)(t_8 % 2));
            kir_mbar_wait(kir_smem_addr + 32776 + 8 * (v_st_1), t_9);
            float v_s[32];
            kir_fence_regs<32>(v_s);
            kir_wgmma_fence();
            {
                const uint32_t kir_a = kir_smem_addr + (0 + (v_r0) * 128 + (0) * 2);
                const uint32_t kir_b = kir_smem_addr + (16384 + (v_st_1) * 8192 + (0) * 128 + (0) * 2);
                kir_wgmma_m64n64k16_bf16_ta0_tb0(v_s + 0, kir_wgmma_desc(kir_a + 0, 16, 1024, 1), kir_wgmma_desc(kir_b + 0, 16, 1024, 1), 0);
                kir_wgmma_m64n64k16_bf16_ta0_tb0(v_s + 0, kir_wgmma_desc(kir_a + 32, 16, 1024, 1), kir_wgmma_desc(kir_b + 32, 16, 1024, 1), 1);
                kir_wgmma_m64n64k16_bf16_ta0_tb0(v_s + 0, kir_wgmma_desc(kir_a + 64, 16, 1024, 1), kir_wgmma_desc(kir_b + 64, 16, 1024, 1), 1);
                kir_wgmma_m64n64k16_bf16_ta0_tb0(v_s + 0, kir_wgmma_desc(kir_a + 96, 16, 1024, 1), kir_wgmma_desc(kir_b + 96, 16, 1024, 1), 1);
            }
            kir_wgmma_commit();
            kir_fence_regs<32>(v_s);
            kir_wgmma_wait<0>();
            kir_fence_regs<32>(v_s);
            if ((kir_tid % 128) == 0) {
                kir_mbar_arrive(kir_smem_addr + 32792 + 8 * (v_st_1));
            }
            int t_10 = ((int)((unsigned int)v_m0 + (unsigned int)v_r0));
            int t_11 = ((int)((unsigned int)v_j_1 * (unsigned int)p_BN));
            #pragma unroll
            for (int kir_i = 0; kir_i < 32; kir_i += 2) {
                const int kir_x0 = (kir_i / 32) * 64 + kir_wl * 16 + (kir_lane >> 2) + ((kir_i >> 1) & 1) * 8;
                const int kir_x1 = ((kir_i % 32) >> 2) * 8 + (kir_lane & 3) * 2;
                float* kir_p = &t_out[(long long)(t_10 + kir_x0) * n_L + (long long)(t_11 + kir_x1)];
                if ((reinterpret_cast<uintptr_t>(kir_p) & 7) == 0) {
                    *reinterpret_cast<kir_pair<float>*>(kir_p) = kir_pair<float>{v_s[kir_i], v_s[kir_i + 1]};
                } else {
                    kir_p[0] = v_s[kir_i];
                    kir_p[1] = v_s[kir_i + 1];
                }
            }
        }
    }
}
