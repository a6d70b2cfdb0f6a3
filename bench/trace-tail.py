#!/usr/bin/env python3
"""What holds the edge's one P in a Go execution trace (bench/path.md, fourth session).

    bench/trace-tail.sh 10000 bin/edge /tmp/edge.trace     # 4 s of trace mid-stair
    go tool trace -d=parsed /tmp/edge.trace > /tmp/edge.parsed
    bench/trace-tail.py /tmp/edge.parsed

Prints the longest uninterrupted runs of goroutines (with the spookat and SQLite frames where
each ended), the system calls over 0.5 ms grouped by goroutine and call, and for each of those
groups how long other goroutines ran while the calls lasted: near nothing means the call held
the P (GOMAXPROCS 1) and the whole edge waited.
"""
import collections
import re
import sys

TR = re.compile(r'^M=\S+ P=\S+ G=\S+ StateTransition Time=(\d+) GoID=(\d+) (\w+)->(\w+)')


def parse(path):
    """Yields (ms, goroutine, from, to, stack) for every goroutine state transition."""
    t0, ev = None, None
    for line in open(path):
        if line.startswith('\t'):
            if ev is not None and '@' in line:
                ev[4].append(line.strip().split(' @')[0])
            continue
        if ev is not None and 'Stack=' not in line:
            yield ev
            ev = None
        m = TR.match(line)
        if m:
            t = int(m.group(1))
            t0 = t0 if t0 is not None else t
            ev = ((t - t0) / 1e6, m.group(2), m.group(3), m.group(4), [])
    if ev is not None:
        yield ev


def short(stack):
    keep = [f.split('/')[-1] for f in stack if 'spookat' in f or 'sqlite3.' in f or 'unix.' in f or f.startswith('syscall.')]
    return ' < '.join(keep[:8])


def main(path):
    running, insys, runs, calls = {}, {}, [], []
    for ms, g, a, b, stack in parse(path):
        if b == 'Running':
            running[g] = ms
        elif a == 'Running' and g in running:
            runs.append((ms - running.pop(g), running.get(g, ms), ms, g, b, stack))
        if b == 'Syscall':
            insys[g] = (ms, stack)
        elif a == 'Syscall' and g in insys:
            s, st = insys.pop(g)
            call = next((f for f in st if f.startswith('syscall.') or 'unix.' in f), '?')
            calls.append((s, ms, g, call.split('/')[-1]))
    print('longest runs:')
    for d, _, _, g, b, stack in sorted(runs, key=lambda r: -r[0])[:12]:
        print(f'  G{g} {d:6.1f} ms, then {b}: {short(stack)}')
    groups = collections.defaultdict(list)
    for s, e, g, call in calls:
        if e - s > 0.5:
            groups[(g, call)].append((s, e))
    others = sorted((r[2] - r[0], r[2], r[3]) for r in runs)
    print('system calls over 0.5 ms:')
    for (g, call), ivs in sorted(groups.items(), key=lambda kv: -sum(e - s for s, e in kv[1]))[:8]:
        total = sum(e - s for s, e in ivs)
        ran = 0.0
        for s, e in ivs:
            for r in runs:
                if r[3] != g:
                    ov = min(r[2], e) - max(r[2] - r[0], s)
                    if ov > 0:
                        ran += ov
        print(f'  G{g} {call}: {len(ivs)} calls, {total:.1f} ms (longest {max(e - s for s, e in ivs):.1f}); others ran {ran:.1f} ms meanwhile')


if __name__ == '__main__':
    main(sys.argv[1])
