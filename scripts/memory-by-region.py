#!/usr/bin/env python3
"""Where a bench child's memory lives, once a minute, while a bench runs.

    scripts/memory-by-region.py soak-subscriber > consumer.log &   # the consumer
    scripts/memory-by-region.py processor-child > processor.log &  # the processor

Finds the `txoutbox-bench <part>` process (again after a restart) and prints
its RSS split by region from /proc/<pid>/smaps: the main heap, glibc's thread
arenas (anonymous read-write mappings on 64 MiB boundaries), other anonymous
mappings, file-backed pages (the binary) and stacks, with its thread count.
Reading smaps costs the child nothing. BENCHMARKS.md ("40 minutes with a
handler per message, the memory by region") has a run."""
import os, sys, time, re

def find(part):
    for pid in os.listdir('/proc'):
        if not pid.isdigit():
            continue
        try:
            cmd = open(f'/proc/{pid}/cmdline','rb').read().split(b'\0')
        except OSError:
            continue
        if len(cmd) > 1 and cmd[0].endswith(b'txoutbox-bench') and cmd[1] == part.encode():
            return int(pid)
    return None

def sample(pid):
    regions = {'heap': 0, 'anon_arena': 0, 'anon_other': 0, 'file': 0, 'stack': 0}
    arenas = 0
    cur = None
    for line in open(f'/proc/{pid}/smaps'):
        m = re.match(r'^([0-9a-f]+)-([0-9a-f]+) (\S+) \S+ \S+ \S+\s*(.*)$', line)
        if m:
            start, end, perms, name = int(m[1],16), int(m[2],16), m[3], m[4].strip()
            size = end - start
            if name == '[heap]': cur = 'heap'
            elif name.startswith('[stack'): cur = 'stack'
            elif name == '' and 'rw' in perms:
                # glibc thread arenas: heaps aligned to 64 MiB
                if start % (64 << 20) == 0:
                    cur = 'anon_arena'; arenas += 1
                else:
                    cur = 'anon_other'
            elif name == '': cur = 'anon_other'
            else: cur = 'file'
            continue
        if line.startswith('Rss:') and cur:
            regions[cur] += int(line.split()[1])
    status = dict(l.split(':', 1) for l in open(f'/proc/{pid}/status') if ':' in l)
    threads = status['Threads'].split()[0]
    rss = status['VmRSS'].split()[0]
    return rss, threads, arenas, regions

part = sys.argv[1] if len(sys.argv) > 1 else 'soak-subscriber'
t0 = time.time()
while True:
    pid = find(part)
    if pid:
        try:
            rss, threads, arenas, r = sample(pid)
            print(f"{(time.time()-t0)/60:5.1f} min pid {pid} rss {int(rss)/1024:.1f} MB threads {threads} "
                  f"arenas {arenas} heap {r['heap']/1024:.1f} arena {r['anon_arena']/1024:.1f} "
                  f"anon {r['anon_other']/1024:.1f} file {r['file']/1024:.1f} stack {r['stack']/1024:.1f}", flush=True)
        except OSError as e:
            print(f"error {e}", flush=True)
    time.sleep(60)
