# usage: ab.py tune-b.csv: per case, the median over rounds of auto/host (paired by round)
import collections,statistics,sys
t=collections.defaultdict(dict)
for line in open(sys.argv[1]):
    f=line.strip().split(',')
    if len(f)<13 or not f[0].startswith('r'): continue
    r=f[0]; m=f[1]; v=f[2]; n=int(f[4]); p=f[5].split(';')[0]; size=int(f[6]); us=float(f[11])
    t[(m,p,n,size,v)][r]=us
keys=sorted({k[:4] for k in t})
for k in keys:
    a=t.get(k+('auto',)); h=t.get(k+('host',))
    if not a or not h: continue
    rs=sorted(set(a)&set(h))
    ratios=[a[r]/h[r] for r in rs]
    print(f'{k[0]:4} {k[1]} x{k[2]} {k[3]:6}  auto {statistics.median(a.values()):7.1f}  host {statistics.median(h.values()):7.1f}  auto/host {statistics.median(ratios):.2f} ({min(ratios):.2f}-{max(ratios):.2f}) n={len(ratios)}')
