#!/bin/sh
# dist.two_hosts_netns (CMakeLists.txt): a 2-rank job across two "hosts" — two network namespaces
# of this machine joined by a veth pair (10.77.0.1/24 and 10.77.0.2/24) — launched the way a job
# across machines is (`mpirun -H host1,host2`), with a launch agent in place of ssh that runs the
# command in the namespace of the host it is given, and MPI's traffic on TCP over the veth only
# (no shared memory between the ranks). Exit code 77 (ctest's SKIP_RETURN_CODE) where namespaces
# cannot be made (not root, no CAP_SYS_ADMIN / CAP_NET_ADMIN).
#
#   dist_two_hosts_netns.sh MPIEXEC PROGRAM [ARGS...]
set -u
mpiexec=$1
shift
skip() {
  echo "SKIP: $*"
  exit 77
}
fail() {
  echo "FAIL: $*"
  exit 1
}
[ "$(id -u)" -eq 0 ] || skip "network namespaces need root (CAP_SYS_ADMIN and CAP_NET_ADMIN); this is uid $(id -u)"
command -v ip >/dev/null 2>&1 || skip "no 'ip' command (iproute2) to make network namespaces with"

# Names unique to this run (two runs at once each have their own pair); interface names <= 15 chars.
tag=$$
ns1=stepscope_host1_$tag
ns2=stepscope_host2_$tag
veth1=ssveth1_$tag
veth2=ssveth2_$tag
ip1=10.77.0.1
ip2=10.77.0.2
dir=$(mktemp -d "${TMPDIR:-/tmp}/stepscope_netns.XXXXXX") || exit 1
cleanup() {
  ip netns del "$ns1" 2>/dev/null
  ip netns del "$ns2" 2>/dev/null # deleting a namespace deletes the veth end in it, and its peer
  ip link del "$veth1" 2>/dev/null
  rm -rf "$dir"
}
trap cleanup EXIT
trap 'exit 1' INT TERM HUP

if ! ip netns add "$ns1" 2>"$dir/err"; then
  skip "cannot make a network namespace ($(cat "$dir/err")): needs CAP_SYS_ADMIN"
fi
ip netns add "$ns2" || fail "ip netns add $ns2"
ip link add "$veth1" type veth peer name "$veth2" 2>"$dir/err" ||
  skip "cannot make a veth pair ($(cat "$dir/err")): needs CAP_NET_ADMIN and the veth driver"
ip link set "$veth1" netns "$ns1" || fail "moving $veth1 into $ns1"
ip link set "$veth2" netns "$ns2" || fail "moving $veth2 into $ns2"
ip -n "$ns1" addr add "$ip1/24" dev "$veth1" || fail "address of $veth1"
ip -n "$ns2" addr add "$ip2/24" dev "$veth2" || fail "address of $veth2"
for ns in "$ns1" "$ns2"; do ip -n "$ns" link set lo up || fail "lo up in $ns"; done
ip -n "$ns1" link set "$veth1" up || fail "$veth1 up"
ip -n "$ns2" link set "$veth2" up || fail "$veth2 up"
if command -v ping >/dev/null 2>&1; then
  ip netns exec "$ns1" ping -c 1 -W 5 "$ip2" >/dev/null 2>&1 || fail "$ip2 does not answer from $ns1 over the veth pair"
fi

# Open MPI's launch agent (plm_rsh_agent), in ssh's place: called as `agent HOST COMMAND...`, where
# COMMAND is for a shell (ssh hands it to the remote one).
cat >"$dir/agent" <<EOF
#!/bin/sh
host=\$1
shift
case "\$host" in
  $ip1) ns=$ns1 ;;
  $ip2) ns=$ns2 ;;
  *) echo "netns launch agent: unknown host \$host (expected $ip1 or $ip2)" >&2; exit 1 ;;
esac
exec ip netns exec "\$ns" /bin/sh -c "\$*"
EOF
chmod +x "$dir/agent"

# mpirun itself runs on "host 1"; the rank of host 2 starts through the agent. TCP only, on the
# veth subnet only, for both MPI's data (btl) and its control channel (oob). (ctest's environment
# is the other MPI tests': its shared-memory btl is replaced here; its ASAN_OPTIONS, which spare
# the sanitizer build Open MPI's own leaks, reach both ranks.)
export OMPI_MCA_btl=self,tcp
export OMPI_MCA_btl_tcp_if_include=10.77.0.0/24
export OMPI_MCA_oob_tcp_if_include=10.77.0.0/24
export OMPI_MCA_plm_rsh_agent="$dir/agent"
echo "== mpirun -np 2 -H $ip1,$ip2 $* (namespaces $ns1, $ns2)"
# One rank per host: MPI must see two machines (dist::local_size() 1 on each; dist_test checks it).
export STEPSCOPE_TEST_LOCAL_SIZE=1
forward="-x STEPSCOPE_TEST_LOCAL_SIZE"
[ -z "${ASAN_OPTIONS:-}" ] || forward="$forward -x ASAN_OPTIONS"
# shellcheck disable=SC2086 # $forward is several words on purpose
timeout 50 ip netns exec "$ns1" "$mpiexec" -np 2 -H "$ip1,$ip2" $forward "$@" >"$dir/job.log" 2>&1
code=$?
cat "$dir/job.log"
[ "$code" -ne 124 ] || fail "the job did not end within 50 s"
[ "$code" -eq 0 ] || fail "the job exited with $code"

# The ranks really talked over the veth pair: it carried their traffic.
bytes=$(ip netns exec "$ns2" cat "/sys/class/net/$veth2/statistics/rx_bytes")
echo "$veth2 received $bytes bytes"
[ "$bytes" -gt 10000 ] || fail "the veth pair carried only $bytes bytes: the ranks did not talk over it"
echo "PASS"
