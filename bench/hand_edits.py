"""Hand edits of a generated kernel's C, for bench/hand-edits.sh: each variant
asks what one change to the code the generator writes would be worth before
anyone builds it into the generator.

    python3 bench/hand_edits.py VARIANT IN.c OUT.c

Variants of a conv whose register tile holds 16 output channels in a vector and
14 pixels along the output's rows (the C64 56² 3×3 + add + ReLU entry's):
  rows      its 14 lane-strided stores transposed in registers as 16 rows (two of
            zeros), each row then stored as 8 + 4 + 2 floats (what `Stmt::StoreRows`
            does for a power of two, extended to 14); the result must not change
  contiguous  bound, not a kernel: each lane-strided store, and each lane-by-lane
            read of the shortcut, replaced by one contiguous vector (wrong results;
            as many instructions as the ideal, but 16 times fewer cache lines)
Variants of a GEMM whose B is packed whole before the compute (`pack.1=1`):
  rows-first  B packed with its rows outermost, so the copy reads B row after row
  no-pack   bound, not a kernel: the packing skipped after the first calls (B
            then never read, and the pack never written again)
  pack-only, rows-first-pack-only  the packing alone, as generated or rows
            first (the compute skipped)
Variants of the micro-kernels (bench/hand-edits.sh SET=kernels):
  gemm-asm  the GEMM 1024³ 1-thread entry's register tile (8 rows × 2 vectors,
            the reduction unrolled 4 deep) as one block of inline assembly: two
            loads of B, eight broadcasts of A, sixteen FMAs a step, registers
            fixed (what an explicit micro-kernel would emit); the same result
  conv-asm  C2 (3×3, 64 channels, 56²) at a register tile of 4 channel vectors ×
            6 pixels (oneDNN's shape: 24 accumulators, which GCC spills) as
            inline assembly: four weight loads and six broadcasts for 24 FMAs
            a tap; the same result
  guard-buffered  C2 reading its input in place (`pack.0=2`): each border tile
            reads a zero-padded copy of its own window (64 channels × 3 rows
            × 16 pixels) with the interior tiles' code, instead of testing each
            read; the same result
  guard-no-border  bound, not a kernel: the border tiles skipped (wrong results):
            what the interior tiles, read in place, cost alone
  prefetch-out  the stem (7×7 stride 2, 64 channels of 112²), its 1-thread
            entry: each pair of register tiles prefetches into L2 the output
            lines the next pair writes (32 channels × one 64-byte line); the
            same result
"""

import re
import sys

STORE_BLOCK = re.compile(
    r"\{ const at_v16 s__ = (v__\d+);\n\s*out\[([^\]]*)\] = s__\[0\];\n"
    r"(?:\s*out\[[^\]]*\] = s__\[\d+\];\n)*\s*\}"
)
GATHER = re.compile(r"\(\(at_v16\)\{in_shortcut\[([^\]]*)\],[^}]*\}\)")


def transpose_macro(name, lanes, rows, run):
    """A macro storing `rows` vectors (a power of two) transposed: lane l of row
    j to o[l * cs + j], `run` elements per lane, in power-of-two pieces."""
    v = f"at_v{lanes}"
    lines = [f"#define {name}(o, cs, {', '.join(f'r{j}' for j in range(rows))}) do {{",
             "  float *o__ = (o); const int64_t cs__ = (cs);"]
    groups = []
    for j in range(rows):
        lines.append(f"  const {v} x{j}__ = (r{j});")
        groups.append([(f"x{j}__", 0, lanes)])
    step = 1
    while len(groups) > 1:
        merged_groups = []
        for g in range(0, len(groups), 2):
            merged = []
            for (a, first, n), (b, _, _) in zip(groups[g], groups[g + 1]):
                for half in range(2):
                    picks = []
                    for i in range(lanes):
                        q, w = divmod(i, step)
                        src = (half * lanes // (2 * step) + q // 2) * step + w
                        picks.append(str(src + (lanes if q % 2 else 0)))
                    out = f"s{len(groups)}_{g // 2}_{len(merged)}__"
                    lines.append(f"  const {v} {out} = __builtin_shufflevector({a}, {b}, {', '.join(picks)});")
                    merged.append((out, first + half * n // 2, n // 2))
            merged_groups.append(merged)
        groups = merged_groups
        step *= 2
    for vec, first, n in groups[0]:
        for l in range(n):
            lane, base, done = first + l, l * rows, 0
            size = 1 << (run.bit_length() - 1)
            while done < run:
                while size > run - done:
                    size //= 2
                dst = f"o__ + {lane} * cs__ + {done}"
                if size == 1:
                    lines.append(f"  *({dst}) = {vec}[{base + done}];")
                else:
                    idx = ", ".join(str(base + done + i) for i in range(size))
                    lines.append(f"  *(at_v{size}u *)({dst}) = __builtin_shufflevector({vec}, {vec}, {idx});")
                done += size
    lines.append("} while (0)")
    return " \\\n".join(lines) + "\n"


def conv_rows(src):
    first = {}

    def rewrite(m):
        i = int(m.group(1)[3:])
        if i == 0:
            first["index"] = m.group(2)
        if i < 13:
            return ""
        rows = [f"v__{k}" for k in range(14)] + ["((at_v16){0})"] * 2
        return f"at_rows16_14(&out[{first['index']}], 3136, {', '.join(rows)});"

    out, n = STORE_BLOCK.subn(rewrite, src)
    assert n == 14, f"expected one full tile of 14 lane-strided stores, found {n}"
    head = "int32_t autotune1_measure_isa_level(void);"
    return out.replace(head, transpose_macro("at_rows16_14", 16, 16, 14) + head, 1)


def conv_contiguous(src):
    out = STORE_BLOCK.sub(lambda m: f"*(at_v16u *)&out[{m.group(2)}] = {m.group(1)};", src)
    return GATHER.sub(lambda m: f"(*(const at_v16u *)&in_shortcut[{m.group(1)}])", out)


PACK_LOOPS = re.compile(
    r"( *)for \(int64_t (q0\w*) = begin__; \2 < end__; \+\+\2\) \{\n"
    r"\s*for \(int64_t (q1\w*) = 0; \3 < (\d+); \+\+\3\) \{\n"
    r"\s*for \(int64_t (q2\w*) = 0; \5 < (\d+); \+\+\5\) \{\n"
    r"\s*for \(int64_t (q3\w*) = 0; \7 < (\d+); \+\+\7\) \{\n"
)


def gemm_rows_first(src):
    def rewrite(m):
        ind, q0, q1, n1, q2, n2, q3, n3 = m.groups()
        return (f"{ind}for (int64_t {q1} = 0; {q1} < {n1}; ++{q1}) {{\n"
                f"{ind}  for (int64_t {q3} = 0; {q3} < {n3}; ++{q3}) {{\n"
                f"{ind}    for (int64_t {q0} = begin__; {q0} < end__; ++{q0}) {{\n"
                f"{ind}      for (int64_t {q2} = 0; {q2} < {n2}; ++{q2}) {{\n")

    out, n = PACK_LOOPS.subn(rewrite, src, count=1)
    assert n == 1, "no packing loop nest of B found"
    return out


def gemm_no_pack(src):
    out, n = PACK_LOOPS.subn(lambda m: "  static int calls__; if (calls__++ > 2) return;\n" + m.group(0), src, count=1)
    assert n == 1, "no packing loop nest of B found"
    return out


def gemm_pack_only(src):
    key = "  for (int64_t par__ = begin__; par__ < end__; ++par__) {"
    assert src.count(key) == 1, "no compute loop found"
    return src.replace(key, "  return;\n" + key)


def replace_between(src, start, end, new, what):
    """`src` with the text from `start` up to (not including) `end` replaced."""
    assert src.count(start) == 1, f"{what}: expected one `{start.strip()}`"
    a = src.index(start)
    b = src.index(end, a)
    return src[:a] + new + src[b:]


def asm_block(lines, outputs, inputs, clobbers):
    body = "\n".join(f'      "{l}\\n\\t"' for l in lines)
    return (f"    __asm__ volatile(\n{body}\n      : {outputs}\n      : {inputs}\n"
            f"      : {', '.join(clobbers)}, \"memory\", \"cc\");\n")


def gemm_asm(src):
    # The entry: tiles of 8 rows of A (read in place, rows 1024 apart) × 2
    # vectors of B's packed panel (32 columns a step), K = 1024 whole.
    assert "for (int64_t ri__k = 0; ri__k < 1021; ri__k += 4) {" in src, "not the 1024³ entry's loop"
    start = "            at_v16 acc__0 = ((at_v16){0} + (0.0f));\n"
    last = "*(at_v16u *)&out[(base__i + 7) * 1024 + base__j + 16] = v__15;\n"
    lines = [f"vpxord %%zmm{i}, %%zmm{i}, %%zmm{i}" for i in range(16)] + ["1:"]
    for u in range(4):
        lines += [f"vmovups {u * 128}(%[b]), %%zmm26", f"vmovups {u * 128 + 64}(%[b]), %%zmm27"]
        for i in range(8):
            r = f"%%zmm{28 + i % 4}"
            lines += [f"vbroadcastss {i * 4096 + u * 4}(%[a]), {r}",
                      f"vfmadd231ps %%zmm26, {r}, %%zmm{2 * i}", f"vfmadd231ps %%zmm27, {r}, %%zmm{2 * i + 1}"]
    lines += ["add $16, %[a]", "add $512, %[b]", "dec %[n]", "jnz 1b"]
    for i in range(8):
        lines += [f"vmovups %%zmm{2 * i}, {i * 4096}(%[o])", f"vmovups %%zmm{2 * i + 1}, {i * 4096 + 64}(%[o])"]
    new = ("            {\n"
           "              const float *ap = &in_a[base__i * 1024 + k0__k];\n"
           "              const float *bp = &pk__0_1[(((o__j + ro__k) * 4 + b__j) * 1024) * 32];\n"
           "              float *op = &out[base__i * 1024 + base__j];\n"
           "              int64_t n = 256;\n"
           + asm_block(lines, '[a] "+r"(ap), [b] "+r"(bp), [n] "+r"(n)', '[o] "r"(op)',
                       [f'"zmm{i}"' for i in [*range(16), *range(26, 32)]])
           + "            }\n")
    a = src.index(start)
    b = src.index(last, a) + len(last)
    assert src.count(start) == 1
    return src[:a] + new + src[b:]


def conv_asm(src):
    # C2 at `tile.k=4 tile.v=6` (4 channel vectors × 6 pixels), the whole
    # reduction (64 channels × 3 × 3) in one block, the input pad-copied with
    # rows of 62 (56 + the tiles' overhang) and the weights packed as
    # [channel tile][c][r][s][64].
    assert "* 62 + base__v + k0__s + ri__s;" in src and "* 3 + ri__s) * 64;" in src, "not the 4×6 tile's nest"
    lines = [f"vpxord %[a{n}], %[a{n}], %[a{n}]" for n in range(24)] + ["mov $64, %[n]", "1:"]
    b = 0
    for r in range(3):
        for s in range(3):
            w = (r * 3 + s) * 256
            lines += [f"vmovups {w + kv * 64}(%[w]), %%zmm{24 + kv}" for kv in range(4)]
            for p in range(6):
                reg = f"%%zmm{28 + b % 4}"
                b += 1
                lines.append(f"vbroadcastss {(r * 62 + s + p) * 4}(%[x]), {reg}")
                lines += [f"vfmadd231ps %%zmm{24 + kv}, {reg}, %[a{p * 4 + kv}]" for kv in range(4)]
    lines += [f"add ${58 * 62 * 4}, %[x]", "add $2304, %[w]", "dec %[n]", "jnz 1b"]
    outs = ", ".join(f'[a{n}] "=&v"(acc__{n})' for n in range(24))
    new = ("".join(f"                  at_v16 acc__{n};\n" for n in range(24))
           + "                  {\n"
           "                    const float *xp = &cp__0_0[((k0__c) * 58 + base__h + k0__r) * 62 + base__v + k0__s];\n"
           "                    const float *wp = &pk__0_1[(o__k + ro__c + ro__r + ro__s + b__k) * 36864];\n"
           "                    int64_t n;\n"
           + asm_block(lines, outs + ', [n] "=&r"(n), [x] "+r"(xp), [w] "+r"(wp)', "",
                       [f'"zmm{i}"' for i in range(24, 32)])
           + "                  }\n")
    return replace_between(src, "                  at_v16 acc__0 = ((at_v16){0} + (0.0f));\n",
                           "                  const int64_t ix__2 = base__k;", new, "conv-asm")


GUARD_IF = "                  if (-1 < -1 + base__h + k0__r"
GUARD_ELSE = "                  } else {\n                    /* border tile: guarded reads tested */\n"
GUARD_END = "                  const int64_t ix__2 = base__k;"


def guard_no_border(src):
    return replace_between(src, GUARD_ELSE, GUARD_END, "                  }\n", "guard-no-border")


def guard_buffered(src):
    # The C2 entry's tile (16 channels × 14 pixels of one row) reading x in
    # place, the reduction whole (k0__c = k0__r = k0__s = 0).
    a = src.index(GUARD_IF)
    interior = src[src.index("\n", a) + 1:src.index(GUARD_ELSE)]
    inner = interior.replace("in_x[ix__0", "wb[ix__0")
    inner, n = re.subn(r"const int64_t ix__0 = \(\(k0__c \+ ri__c\) \* 56 \+ -1 \+ base__h \+ k0__r \+ ri__r\) "
                       r"\* 56 \+ -1 \+ base__v \+ k0__s \+ ri__s;",
                       "const int64_t ix__0 = (ri__c * 3 + ri__r) * 16 + ri__s;", inner)
    assert n >= 1 and "in_x[" not in inner, "not the guarded 14-pixel tile"
    fill = """                  } else {
                    /* border tile: its window copied, the pad value outside */
                    float wb[64 * 3 * 16] __attribute__((aligned(64)));
                    for (int64_t c = 0; c < 64; ++c)
                      for (int64_t r = 0; r < 3; ++r)
                        for (int64_t q = 0; q < 16; ++q) {
                          const int64_t h = -1 + base__h + k0__r + r, v = -1 + base__v + k0__s + q;
                          wb[(c * 3 + r) * 16 + q] =
                              0 <= h && h < 56 && 0 <= v && v < 56 ? in_x[((k0__c + c) * 56 + h) * 56 + v] : 0.0f;
                        }
"""
    return replace_between(src, GUARD_ELSE, GUARD_END, fill + inner + "                  }\n", "guard-buffered")


def prefetch_out(src):
    # The stem's 1-thread entry: tiles of 32 channels × 8 pixels, two along a
    # 16-pixel block (one 64-byte line of each channel's row).
    key = "                    const int64_t base__v = o__v * 16 + b__v * 8;\n"
    assert src.count(key) == 1, "not the stem entry's nest"
    return src.replace(key, key + "                    if (b__v == 0) for (int64_t ch = 0; ch < 32; ++ch) "
                       "__builtin_prefetch(&out[((base__k + ch) * 112 + base__h) * 112 + base__v + 16], 1, 1);\n")


VARIANTS = {
    "rows": conv_rows,
    "contiguous": conv_contiguous,
    "rows-first": gemm_rows_first,
    "no-pack": gemm_no_pack,
    "pack-only": gemm_pack_only,
    "rows-first-pack-only": lambda src: gemm_pack_only(gemm_rows_first(src)),
    "gemm-asm": gemm_asm,
    "conv-asm": conv_asm,
    "guard-buffered": guard_buffered,
    "guard-no-border": guard_no_border,
    "prefetch-out": prefetch_out,
}

if __name__ == "__main__":
    variant, src, dst = sys.argv[1:]
    with open(src) as f:
        text = f.read()
    with open(dst, "w") as f:
        f.write(VARIANTS[variant](text))
