# usage: abev.py defaults.csv: per case, the per-round ratio new/old of the defaults,
# median (min-max); prints cases off by more than 10% and a geometric mean per group
import sys,collections,statistics,math
t=collections.defaultdict(dict)
for fn in sys.argv[1:]:
  for line in open(fn):
    if line.startswith('#') or not line.strip(): continue
    f=line.strip().split(",")
    if len(f)<11: continue
    r,v,coll,n,prov,size=f[0],f[1],f[2],int(f[3]),f[4].split(';')[0],int(f[5])
    t[(prov,n,coll,size)].setdefault(fn+r,{})[v]=float(f[10])
allr=collections.defaultdict(list)
for k in sorted(t):
    rs=[d['new']/d['old'] for d in t[k].values() if 'new' in d and 'old' in d]
    if not rs: continue
    m=statistics.median(rs); allr[(k[0],k[1])].append(m)
    if m<0.9 or m>1.1:
        print(f'{k[0]} x{k[1]} {k[2]:15s} {k[3]:>8} new/old {m:.2f} ({min(rs):.2f}-{max(rs):.2f}) n={len(rs)}')
for g,v in sorted(allr.items()):
    print(g, 'cases',len(v),'geomean new/old %.3f'%math.exp(sum(map(math.log,v))/len(v)), '<0.9:',sum(x<0.9 for x in v),'>1.1:',sum(x>1.1 for x in v))
