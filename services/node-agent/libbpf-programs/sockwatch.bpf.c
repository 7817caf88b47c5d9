// SPDX-License-Identifier: GPL-2.0-only
/*
 * sockwatch: one tp_btf program on the inet_sock_set_state tracepoint that reports the TCP
 * transitions the node agent needs (docs/design/node-agent.md#kernel-program):
 *
 *   - a socket starts listening                  -> SW_LISTEN
 *   - a listening socket closes                  -> SW_LISTEN_CLOSED
 *   - a connect() completes (SYN_SENT -> EST)    -> SW_OUTBOUND
 *   - an accepted connection completes (SYN_RECV -> EST) -> SW_INBOUND
 *
 * Every record names the socket's own cgroup and network namespace. The task running the
 * transition is not used: the passive side of a handshake runs in the client's context.
 *
 * The license is GPL because bpf_get_socket_cookie and the ring-buffer helpers are only
 * offered to GPL-compatible programs.
 */
#include "sockwatch.h"
#include <bpf/bpf_helpers.h>
#include <bpf/bpf_core_read.h>
#include <bpf/bpf_tracing.h>
#include <bpf/bpf_endian.h>

char LICENSE[] SEC("license") = "GPL";

/* 1 MiB holds 14563 records (64 bytes each plus an 8-byte header). */
struct {
	__uint(type, BPF_MAP_TYPE_RINGBUF);
	__uint(max_entries, 1 << 20);
} EVENTS SEC(".maps");

/* Records that found the ring buffer full. */
struct {
	__uint(type, BPF_MAP_TYPE_ARRAY);
	__uint(max_entries, 1);
	__type(key, __u32);
	__type(value, __u64);
} DROPS SEC(".maps");

/* The socket's cgroup v2 id on either layout of sock_cgroup_data; 0 when it has none. */
static __always_inline __u64 sock_cgroup_id(const struct sock *sk)
{
	if (bpf_core_field_exists(sk->sk_cgrp_data.cgroup))
		return sk->sk_cgrp_data.cgroup->kn->id;
	struct sock_cgroup_data___old *old = (void *)&sk->sk_cgrp_data;
	__u64 val = BPF_CORE_READ(old, val);
	/* Bit 0 set means the word holds a v1 class id, not a pointer. */
	if (!val || (val & 1))
		return 0;
	return BPF_CORE_READ((struct cgroup *)val, kn, id);
}

static __always_inline void count_drop(void)
{
	__u32 zero = 0;
	__u64 *n = bpf_map_lookup_elem(&DROPS, &zero);
	if (n)
		__sync_fetch_and_add(n, 1);
}

SEC("tp_btf/inet_sock_set_state")
int BPF_PROG(on_state, const struct sock *sk, int oldstate, int newstate)
{
	__u8 kind;

	if (newstate == TCP_LISTEN)
		kind = SW_LISTEN;
	/* Only LISTEN -> CLOSE: a new child also leaves LISTEN, towards SYN_RECV. */
	else if (oldstate == TCP_LISTEN && newstate == TCP_CLOSE)
		kind = SW_LISTEN_CLOSED;
	else if (oldstate == TCP_SYN_SENT && newstate == TCP_ESTABLISHED)
		kind = SW_OUTBOUND;
	else if (oldstate == TCP_SYN_RECV && newstate == TCP_ESTABLISHED)
		kind = SW_INBOUND;
	else
		return 0;
	if (sk->sk_protocol != IPPROTO_TCP)
		return 0;

	struct sockwatch_event *e = bpf_ringbuf_reserve(&EVENTS, sizeof(*e), 0);
	if (!e) {
		count_drop();
		return 0;
	}
	__builtin_memset(e, 0, sizeof(*e));

	/* tp_btf hands us a trusted pointer: plain loads, still relocated by CO-RE. */
	e->kind = kind;
	e->family = sk->__sk_common.skc_family;
	e->sport = sk->__sk_common.skc_num;
	e->dport = bpf_ntohs(sk->__sk_common.skc_dport);
	if (e->family == AF_INET6) {
		__builtin_memcpy(e->saddr, &sk->__sk_common.skc_v6_rcv_saddr, 16);
		__builtin_memcpy(e->daddr, &sk->__sk_common.skc_v6_daddr, 16);
	} else {
		__u32 local = sk->__sk_common.skc_rcv_saddr;
		__u32 peer = sk->__sk_common.skc_daddr;
		__builtin_memcpy(e->saddr, &local, 4);
		__builtin_memcpy(e->daddr, &peer, 4);
	}
	e->netns_ino = sk->__sk_common.skc_net.net->ns.inum;
	e->cgroup_id = sock_cgroup_id(sk);
	e->cookie = bpf_get_socket_cookie((void *)sk);
	bpf_ringbuf_submit(e, 0);
	return 0;
}
