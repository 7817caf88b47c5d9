/* SPDX-License-Identifier: GPL-2.0-only */
/*
 * sockwatch.h: the few kernel types the sockwatch program reads, declared by hand instead of a
 * full vmlinux.h, plus the event layout shared with the Rust side
 * (docs/design/node-agent.md#kernel-program).
 *
 * Every struct below is a partial view: only the fields we read are named. The
 * preserve_access_index attribute makes clang record each field access as a CO-RE relocation,
 * so the loader rewrites the offsets against the running kernel's BTF; the layouts here never
 * have to match the kernel's byte for byte.
 */
#ifndef SOCKWATCH_H
#define SOCKWATCH_H

#include <linux/types.h>
#include <linux/bpf.h>

#define AF_INET 2
#define AF_INET6 10
#define IPPROTO_TCP 6

/* The TCP states the program distinguishes (values from the kernel's tcp_states.h). */
enum {
	TCP_ESTABLISHED = 1,
	TCP_SYN_SENT = 2,
	TCP_SYN_RECV = 3,
	TCP_CLOSE = 7,
	TCP_LISTEN = 10,
};

#pragma clang attribute push(__attribute__((preserve_access_index)), apply_to = record)

/* The union member is the real BTF field; `s6_addr` is only a C macro and has no BTF entry. */
struct in6_addr {
	union {
		__u8 u6_addr8[16];
	} in6_u;
};

struct ns_common {
	unsigned int inum;
};

struct net {
	struct ns_common ns;
};

typedef struct {
	struct net *net;
} possible_net_t;

struct kernfs_node {
	__u64 id;
};

struct cgroup {
	struct kernfs_node *kn;
};

/* Kernels from 5.15 keep a plain cgroup pointer in the socket. */
struct sock_cgroup_data {
	struct cgroup *cgroup;
};

/* Older kernels packed the pointer into a u64 (the ___old suffix is a CO-RE flavour). */
struct sock_cgroup_data___old {
	__u64 val;
};

struct sock_common {
	__be32 skc_daddr;
	__be32 skc_rcv_saddr;
	__be16 skc_dport;
	__u16 skc_num;
	unsigned short skc_family;
	possible_net_t skc_net;
	struct in6_addr skc_v6_daddr;
	struct in6_addr skc_v6_rcv_saddr;
};

struct sock {
	struct sock_common __sk_common;
	__u16 sk_protocol;
	struct sock_cgroup_data sk_cgrp_data;
};

#pragma clang attribute pop

/* What a record reports. The numbers are part of the format the Rust side parses. */
enum sockwatch_kind {
	SW_LISTEN = 1,
	SW_LISTEN_CLOSED = 2,
	SW_OUTBOUND = 3,
	SW_INBOUND = 4,
};

/*
 * One ring-buffer record: 64 bytes, native byte order, fixed offsets (the Rust parser reads
 * each field at the offset written next to it; change both together).
 */
struct sockwatch_event {
	__u64 cgroup_id;  /*  0: cgroup v2 id of the socket, the inode of its cgroup directory */
	__u8 saddr[16];   /*  8: local address; IPv4 uses the first 4 bytes */
	__u8 daddr[16];   /* 24: peer address; IPv4 uses the first 4 bytes */
	__u32 netns_ino;  /* 40: inode of the socket's network namespace */
	__u16 sport;      /* 44: local port, host order */
	__u16 dport;      /* 46: peer port, host order */
	__u16 family;     /* 48: AF_INET or AF_INET6 */
	__u8 kind;        /* 50: enum sockwatch_kind */
	__u8 _pad[5];     /* 51: zero */
	__u64 cookie;     /* 56: socket cookie, pairs a LISTEN with its close */
};

#endif
