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


VARIANTS = {
    "rows": conv_rows,
    "contiguous": conv_contiguous,
    "rows-first": gemm_rows_first,
    "no-pack": gemm_no_pack,
    "pack-only": gemm_pack_only,
    "rows-first-pack-only": lambda src: gemm_pack_only(gemm_rows_first(src)),
}

if __name__ == "__main__":
    variant, src, dst = sys.argv[1:]
    with open(src) as f:
        text = f.read()
    with open(dst, "w") as f:
        f.write(VARIANTS[variant](text))
