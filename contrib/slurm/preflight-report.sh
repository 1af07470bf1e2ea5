#!/bin/bash
# SPDX-License-Identifier: BSD-3-Clause
#
# preflight-report.sh: compares the final lines of `fc_info --check` from
# several nodes and says where they disagree. fabcoll-preflight.sbatch feeds
# it; it also works on lines collected any other way (pdsh, clush, ssh):
#
#   pdsh -w 'n[01-16]' fc_info --check | sed 's/^[^:]*: //' | preflight-report.sh -n 16
#
# Input: lines "fc_info check: host=H libfabric=V providers=P memlock_kib=M
# status=S" (other lines are ignored). -n N: how many nodes should have
# answered. Prints a table, then one line per disagreement, then
#   preflight: nodes=N answered=A failed=F disagree=LIST status=OK|FAIL
# Exit status 0 when status=OK: every node answered, passed its checks, and
# all show the same provider list, libfabric version and locked-memory limit.
set -u

expect=0
while getopts "n:h" o; do
    case $o in
    n) expect=$OPTARG ;;
    h) awk 'NR > 2 && !/^#/ { exit } NR > 2 { sub(/^# ?/, ""); print }' "$0"; exit 0 ;;
    *) echo "usage: preflight-report.sh [-n NODES] < lines" >&2; exit 2 ;;
    esac
done

awk -v expect="$expect" '
function field(name,    i, n, kv) {
    for (i = 1; i <= NF; i++)
        if (index($i, name "=") == 1)
            return substr($i, length(name) + 2)
    return "?"
}
# groups of hosts per distinct value of one property; sets disagree[]
function compare(what, vals, n,    i, k, seen, hosts, order, nv, line) {
    nv = 0
    for (i = 1; i <= n; i++) {
        k = vals[i]
        if (!(k in seen)) { seen[k] = 0; order[++nv] = k; hosts[k] = "" }
        seen[k]++
        hosts[k] = hosts[k] (hosts[k] == "" ? "" : ",") host[i]
    }
    if (nv <= 1) {
        if (n > 0)
            printf "  same %-12s on all %d: %s\n", what, n, order[1]
        return 0
    }
    printf "  DIFFERENT %s (%d values):\n", what, nv
    for (i = 1; i <= nv; i++) {
        k = order[i]
        line = hosts[k]
        if (length(line) > 200) line = substr(line, 1, 200) ",..."
        printf "    %-40s on %d node%s: %s\n", k, seen[k], seen[k] == 1 ? "" : "s", line
    }
    ndis++
    dis = dis (dis == "" ? "" : ",") what
    return 1
}
/fc_info check: / {
    sub(/.*fc_info check: /, "")
    n++
    host[n] = field("host"); lf[n] = field("libfabric"); pr[n] = field("providers")
    ml[n] = field("memlock_kib"); st[n] = field("status")
}
END {
    printf "%-24s %-10s %-12s %-6s %s\n", "# host", "libfabric", "memlock_kib", "status", "providers"
    for (i = 1; i <= n; i++)
        printf "%-24s %-10s %-12s %-6s %s\n", host[i], lf[i], ml[i], st[i], pr[i]
    print ""
    print "# agreement between nodes"
    ndis = 0; dis = ""
    compare("providers", pr, n)
    compare("libfabric", lf, n)
    compare("memlock_kib", ml, n)
    failed = 0; fl = ""
    for (i = 1; i <= n; i++)
        if (st[i] != "OK") { failed++; fl = fl (fl == "" ? "" : ",") host[i] }
    if (failed)
        printf "  FAILED checks on %d node%s: %s (their full fc_info --check output tells why)\n",
               failed, failed == 1 ? "" : "s", fl
    for (i = 1; i <= n; i++)
        if (ml[i] != "unlimited") {
            printf "  note: memlock_kib is not unlimited on some nodes: RDMA providers (verbs, efa) pin buffers and need it\n"
            break
        }
    missing = (expect > 0 && n < expect) ? expect - n : 0
    if (n == 0)
        print "  NO node answered: did srun start fc_info? (FC_INFO, PATH)"
    else if (missing)
        printf "  MISSING: %d of %d nodes did not answer (fc_info crashed, hung or is not installed there)\n",
               missing, expect
    ok = (n > 0 && !missing && !failed && !ndis)
    printf "\npreflight: nodes=%d answered=%d failed=%d disagree=%s status=%s\n",
           (expect > 0 ? expect : n), n, failed, (dis == "" ? "none" : dis), (ok ? "OK" : "FAIL")
    exit ok ? 0 : 1
}
'
