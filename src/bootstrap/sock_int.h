/* SPDX-License-Identifier: BSD-3-Clause */
/* Inside the socket rendezvous: the wire format and the framing helpers
 * (sock_wire.c) that its server and client share. Only
 * src/bootstrap/sock_*.c include this. */
#ifndef FC_SOCK_INT_H
#define FC_SOCK_INT_H

#include <stddef.h>
#include <stdint.h>

#include "boot.h"

#define MAGIC "FCB1"
#define MAGIC_AUTH "FCA1" /* then length and a MUNGE credential, before the hello */
#define AUTH_MAX 4096u
#define VERSION 1u
#define HELLO_LEN 56
#define MSG_ACK 1u
#define MSG_RESULT 2u
#define MSG_ERROR 3u
#define MSG_CONTRIB 4u
#define MSG_BYE 5u
#define MSG_WHO 6u    /* a client that waited too long: who is missing? */
#define MSG_STATUS 7u /* the answer, as text */
#define MSG_AUTH 8u   /* the server's MUNGE credential */
#define MAX_BLOB (16u << 20)

/* CLOCK_MONOTONIC, in seconds. */
double sock_now_s(void);
/* 32 bits in network byte order. */
void sock_put32(unsigned char *p, uint32_t v);
uint32_t sock_get32(const unsigned char *p);
/* Writes all of buf to a (possibly nonblocking) socket within timeout s. */
int sock_send_all(int fd, const void *buf, size_t len, double timeout);
/* Reads exactly len bytes within timeout s; 0 ok, -1 error/EOF, -2 timeout. */
int sock_recv_all(int fd, void *buf, size_t len, double timeout);
/* One message: type, length, payload. 0 ok, -1 failed. */
int sock_send_msg(int fd, uint32_t type, const void *payload, size_t len, double timeout);

#endif /* FC_SOCK_INT_H */
