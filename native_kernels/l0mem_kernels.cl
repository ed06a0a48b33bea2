/* l0mem kernels: BF16 compress, BF16 decompress-add, FP32 add.
 *
 * The names and signatures are a fixed contract: the Level Zero backend and
 * the simulated driver call them by name. One work-item per element; the
 * launcher rounds the global size up to a multiple of the work-group size,
 * hence the `i < n` guard.
 *
 * Conversions work on the bit patterns (as_uint / as_float) so they do not
 * depend on the device's float rounding mode or denormal handling; only the
 * two additions are floating-point operations, and the module is compiled
 * without -cl-denorms-are-zero so subnormal sums survive.
 *
 * The compress kernel is the one whose speed is bound by how it writes: its
 * result is never read back by the same kernel, so it is stored non-temporally
 * (a hint: the CPU runtime skips the read-for-ownership of the destination,
 * which the 6 bytes per element it is measured by do not count), and both
 * rounding outcomes are computed and selected so the CPU compiler's
 * vectorisation across work-items needs no masked branch.
 */

/* Round-to-nearest-even FP32 -> BF16. NaN stays a quiet NaN with its sign and
 * upper payload bits; finite values whose rounding carries into the exponent
 * become +-inf, as IEEE rounding requires. */
static inline ushort l0mem_bf16_from_bits(uint b)
{
    uint nan = (b >> 16) | 0x0040u;
    /* Cannot overflow 32 bits for a non-NaN: the largest, 0xff800000, plus
     * 0x8000. The wrapped sum of a NaN is computed but never selected. */
    uint rounded = (b + 0x7fffu + ((b >> 16) & 1u)) >> 16;
    return (ushort)(((b & 0x7fffffffu) > 0x7f800000u) ? nan : rounded);
}

static inline float l0mem_f32_from_bf16(ushort h)
{
    return as_float((uint)h << 16);
}

__kernel void l0mem_f32_to_bf16(__global const float *src, __global ushort *dst, ulong n)
{
    size_t i = get_global_id(0);
    if (i < n) {
        __builtin_nontemporal_store(l0mem_bf16_from_bits(as_uint(src[i])), dst + i);
    }
}

__kernel void l0mem_bf16_add_to_f32(__global const ushort *src, __global float *acc, ulong n)
{
    size_t i = get_global_id(0);
    if (i < n) {
        acc[i] += l0mem_f32_from_bf16(src[i]);
    }
}

__kernel void l0mem_f32_add(__global const float *src, __global float *acc, ulong n)
{
    size_t i = get_global_id(0);
    if (i < n) {
        acc[i] += src[i];
    }
}
