#!/usr/bin/env python3
# SPDX-License-Identifier: GPL-3.0-or-later WITH SonicBoom-CUDA-exception
"""bench/plan_diff.py — compare the plans that bench/guile_traced_vs_c.scm makes the library print
(SB_DUMP_IR=after:fuse_rope_store,memplan, stderr) — the traced Scheme model's against the C
builder's, for prefill and decode:

    SB_DUMP_IR=after:fuse_rope_store,memplan guile -L bindings/guile bench/guile_traced_vs_c.scm \\
        MODEL.gguf --rounds 1 2>plans.txt >/dev/null
    python3 bench/plan_diff.py plans.txt

A plan is the planned IR (one node a line) and its memory plan. Two plans are "the same" when,
after naming every input by what it is (a weight by its GGUF name, a KV cache by its rank among
the caches, tokens/pos by kind) instead of by its position, and dropping the compute nodes' debug
names, the compute nodes are the same ops in the same order with the same sources, parameters,
types and shapes, and the memory plan gives every compute value the same bytes of the same arena.
Prints, per phase, the node counts, the op multisets, the input order differences, the first
differing compute lines (if any) and the arena sizes; exits 1 when a phase's plans differ beyond
the order of their inputs.
"""
import collections
import re
import sys

NODE = re.compile(r'^%(\d+) = (\w+)\((.*?)\)(.*?) : (\S+)(?: "(.*)")?$')
MEM = re.compile(r'^%(\d+) (.*)$')


def sections(text):
    """{'c prefill': [lines], ...} split at the '=== plan: <side> <phase>' markers"""
    out, cur = {}, None
    for line in text.splitlines():
        if line.startswith('=== plan: '):
            cur = line[len('=== plan: '):].strip()
            out[cur] = []
        elif cur:
            out[cur].append(line)
    return out


def parse(lines):
    """(nodes [(idx, op, srcs, params, type, name)], memory {idx: text}, arena bytes)"""
    nodes, mem, arena, in_mem = [], {}, None, False
    for line in lines:
        if line.startswith('// ---- memory plan'):
            in_mem = True
            continue
        if line.startswith('arena '):
            arena = int(line.split()[1])
            continue
        if in_mem:
            m = MEM.match(line)
            if m:
                mem[int(m.group(1))] = m.group(2)
            continue
        m = NODE.match(line)
        if m:
            srcs = [int(s.strip()[1:]) for s in m.group(3).split(',') if s.strip()]
            nodes.append((int(m.group(1)), m.group(2), srcs, m.group(4).strip(), m.group(5), m.group(6) or ''))
    return nodes, mem, arena


INPUT_OPS = {'tokens', 'pos', 'out_rows', 'weight', 'kv', 'slots', 'block_table'}


def canonical(nodes, mem):
    """names for every node independent of the input order; the compute lines and memory lines"""
    name, n_kv, n_compute = {}, 0, 0
    inputs = []
    for idx, op, srcs, params, typ, nm in nodes:
        if op in INPUT_OPS:
            if op == 'kv':
                key = 'kv#%d %s' % (n_kv, typ)
                n_kv += 1
            elif op == 'weight':
                key = 'weight %s %s' % (nm, typ)
            else:
                key = '%s %s' % (op, typ)
            name[idx] = '<' + key + '>'
            inputs.append(key)
        else:
            name[idx] = '%%c%d' % n_compute
            n_compute += 1
    compute, memory = [], []
    for idx, op, srcs, params, typ, nm in nodes:
        if op in INPUT_OPS:
            continue
        compute.append('%s = %s(%s) %s : %s' % (name[idx], op, ', '.join(name[s] for s in srcs), params, typ))
        m = mem.get(idx, '?')
        v = re.match(r'view of %(\d+)', m)
        memory.append('%s %s' % (name[idx], 'view of ' + name[int(v.group(1))] if v else m))
    return inputs, compute, memory


def compare(phase, a, b):
    na, ma, aa = parse(a)
    nb, mb, ab = parse(b)
    ia, ca, mema = canonical(na, ma)
    ib, cb, memb = canonical(nb, mb)
    ops_a = collections.Counter(n[1] for n in na)
    ops_b = collections.Counter(n[1] for n in nb)
    print('%s: nodes C %d, traced %d; inputs C %d, traced %d; compute nodes C %d, traced %d' %
          (phase, len(na), len(nb), len(ia), len(ib), len(ca), len(cb)))
    print('  op multiset %s%s' % ('equal' if ops_a == ops_b else 'DIFFERS',
                                  '' if ops_a == ops_b else ': C-only %s, traced-only %s' %
                                  (dict(ops_a - ops_b), dict(ops_b - ops_a))))
    same_inputs = collections.Counter(ia) == collections.Counter(ib)
    moved = sum(1 for x, y in zip(ia, ib) if x != y)
    print('  inputs: %s; %d of %d at another position' % ('the same set' if same_inputs else 'DIFFERENT sets', moved, len(ia)))
    diff = [(x, y) for x, y in zip(ca, cb) if x != y]
    print('  compute nodes: %s' % ('identical (ops, order, sources, params, types, shapes)' if not diff and len(ca) == len(cb)
                                   else '%d differ' % (len(diff) + abs(len(ca) - len(cb)))))
    for x, y in diff[:5]:
        print('    C:      %s\n    traced: %s' % (x, y))
    mdiff = sum(1 for x, y in zip(mema, memb) if x != y) + abs(len(mema) - len(memb))
    print('  memory plan: arena C %s bytes, traced %s bytes; compute values placed differently: %d' % (aa, ab, mdiff))
    return same_inputs and not diff and len(ca) == len(cb) and aa == ab and mdiff == 0


def main():
    if len(sys.argv) != 2:
        print('usage: plan_diff.py PLANS.txt (stderr of bench/guile_traced_vs_c.scm under SB_DUMP_IR)', file=sys.stderr)
        return 2
    with open(sys.argv[1]) as f:
        sec = sections(f.read())
    ok = True
    for phase in ('prefill', 'decode'):
        a, b = sec.get('c ' + phase), sec.get('traced ' + phase)
        if not a or not b or not any(l.startswith('// ---- IR') for l in a + b):
            print('%s: no plans in the file (run under SB_DUMP_IR=after:fuse_rope_store,memplan)' % phase, file=sys.stderr)
            return 1
        ok = compare(phase, a, b) and ok
    return 0 if ok else 1


if __name__ == '__main__':
    sys.exit(main())
