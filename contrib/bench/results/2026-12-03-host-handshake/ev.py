# usage: FC_SIM=build/fc_sim ev.py A.csv[,B.csv] "name:provider:fc_sim options" ...
# Each case (collective, ranks, provider, size) of the forced-algorithm
# runs: the model's pick under those options against the fastest
# algorithm measured (medians over rounds); prints the geometric mean of
# picked/best time, how many picks are >10% and >25% off, and the worst.
import sys,collections,statistics,subprocess,math,re
files=sys.argv[1].split(','); sets=sys.argv[2:]  # each set: "name:prov:extra args"
t=collections.defaultdict(lambda: collections.defaultdict(dict))
for fn in files:
  for line in open(fn):
    if line.startswith('#') or not line.strip(): continue
    f=line.strip().split(',')
    if len(f)<11: continue
    r,algo,coll,n,prov,size=f[0],f[1],f[2],int(f[3]),f[4].split(';')[0],int(f[5])
    if algo=='default': continue
    t[(coll,n,prov,size)][algo][fn+r]=float(f[10])
def unit(b):
    for u,s in (('G',1<<30),('M',1<<20),('K',1<<10)):
        if b>=s and b%s==0: return f'{b//s} {u}iB'
    return f'{b} B'
import os
SIM=os.environ.get('FC_SIM', 'fc_sim')
def picks(prov,extra):
    keys=[k for k in t if k[2]==prov]
    colls=sorted({k[0] for k in keys}); ns=sorted({k[1] for k in keys}); sizes=sorted({k[3] for k in keys})
    res={}
    for i in range(0,len(sizes),30):
        chunk=sizes[i:i+30]
        out=subprocess.run([SIM,'-c',','.join(colls),'-n',','.join(map(str,ns)),'-p',prov,'-b',','.join(map(str,chunk))]+extra,capture_output=True,text=True).stdout
        cur=None
        for l in out.splitlines():
            m=re.match(r'(\w+), (\d+) ranks, (.*) \(',l)
            if m: cur=(m.group(1),int(m.group(2)),m.group(3)); continue
            if l.startswith('  *') and cur: res[cur]=l.split()[1]
    return res
for s in sets:
    name,prov,extra=s.split(':',2); extra=extra.split()
    pk=picks(prov,extra); rs=[]; worst=[]
    for k,d in t.items():
        if k[2]!=prov: continue
        med={a:statistics.median(v.values()) for a,v in d.items()}
        best=min(med,key=med.get)
        p=pk.get((k[0],k[1],unit(k[3])))
        if p is None or p not in med: continue
        x=med[p]/med[best]; rs.append(x); worst.append((x,k,p,best))
    gm=math.exp(sum(math.log(x) for x in rs)/len(rs))
    worst.sort(reverse=True)
    print(f'{name:12s} {prov}: n={len(rs)} geomean {gm:.3f}  >1.10: {sum(x>1.1 for x in rs)}  >1.25: {sum(x>1.25 for x in rs)}  worst: '+'; '.join(f'{k[0]} x{k[1]} {unit(k[3])} {p} {x:.2f}' for x,k,p,b in worst[:6]))
