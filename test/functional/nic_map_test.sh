#!/usr/bin/env bash
# SPDX-License-Identifier: BSD-3-Clause
# fc_info's NIC map on the synthetic 8-GPU, 4-NIC machine of the unit tests
# (FC_TOPO_FILE): every GPU's rank takes the NIC below its PCI switch, and
# FC_NICS narrows the map.
set -u
here=$(cd "$(dirname "$0")" && pwd)
fc_info=${FC_RUN:-}; fc_info=${fc_info%fc_run}fc_info
[ -x "$fc_info" ] || fc_info="$here/../../fc_info"
xml="$here/../unit/topo/two_socket_8gpu_4nic.xml"
fail=0
# tcp only: no RDMA provider's domains, so the map uses hwloc's NICs
out=$(FI_PROVIDER=tcp FC_TOPO_FILE="$xml" "$fc_info" 2>&1)
buses=(03 04 13 14 43 44 53 54)
for g in 0 1 2 3 4 5 6 7; do
    want="local rank $g (GPU 0000:${buses[$g]}:00.0): mlx5_$((g / 2)) PIX, shares PCI switch"
    if ! grep -qF "$want" <<<"$out"; then
        echo "FAIL: no '$want' in fc_info's NIC map"; fail=1
    fi
done
out=$(FI_PROVIDER=tcp FC_TOPO_FILE="$xml" FC_NICS=mlx5_3 "$fc_info" 2>&1)
want="local rank 0 (GPU 0000:03:00.0): mlx5_3 SYS"
grep -qF "$want" <<<"$out" || { echo "FAIL: no '$want' with FC_NICS=mlx5_3"; fail=1; }
[ $fail = 0 ] && echo "fc_info NIC map: passed"
[ $fail = 0 ] || { echo "$out" | sed -n '/^NIC map/,/^Checks/p'; exit 1; }
